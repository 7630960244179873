"""`shoal-migrate`: move topics, records, group positions and ACLs from Shoal to a Kafka cluster (or any broker
speaking Kafka's protocol), so that clients only change `bootstrap.servers`. See docs/operations.md.

    shoal-migrate copy   --source S --target T --state FILE [--topic NAME ...]   topics, configs, records
    shoal-migrate groups --source S --target T --state FILE [--group ID ...]     committed and share offsets
    shoal-migrate acls   --source S --target T                                   ACLs
    shoal-migrate quotas --source S --target T                                   client quotas
    shoal-migrate users  --source S --target T --passwords FILE [--user NAME ...] SCRAM users

`copy` creates each topic on the target with the source's partition count and the configs set on it
(DescribeConfigs -> CreateTopics, or IncrementalAlterConfigs when it exists), then appends each source
partition's records to the same target partition in order (key, value, headers, timestamp; read_committed, so
aborted records are left out) with an idempotent producer, up to the end the source has when the partition is
reached. It records where every record landed in the state file (offset_map.py), saved only after the target
acknowledged them: run it again and it copies what is new; after a failure it resumes, skipping the records the
target already holds (the target's end offset beyond the saved state). Only this tool may write to the target
topics while migrating.

`groups` translates through that map: each consumer group's committed offsets (ListGroups, OffsetFetch ->
OffsetCommit on the target) and each share group's start offsets (DescribeShareGroupOffsets ->
AlterShareGroupOffsets), plus the configs set on the groups. Groups must be empty on both sides.

`quotas` copies every client quota (DescribeClientQuotas -> AlterClientQuotas). `users` creates the source's
SCRAM users on the target with the same mechanisms and iteration counts (DescribeUserScramCredentials ->
AlterUserScramCredentials). Neither Shoal nor Kafka keeps a user's password or salted password, only the keys
derived from it (StoredKey, ServerKey), while AlterUserScramCredentials takes a salted password: so the passwords
are given in a file and salted again, as `kafka-configs --add-config 'SCRAM-SHA-512=[password=...]'` does.

Exit codes: 0 done, 1 a usage error or anything that could not be migrated.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from protocol.errors import ErrorCode
from shoal_client.admin import AdminError, ShareGroupAdmin, error_name
from shoal_client.cli_common import COMMAND_FAILURES, ToolParser, UsageError
from shoal_client.connection import BrokerConnection, parse_bootstrap
from shoal_client.offset_map import MigrationState, PartitionCopy
from shoal_client.security import ClientSecurity, load_properties

DESCRIPTION = ("Migrates topics (partitions, configs, records), consumer-group and share-group offsets and ACLs "
               "from a source cluster to a target cluster.")
CHECKPOINT_RECORDS = 50_000  # records between saves of the state file (each waits for the target's acks)
CHECKPOINT_S = 5.0
TIMEOUT_S = 30.0
DESCRIBE_ACLS = 29
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
SCRAM_MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism types


class MigrationError(Exception):
    """Something could not be migrated: message printed, exit code 1."""


def build_parser() -> argparse.ArgumentParser:
    p = ToolParser(prog="shoal-migrate", description=DESCRIPTION, allow_abbrev=False)
    sub = p.add_subparsers(dest="command", metavar="{copy,groups,acls,quotas,users}")

    def common(name: str, help_text: str, state: bool) -> argparse.ArgumentParser:
        s = sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        s.add_argument("--source", required=True, metavar="HOST:PORT[,...]", help="The source's bootstrap servers.")
        s.add_argument("--target", required=True, metavar="HOST:PORT[,...]", help="The target's bootstrap servers.")
        s.add_argument("--source-config", metavar="FILE",
                       help="Client properties for the source (librdkafka's names: security.protocol, "
                            "sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...).")
        s.add_argument("--target-config", metavar="FILE", help="Client properties for the target (as above).")
        if state:
            s.add_argument("--state", required=True, metavar="FILE",
                           help="Where the copy records source offset -> target offset per partition (JSON); "
                                "`copy` resumes from it, `groups` translates with it.")
        return s

    c = common("copy", "Create the topics on the target and copy their records (resumable).", True)
    c.add_argument("--topic", action="append", metavar="NAME",
                   help="A topic to copy (repeatable); default: every topic but the internal ones (__*).")
    c.add_argument("--replication-factor", type=int, default=-1, metavar="N",
                   help="Replication factor of the topics created on the target (default: the target's "
                        "default.replication.factor).")
    g = common("groups", "Translate consumer-group committed offsets and share-group start offsets.", True)
    g.add_argument("--group", action="append", metavar="ID",
                   help="A group to migrate (repeatable); default: every consumer and share group.")
    common("acls", "Copy every ACL (DescribeAcls on the source -> CreateAcls on the target).", False)
    common("quotas", "Copy every client quota (DescribeClientQuotas -> AlterClientQuotas).", False)
    u = common("users", "Create the source's SCRAM users on the target (same mechanisms and iterations), with "
                        "their passwords from a file.", False)
    u.add_argument("--passwords", required=True, metavar="FILE",
                   help="A properties file `USER=PASSWORD`, one line per user (neither side can tell a password: "
                        "SCRAM keeps only keys derived from it). Keep it private and delete it afterwards.")
    u.add_argument("--user", action="append", metavar="NAME",
                   help="A user to migrate (repeatable); default: every SCRAM user of the source.")
    return p


# ---------------------------------------------------------------------- clients


class Side:
    """One cluster: its bootstrap servers and client properties, and the clients made from them."""

    def __init__(self, bootstrap: str, config_path: str | None) -> None:
        self.bootstrap = bootstrap
        self.props = load_properties(config_path) if config_path else {}
        self.security = ClientSecurity.from_properties(self.props)
        self._admin: Any = None

    def conf(self, **extra: Any) -> dict[str, Any]:
        return {**self.props, "bootstrap.servers": self.bootstrap, **extra}

    @property
    def admin(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient(self.conf())
        return self._admin

    def describe_acls_error(self) -> int:
        """The error code of a DescribeAcls matching every ACL, from the first bootstrap server. librdkafka
        answers an empty list where the broker says SECURITY_DISABLED (no authorizer); this tells them apart."""
        host, port = parse_bootstrap(self.bootstrap)[0]
        conn = BrokerConnection(host, port, client_id="shoal-migrate", timeout_s=TIMEOUT_S, security=self.security)
        try:
            any_ = 1  # ResourceType / PatternType / AclOperation / AclPermissionType ANY
            body = {"resource_type_filter": any_, "resource_name_filter": None, "pattern_type_filter": any_,
                    "principal_filter": None, "host_filter": None, "operation": any_, "permission_type": any_}
            return conn.call(DESCRIBE_ACLS, conn.version(DESCRIBE_ACLS, 1), body).error_code
        finally:
            conn.close()

    def connect(self) -> BrokerConnection:
        """A connection to the first bootstrap server (a cluster's brokers forward what the controller decides)."""
        host, port = parse_bootstrap(self.bootstrap)[0]
        return BrokerConnection(host, port, client_id="shoal-migrate", timeout_s=TIMEOUT_S, security=self.security)

    def groups_admin(self) -> ShareGroupAdmin:
        return ShareGroupAdmin(self.bootstrap, security=self.security, timeout_s=TIMEOUT_S,
                               client_id="shoal-migrate")


def _result(future: Any) -> Any:
    return future.result(timeout=TIMEOUT_S)


# ---------------------------------------------------------------------- copy


def topic_configs(side: Side, topics: Sequence[str]) -> dict[str, dict[str, str]]:
    """The configs set on each topic (DescribeConfigs entries whose source is the topic itself)."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType
    if not topics:
        return {}
    futures = side.admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics])
    out: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        entries = _result(future)
        out[resource.name] = {name: e.value for name, e in entries.items()
                              if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None}
    return out


def prepare_topics(source: Side, target: Side, wanted: Sequence[str] | None, replication: int,
                   out: TextIO) -> dict[str, int]:
    """Create (or update) the topics on the target; topic -> partition count."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic
    from confluent_kafka.admin import ResourceType as RT
    src_md = source.admin.list_topics(timeout=TIMEOUT_S).topics
    if wanted:
        missing = [t for t in wanted if t not in src_md]
        if missing:
            raise MigrationError(f"Topics not found on the source: {', '.join(missing)}")
        names = list(dict.fromkeys(wanted))
    else:
        names = sorted(t for t in src_md if not t.startswith("__"))
    counts = {t: len(src_md[t].partitions) for t in names}
    configs = topic_configs(source, names)
    tgt_md = target.admin.list_topics(timeout=TIMEOUT_S).topics
    new = [NewTopic(t, counts[t], replication, config=configs[t]) for t in names if t not in tgt_md]
    for name, future in (target.admin.create_topics(new) if new else {}).items():
        _result(future)
        print(f"Created topic {name} with {counts[name]} partitions and configs {configs[name]}", file=out)
    for t in names:
        if t not in tgt_md:
            continue
        have = len(tgt_md[t].partitions)
        if have < counts[t]:
            grown = target.admin.create_partitions([NewPartitions(t, counts[t])])
            _result(grown[t])
            print(f"Topic {t}: partitions {have} -> {counts[t]}", file=out)
        if configs[t]:
            resource = ConfigResource(RT.TOPIC, t, incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs[t].items()])
            for future in target.admin.incremental_alter_configs([resource]).values():
                _result(future)
        print(f"Topic {t} exists on the target; configs set: {configs[t]}", file=out)
    _wait_for_leaders(target, counts)
    return counts


def _wait_for_leaders(target: Side, counts: dict[str, int]) -> None:
    """Until the target's metadata shows every topic with all its partitions led (a cluster's brokers learn of
    new topics a moment after CreateTopics answers)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        topics = target.admin.list_topics(timeout=TIMEOUT_S).topics
        waiting = [t for t, n in counts.items() if t not in topics or topics[t].error is not None
                   or len(topics[t].partitions) < n or any(p.leader < 0 for p in topics[t].partitions.values())]
        if not waiting:
            return
        if time.monotonic() >= deadline:
            raise MigrationError(f"Topics without leaders on the target: {', '.join(waiting)}")
        time.sleep(0.2)


def _target_ends(target: Side, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Each target partition's end offset. On a cluster, a partition just created may be answered for a moment
    with NOT_LEADER_OR_FOLLOWER (or no leader yet) by the broker the metadata names, and librdkafka's own
    metadata may not list it yet (_UNKNOWN_PARTITION): asked again until TIMEOUT_S."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    not_yet = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
               KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
    probe = Consumer(target.conf(**{"group.id": "shoal-migrate", "enable.auto.commit": False}))
    ends: dict[tuple[str, int], int] = {}
    try:
        for t, p in partitions:
            deadline = time.monotonic() + TIMEOUT_S
            while (t, p) not in ends:
                try:
                    ends[(t, p)] = probe.get_watermark_offsets(TopicPartition(t, p), timeout=TIMEOUT_S,
                                                               cached=False)[1]
                except KafkaException as err:
                    error = err.args[0]
                    if not (error.retriable() or error.code() in not_yet) or time.monotonic() >= deadline:
                        raise
                    time.sleep(0.2)
        return ends
    finally:
        probe.close()


def copy_records(source: Side, target: Side, state: MigrationState, state_path: Path, counts: dict[str, int],
                 out: TextIO) -> int:
    """Copy every partition from where the state says up to the source's end; the number of records written."""
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, Producer
    from confluent_kafka import TopicPartition as TP

    partitions = [(t, p) for t, n in counts.items() for p in range(n)]
    ends = _target_ends(target, partitions)
    skip: dict[tuple[str, int], int] = {}
    for tp in partitions:
        copy = state.partitions.get(tp)
        if copy is None:
            if ends[tp] > 0:
                print(f"Warning: target partition {tp[0]}-{tp[1]} already holds {ends[tp]} records; the copy "
                      f"appends after them", file=out)
            state.partitions[tp] = PartitionCopy(ends[tp])
        elif ends[tp] < copy.target_end:
            raise MigrationError(f"Target partition {tp[0]}-{tp[1]} ends at {ends[tp]}, below the "
                                 f"{copy.target_end} the state file recorded: it lost records")
        else:
            # Written by a run that died before saving the state: already on the target, in order.
            skip[tp] = ends[tp] - copy.target_end
    state.save(state_path)

    consumer = Consumer(source.conf(**{
        "group.id": "shoal-migrate", "enable.auto.commit": False, "enable.auto.offset.store": False,
        "isolation.level": "read_committed", "enable.partition.eof": True, "auto.offset.reset": "earliest"}))
    producer = Producer(target.conf(**{
        "enable.idempotence": True, "acks": "all", "linger.ms": 20, "message.max.bytes": 1_000_000_000}))
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}-{msg.partition()}: {err}")

    def checkpoint() -> None:
        remaining = producer.flush(TIMEOUT_S * 4)
        if remaining or failures:
            raise MigrationError(f"The target did not take every record ({remaining} unsent; "
                                 f"{'; '.join(failures[:5])}); run again to resume")
        state.save(state_path)

    written = 0
    try:
        consumer.assign([TP(t, p, OFFSET_BEGINNING if (start := state.partitions[(t, p)].next_source) is None
                            else start) for t, p in partitions])
        pending = set(partitions)
        since, last_save = 0, time.monotonic()
        while pending:
            for msg in consumer.consume(1000, timeout=1.0):
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                if topic is None or partition is None or (topic, partition) not in pending:
                    continue
                tp = (topic, partition)
                copy = state.partitions[tp]
                error = msg.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise MigrationError(f"Reading {topic}-{partition} from the source: {error}")
                if offset is None:  # never for a record or an end of partition (confluent-kafka's stubs allow it)
                    raise MigrationError(f"Reading {topic}-{partition} from the source: a message without an offset")
                if error is not None:
                    # The end the source has now: later records are for the next run.
                    copy.next_source = max(offset, copy.next_source or 0)
                    pending.discard(tp)
                    consumer.incremental_unassign([TP(*tp)])
                    continue
                copy.add(offset)
                if skip.get(tp, 0) > 0:
                    skip[tp] -= 1
                    continue
                kind, ts = msg.timestamp()
                extra: dict[str, Any] = {} if kind == TIMESTAMP_NOT_AVAILABLE else {"timestamp": ts}
                while True:
                    try:
                        producer.produce(tp[0], value=msg.value(), key=msg.key(), partition=tp[1],
                                         headers=msg.headers(), on_delivery=delivered, **extra)
                        break
                    except BufferError:
                        producer.poll(0.1)
                producer.poll(0)
                written += 1
                since += 1
            if since >= CHECKPOINT_RECORDS or time.monotonic() - last_save >= CHECKPOINT_S:
                checkpoint()
                since, last_save = 0, time.monotonic()
        checkpoint()
    finally:
        consumer.close()
    for tp in partitions:
        copy = state.partitions[tp]
        print(f"{tp[0]}-{tp[1]}: {copy.copied} records copied in all, source next offset {copy.next_source}, "
              f"target end offset {copy.target_end}", file=out)
    return written


def _check_pair(state: MigrationState, a: argparse.Namespace) -> None:
    if (state.source, state.target) != (a.source, a.target):
        raise MigrationError(f"The state file {a.state} was written for --source {state.source} --target "
                             f"{state.target}: use those (or another state file)")


def run_copy(a: argparse.Namespace, source: Side, target: Side, out: TextIO) -> None:
    state_path = Path(a.state)
    state = MigrationState.load(state_path) or MigrationState(a.source, a.target)
    _check_pair(state, a)
    counts = prepare_topics(source, target, a.topic, a.replication_factor, out)
    written = copy_records(source, target, state, state_path, counts, out)
    print(f"Copied {written} records; state saved in {state_path}", file=out)


# ---------------------------------------------------------------------- groups


def _load_state(path: str) -> MigrationState:
    state = MigrationState.load(Path(path))
    if state is None:
        raise MigrationError(f"No state file {path}: run `shoal-migrate copy` first")
    return state


def group_configs(source: Side, target: Side, group: str, out: TextIO, problems: list[str]) -> None:
    """Copy the configs set on a group (share.auto.offset.reset, ...) with IncrementalAlterConfigs. A target
    that refuses one (e.g. a config its release does not know) is reported; the offsets are migrated anyway."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )
    resource = ConfigResource(ResourceType.GROUP, group)
    # Keep the dict confluent-kafka returns until its futures are done: they stop resolving once it is dropped.
    futures = source.admin.describe_configs([resource])
    entries = _result(futures[resource])
    dynamic = {k: e.value for k, e in entries.items()
               if e.source == ConfigSource.GROUP_CONFIG.value and e.value is not None}
    if not dynamic:
        return
    change = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in dynamic.items()])
    try:
        for future in target.admin.incremental_alter_configs([change]).values():
            _result(future)
    except KafkaException as e:
        problems.append(f"group {group}: configs {dynamic} on the target: {e}")
        return
    print(f"Group {group}: configs set {dynamic}", file=out)


def _translate(state: MigrationState, group: str, topic: str, p: int, offset: int, out: TextIO,
               problems: list[str]) -> int | None:
    target = state.translate(topic, p, offset)
    if target is None:
        problems.append(f"group {group}: {topic}-{p} was not copied")
        return None
    copy = state.partitions[(topic, p)]
    if copy.next_source is not None and offset > copy.next_source:
        problems.append(f"group {group}: {topic}-{p} offset {offset} is beyond the copy "
                        f"({copy.next_source}): run `copy` again")
        return None
    print(f"{group} {topic} {p} {offset} -> {target}", file=out)
    return target


def migrate_consumer_group(source: Side, target: Side, state: MigrationState, group: str, out: TextIO,
                           problems: list[str]) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    fetched = source.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    listed = _result(fetched[group])
    offsets = []
    for tp in listed.topic_partitions or []:
        if tp.error is not None:
            problems.append(f"group {group}: {tp.topic}-{tp.partition}: {tp.error}")
        elif tp.offset >= 0:
            translated = _translate(state, group, tp.topic, tp.partition, tp.offset, out, problems)
            if translated is not None:
                extra = {} if tp.metadata is None else {"metadata": tp.metadata}
                offsets.append(TopicPartition(tp.topic, tp.partition, translated, **extra))
    if offsets:
        request = ConsumerGroupTopicPartitions(group, offsets)
        altered = target.admin.alter_consumer_group_offsets([request])
        done = _result(altered[group])
        problems.extend(f"group {group}: {tp.topic}-{tp.partition} on the target: {tp.error}"
                        for tp in done.topic_partitions if tp.error is not None)


def migrate_share_group(source: ShareGroupAdmin, target: ShareGroupAdmin, state: MigrationState, group: str,
                        out: TextIO, problems: list[str]) -> None:
    offsets: dict[tuple[str, int], int] = {}
    for sp in source.share_group_offsets(group):
        if sp.error_code != 0:
            problems.append(f"share group {group}: {sp.topic}-{sp.partition}: {error_name(sp.error_code)}")
        elif sp.start_offset >= 0:
            translated = _translate(state, group, sp.topic, sp.partition, sp.start_offset, out, problems)
            if translated is not None:
                offsets[(sp.topic, sp.partition)] = translated
    if offsets:
        for (topic, p), (code, message) in target.alter_share_group_offsets(group, offsets).items():
            if code != 0:
                problems.append(f"share group {group}: {topic}-{p} on the target: {message or error_name(code)}")


def run_groups(a: argparse.Namespace, source: Side, target: Side, out: TextIO) -> list[str]:
    state = _load_state(a.state)
    _check_pair(state, a)
    problems: list[str] = []
    with source.groups_admin() as src, target.groups_admin() as tgt:
        listed = dict(src.list_groups(types=("consumer", "classic", "share")))
        share = {g for g, _ in src.list_groups(types=("share",))}
        groups = list(dict.fromkeys(a.group)) if a.group else sorted(listed)
        print("GROUP TOPIC PARTITION SOURCE-OFFSET -> TARGET-OFFSET", file=out)
        for group in groups:
            if group not in listed:
                problems.append(f"group {group}: not found on the source")
                continue
            if listed[group] not in ("Empty",):
                problems.append(f"group {group} is {listed[group]} on the source: stop its members first")
                continue
            group_configs(source, target, group, out, problems)
            if group in share:
                migrate_share_group(src, tgt, state, group, out, problems)
            else:
                migrate_consumer_group(source, target, state, group, out, problems)
    return problems


# ---------------------------------------------------------------------- ACLs


def run_acls(source: Side, target: Side, out: TextIO) -> list[str]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )
    # None matches any name, principal and host (confluent-kafka's documented filter; its stubs want str)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                                  AclOperation.ANY, AclPermissionType.ANY)
    if source.describe_acls_error() == ErrorCode.SECURITY_DISABLED:
        print("The source has no authorizer (SECURITY_DISABLED): no ACLs to copy", file=out)
        return []
    bindings = _result(source.admin.describe_acls(everything))
    if not bindings:
        print("No ACLs on the source", file=out)
        return []
    problems = []
    for binding, future in target.admin.create_acls(bindings).items():
        try:
            _result(future)
            print(f"Created {binding}", file=out)
        except KafkaException as err:  # reported per binding, as kafka-acls does
            problems.append(f"{binding}: {err}")
    return problems


# ---------------------------------------------------------------------- client quotas

QuotaEntity = tuple[tuple[str, str | None], ...]  # ((entity type, name or None for the default), ...)


def quota_entries(response: Any) -> dict[QuotaEntity, dict[str, float]]:
    """{entity: {quota key: value}} of a DescribeClientQuotas response."""
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry["values"]} for entry in response.entries or ()}


def alter_quotas_body(entries: dict[QuotaEntity, dict[str, float]]) -> dict[str, Any]:
    """An AlterClientQuotas request setting every key of every entity."""
    return {"validate_only": False, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
         "ops": [{"key": k, "value": float(v), "remove": False} for k, v in sorted(values.items())]}
        for entity, values in sorted(entries.items(), key=lambda kv: repr(kv[0]))]}


def describe_quotas(side: Side) -> dict[QuotaEntity, dict[str, float]]:
    """Every client quota of a cluster: no component and not strict matches every entity."""
    with side.connect() as conn:
        resp = conn.call(DESCRIBE_CLIENT_QUOTAS, conn.version(DESCRIBE_CLIENT_QUOTAS, 0, 1),
                         {"components": [], "strict": False})
    if resp.error_code != 0:
        raise MigrationError(f"DescribeClientQuotas on {side.bootstrap}: {resp.error_message or error_name(resp.error_code)}")
    return quota_entries(resp)


def _entity_text(entity: QuotaEntity) -> str:
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def run_quotas(source: Side, target: Side, out: TextIO) -> list[str]:
    quotas = describe_quotas(source)
    if not quotas:
        print("No client quotas on the source", file=out)
        return []
    with target.connect() as conn:
        resp = conn.call(ALTER_CLIENT_QUOTAS, conn.version(ALTER_CLIENT_QUOTAS, 0, 1), alter_quotas_body(quotas))
    problems = []
    for entry in resp.entries:
        entity = tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity))
        if entry.error_code != 0:
            problems.append(f"quotas of {_entity_text(entity)}: {entry.error_message or error_name(entry.error_code)}")
        else:
            print(f"Quotas of {_entity_text(entity)}: {quotas[entity]}", file=out)
    return problems


# ---------------------------------------------------------------------- SCRAM users


def scram_plan(described: dict[str, list[tuple[int, int]]], passwords: dict[str, str],
               wanted: Sequence[str] | None) -> tuple[list[tuple[str, int, int, str]], list[str]]:
    """(user, mechanism type, iterations, password) to upsert on the target, and what cannot be migrated: each
    credential of each wanted source user, with the password the file gives for that user."""
    users = list(dict.fromkeys(wanted)) if wanted else sorted(described)
    plan: list[tuple[str, int, int, str]] = []
    problems: list[str] = []
    for user in users:
        credentials = described.get(user)
        if not credentials:
            problems.append(f"user {user}: no SCRAM credential on the source")
        elif user not in passwords:
            problems.append(f"user {user}: no password in the passwords file")
        else:
            plan.extend((user, mechanism, iterations, passwords[user]) for mechanism, iterations in credentials)
    return plan, problems


def describe_scram_users(side: Side) -> dict[str, list[tuple[int, int]]]:
    """user -> [(mechanism type, iterations)] of every SCRAM user."""
    described = _result(side.admin.describe_user_scram_credentials())
    return {user: [(int(info.mechanism.value), int(info.iterations)) for info in d.scram_credential_infos]
            for user, d in described.items()}


def run_users(a: argparse.Namespace, source: Side, target: Side, out: TextIO) -> list[str]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    plan, problems = scram_plan(describe_scram_users(source), load_properties(a.passwords), a.user)
    if not plan:
        print("No SCRAM users to migrate", file=out)
        return problems
    # librdkafka salts each password (a fresh random salt) and sends salt, salted password and iterations.
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism(mechanism), iterations),
                                            password.encode())
               for user, mechanism, iterations, password in plan]
    # One request per credential: a user's two mechanisms are two upsertions of the same user, which a single
    # request's per-user results could not tell apart.
    for upsert, (user, mechanism, iterations, _) in zip(upserts, plan, strict=True):
        try:
            _result(target.admin.alter_user_scram_credentials([upsert])[user])
        except KafkaException as err:
            problems.append(f"user {user} {SCRAM_MECHANISM_NAMES.get(mechanism, mechanism)} on the target: {err}")
            continue
        print(f"User {user}: {SCRAM_MECHANISM_NAMES.get(mechanism, mechanism)} with {iterations} iterations",
              file=out)
    return problems


# ---------------------------------------------------------------------- main


def run(argv: Sequence[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
        if a.command is None:
            raise UsageError("a command is required: copy, groups, acls, quotas or users")
    except UsageError as e:
        print(f"Error: {e}", file=err)
        parser.print_usage(err)
        return 1
    try:
        from confluent_kafka import KafkaException
    except ImportError:
        print("shoal-migrate needs confluent-kafka (Shoal's `migrate` extra: pip install 'confluent-kafka==2.16.1')",
              file=err)
        return 1
    failed: tuple[type[Exception], ...] = (MigrationError, KafkaException, OSError, AdminError, *COMMAND_FAILURES)
    try:
        source, target = Side(a.source, a.source_config), Side(a.target, a.target_config)
        if a.command == "copy":
            run_copy(a, source, target, out)
            problems: list[str] = []
        elif a.command == "groups":
            problems = run_groups(a, source, target, out)
        elif a.command == "quotas":
            problems = run_quotas(source, target, out)
        elif a.command == "users":
            problems = run_users(a, source, target, out)
        else:
            problems = run_acls(source, target, out)
    except failed as e:
        print(f"Error: {e or type(e).__name__}", file=err)
        return 1
    for problem in problems:
        print(f"Not migrated: {problem}", file=err)
    return 1 if problems else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
