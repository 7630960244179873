"""docs/operations.md's "MirrorMaker 2 instead of shoal-migrate", as tested: Kafka's MirrorMaker 2 in its dedicated
mode (org.apache.kafka.connect.mirror.MirrorMaker, what connect-mirror-maker.sh runs, from connect-mirror 4.3.1:
tests/helpers/mirror_maker.py) with a Shoal broker as its source cluster and a three-broker Kafka 4.4 cluster
(KRaft, replication factor 3, StandardAuthorizer) as its target, with the properties the docs give.

Shoal holds `orders` (3 partitions, retention.ms set; keys, a header, CreateTime timestamps), `profiles`
(compacted: updates of the same keys and a tombstone), `payments` (transactional: two committed transactions
around an aborted one), topic ACLs, and two consumer groups (a classic one and a KIP-848 consumer-protocol one)
that processed part of `orders` and committed. MirrorMaker 2 replicates while `orders` gets a fourth partition,
more records are produced to Shoal and the groups go on there, commit again and stop. Then:

- the cluster's topics hold the same records as Shoal's, record for record (offset, key, value, headers,
  timestamp, tombstone), with the same partition counts (the added one too) and topic configs, replication
  factor 3; `payments` holds the committed records only (MirrorMaker's source consumer reads read_committed, as
  set), at offsets of their own (the source's markers and aborted records are not copied);
- the topic ACLs arrive as MirrorMaker carries them (LITERAL ones; ALLOW WRITE left out, ALLOW ALL made READ);
- each group, started on the cluster, resumes at the offsets MirrorMaker translated from its last commit on Shoal:
  nothing skipped, exactly the committed offset where the group had read its partition to the end, and at most
  `offset.lag.max` records read again elsewhere (MirrorMaker emits an offset sync at least every offset.lag.max
  records and translates a committed offset to one past the nearest sync at or below it);
- MirrorMaker, stopped and started again, goes on where it stopped (records written meanwhile arrive once; a
  group committing on Shoal then gets its offsets on the cluster), reading its state back from Shoal;
- Shoal served every request MirrorMaker made (its internal topics on Shoal included: the offset syncs, and the
  Connect worker group, configs, offsets and status of the heartbeat flow kafka->shoal); the APIs it used and
  the error codes Shoal answered are printed, and MirrorMaker logged no ERROR.

The figures (records, translated offsets, times) are printed (`pytest -s`)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    ResourcePatternType,
    ResourceType,
)

from tests.helpers import prometheus_scrape
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.confluent_clients import create_topic
from tests.helpers.kafka_process import STANDARD_AUTHORIZER, KafkaCluster
from tests.helpers.migration_data import produce_orders, transactional_producer, write_payments
from tests.helpers.mirror_maker import MirrorMaker, MirrorMakerNotInstalled, lib_dir, version
from tests.helpers.waiting import wait_until

# The cut-over tests share a worker (tests/conftest.py): each starts a three-broker cluster, never both at once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka-cut-over")]

T0 = (int(time.time()) - 7200) * 1000  # record timestamps (CreateTime) the replication must keep
ORDERS_CONFIG = {"retention.ms": "864000000"}
PROFILES_CONFIG = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.3"}
OFFSET_LAG_MAX = 10
END = 32  # records in each of orders' partitions 0-2 in the end (partition 3, added later, stays empty)
# (resource pattern, principal, operation) on Shoal -> what MirrorMaker creates on the cluster (None: nothing)
ACLS = [(("orders", ResourcePatternType.LITERAL), "User:carol", AclOperation.READ, AclOperation.READ),
        (("profiles", ResourcePatternType.LITERAL), "User:erin", AclOperation.ALL, AclOperation.READ),
        (("orders", ResourcePatternType.LITERAL), "User:dave", AclOperation.WRITE, None),
        (("prof", ResourcePatternType.PREFIXED), "User:frank", AclOperation.READ, None)]
# (group, group.protocol): a classic group and a KIP-848 consumer group, both committing on Shoal
GROUPS = (("cg", "classic"), ("cg848", "consumer"))
# Where each group has processed `orders` up to before MirrorMaker starts, and before it stops on Shoal (records
# 0-59 are written first, 60-89 while MirrorMaker runs: 20 then 30 per partition). At the cut-over partition 0 is
# read to its end (its translated offset must be exact), the others a few records short of it (MirrorMaker keeps
# fewer offset syncs the further back they are: within offset.lag.max of the committed offset near the end).
FIRST = {"cg": {0: 12, 1: 5, 2: 20}, "cg848": {0: 3, 1: 17, 2: 9}}
LAST = {"cg": {0: 30, 1: 26, 2: 23}, "cg848": {0: 30, 1: 24, 2: 28}}
# Error codes Kafka too answers in the normal course of what MirrorMaker does: the KIP-394 JoinGroup handshake,
# its Connect worker group rejoining (REBALANCE_IN_PROGRESS), topics created by two herders at once, the metadata
# of a topic being created.
EXPECTED_ERRORS = {("JoinGroup", "MEMBER_ID_REQUIRED"), ("Heartbeat", "REBALANCE_IN_PROGRESS"),
                   ("SyncGroup", "REBALANCE_IN_PROGRESS"), ("OffsetCommit", "REBALANCE_IN_PROGRESS"),
                   ("CreateTopics", "TOPIC_ALREADY_EXISTS"), ("Metadata", "LEADER_NOT_AVAILABLE"),
                   ("Metadata", "UNKNOWN_TOPIC_OR_PARTITION")}
# What MirrorMaker asks of its source cluster (besides Metadata, ApiVersions, FindCoordinator): topic configs and
# ACLs, the records (ListOffsets, Fetch), the groups' committed offsets, its offset-syncs topic (CreateTopics,
# InitProducerId, Produce), and the Connect worker group of the heartbeat flow.
MM2_APIS = {"DescribeConfigs", "DescribeAcls", "ListOffsets", "Fetch", "ListGroups", "OffsetFetch", "CreateTopics",
            "InitProducerId", "Produce", "JoinGroup", "SyncGroup", "Heartbeat", "DescribeCluster"}


@pytest.fixture(scope="module")
def kafka_cluster_overrides() -> dict[str, str]:
    # ACLs need an authorizer; every client here is ANONYMOUS on PLAINTEXT, a super user.
    return {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def shoal(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("shoal-mm2-source")
    proc = BrokerProcess(tmp / "data", tmp / "broker.log", overrides={
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS",
        "group.initial.rebalance.delay.ms": "0", "metrics.prometheus.listener": "127.0.0.1:0"}).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def mirror_maker_jars() -> None:
    try:
        lib_dir()
    except MirrorMakerNotInstalled as exc:
        pytest.fail(str(exc), pytrace=False)


def mm2_properties(shoal: str, cluster: str) -> dict[str, str]:
    """The properties docs/operations.md gives, with this test's addresses and short intervals."""
    return {
        "clusters": "shoal, kafka",
        "shoal.bootstrap.servers": shoal,
        "kafka.bootstrap.servers": cluster,
        "shoal->kafka.enabled": "true",
        # Every topic but internal ones (topics.exclude's default: __consumer_offsets, ..., its own).
        "shoal->kafka.topics": ".*",
        # Keep the topic names (the default policy would name them "shoal.orders").
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "replication.factor": "3",
        "sync.topic.configs.enabled": "true",
        "sync.topic.acls.enabled": "true",
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2",
        "offset.lag.max": str(OFFSET_LAG_MAX),
        # Copy committed records only (the default, read_uncommitted, copies aborted ones as plain records too).
        "shoal.consumer.isolation.level": "read_committed",
        # Find Connect's plugins by their ServiceLoader manifests, as MirrorMaker's own warning advises, rather
        # than by scanning every class of the classpath (10-15 s for each of its three Plugins on this machine).
        "plugin.discovery": "service_load",
        "shoal.plugin.discovery": "service_load",
        "kafka.plugin.discovery": "service_load",
        # The herder replicating to the cluster commits its tasks' offsets (and with them the latest offset sync of
        # each partition) every second instead of every minute.
        "kafka.offset.flush.interval.ms": "1000",
        # Shoal is one broker: what MirrorMaker creates there gets one replica. That is the offset-syncs topic
        # (offset-syncs.topic.location = source, the default) and, for the heartbeats it sends to Shoal (flow
        # kafka->shoal, on by default), its Connect worker's topics and the heartbeats topic.
        "offset-syncs.topic.replication.factor": "1",
        "shoal.config.storage.replication.factor": "1",
        "shoal.offset.storage.replication.factor": "1",
        "shoal.status.storage.replication.factor": "1",
        "kafka->shoal.heartbeats.topic.replication.factor": "1",
    }


# ---------------------------------------------------------------------- clients


def produce_profiles(bootstrap: str) -> None:
    """Keyed records of the compacted topic: updates of the same keys and a tombstone."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(12):
        p.produce("profiles", value=f"profile{i}".encode(), key=f"user{i % 4}".encode(), timestamp=T0 + i,
                  headers=[("rev", str(i).encode())])
    p.produce("profiles", value=None, key=b"user3", timestamp=T0 + 12)
    assert p.flush(60) == 0


def read_all(bootstrap: str, topic: str, partitions: int, want: int) -> list[tuple]:
    """(partition, offset, key, value, headers, timestamp) of every record of `topic`, from the start
    (read_committed)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple] = []
    try:
        def enough() -> bool:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append((m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.timestamp()))
            return len(got) >= want
        wait_until(enough, 90, f"{want} records of {topic} on {bootstrap}")
    finally:
        c.close()
    return sorted(got)


def group_member(bootstrap: str, group: str, protocol: str, reset: str = "earliest") -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "enable.auto.commit": False, "auto.offset.reset": reset}
    if protocol == "classic":
        conf["session.timeout.ms"] = 10000  # the consumer protocol takes the broker's session timeout
    c = Consumer(conf)
    c.subscribe(["orders"])
    return c


def process_up_to(c: Consumer, positions: dict[int, int]) -> list[bytes]:
    """Process the records of `orders` below `positions` (partition -> offset), one by one as fetched, then
    commit those positions; records fetched at or beyond them are not processed."""
    done: list[bytes] = []
    reached: dict[int, int] = {}

    def caught_up() -> bool:
        for m in c.consume(100, 0.5):
            assert m.error() is None, m.error()
            if m.offset() < positions[m.partition()]:
                done.append(m.value())
            reached[m.partition()] = max(reached.get(m.partition(), 0), m.offset() + 1)
        return all(reached.get(p, 0) >= o for p, o in positions.items())

    wait_until(caught_up, 90, f"the group to fetch up to {positions}")
    c.commit(offsets=[TopicPartition("orders", p, o) for p, o in positions.items()], asynchronous=False)
    return done


def resume(bootstrap: str, group: str, protocol: str, start: dict[int, int], end: int) -> dict[int, list[int]]:
    """The group's member on the cluster: the offsets of `orders` it reads, per partition, from `start` (the
    translated offsets) to `end`. auto.offset.reset=latest: without a committed offset it would read nothing."""
    c = group_member(bootstrap, group, protocol, reset="latest")
    got: dict[int, list[int]] = {p: [] for p in start}
    try:
        def done() -> bool:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                got[m.partition()].append(m.offset())
            return all(len(got[p]) >= end - o for p, o in start.items())
        wait_until(done, 90, f"group {group} to read orders to its end on the cluster")
    finally:
        c.close()
    return got


def committed(admin: AdminClient, group: str) -> dict[int, int]:
    request = [ConsumerGroupTopicPartitions(group)]
    try:
        result = admin.list_consumer_group_offsets(request)[group].result(30)
    except Exception:  # noqa: BLE001 - the group does not exist on the cluster yet
        return {}
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == "orders" and tp.offset >= 0}


def translated(admin: AdminClient, group: str) -> dict[int, int] | None:
    """The group's offsets on the cluster once MirrorMaker translated its last commit on Shoal as it promises:
    no offset ahead of the committed one, none more than offset.lag.max behind, partition 0 (read to its end)
    exact. None until then."""
    offsets = committed(admin, group)
    last = LAST[group]
    if set(offsets) != set(last):
        return None
    if offsets[0] != last[0] or any(not (last[p] - OFFSET_LAG_MAX <= offsets[p] <= last[p]) for p in last):
        return None
    return offsets


def shoal_requests(port: int) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Requests per API and error codes per (API, error) Shoal has answered, from its Prometheus endpoint."""
    samples = prometheus_scrape.scrape(port)
    requests = {dict(labels)["api"]: v for (name, labels), v in samples.items() if name == "shoal_requests_total"}
    errors = {(dict(labels)["api"], dict(labels)["error"]): v for (name, labels), v in samples.items()
              if name == "shoal_request_errors_total"}
    return requests, errors


# ---------------------------------------------------------------------- the replication


def test_mirror_maker_2_replicates_shoal_to_a_kafka_cluster(shoal: BrokerProcess, kafka_cluster: KafkaCluster,
                                                             kafka_registry, mirror_maker_jars, tmp_path) -> None:
    src, cluster = shoal.bootstrap, kafka_cluster.bootstrap
    src_admin, admin = AdminClient({"bootstrap.servers": src}), AdminClient({"bootstrap.servers": cluster})

    # ---- Shoal, populated: topics with configs, records, ACLs; the groups process part of orders and commit
    create_topic(src, "orders", 3, ORDERS_CONFIG)
    create_topic(src, "profiles", 1, PROFILES_CONFIG)
    produce_orders(src, range(60), t0=T0, flush_timeout_s=60)
    produce_profiles(src)
    create_topic(src, "payments", 1)
    # payments on Shoal: p0-p4 (offsets 0-4, marker 5), aborted x0-x2 (6-8, marker 9), p5-p9 (10-14, marker 15)
    write_payments(transactional_producer(src), [(range(5), True), (range(3), False), (range(5, 10), True)])
    for future in src_admin.create_acls([
            AclBinding(ResourceType.TOPIC, name, pattern, who, "*", op, AclPermissionType.ALLOW)
            for (name, pattern), who, op, _ in ACLS]).values():
        future.result(timeout=30)
    members = {group: group_member(src, group, protocol) for group, protocol in GROUPS}
    processed = {group: process_up_to(members[group], FIRST[group]) for group in members}
    # A third group commits now and comes back only once MirrorMaker has been restarted. (Every group exists
    # before MirrorMaker starts: a new group makes it reconfigure its checkpoint task, and a task stopped while
    # its stores start logs an ERROR of MirrorMaker's own, which the test would count.)
    late = group_member(src, "cg-late", "classic")
    process_up_to(late, {p: 2 for p in range(3)})
    late.close()

    # ---- MirrorMaker 2, as connect-mirror-maker.sh runs it
    before_mm2 = shoal_requests(shoal.ports["prometheus"])
    mm2 = MirrorMaker(tmp_path / "mm2", mm2_properties(src, cluster), registry=kafka_registry)
    t0 = time.monotonic()
    mm2.start()
    try:
        orders = read_all(cluster, "orders", 3, 60)
        first_copy_s = time.monotonic() - t0
        assert orders == read_all(src, "orders", 3, 60)

        # The overlap: orders gets a partition, producers still write to Shoal, the groups go on there, commit,
        # and stop.
        src_admin.create_partitions([NewPartitions("orders", 4)])["orders"].result(30)
        produce_orders(src, range(60, 90), t0=T0, flush_timeout_s=60)
        for group, member in members.items():
            processed[group] += process_up_to(member, LAST[group])
            member.close()
        t1 = time.monotonic()
        offsets = {group: wait_until(lambda g=group: translated(admin, g), 90,
                                     f"MirrorMaker to sync {group}'s offsets to the cluster") for group, _ in GROUPS}
        sync_s = time.monotonic() - t1

        orders = read_all(cluster, "orders", 3, 90)
        assert orders == read_all(src, "orders", 3, 90)
        assert len({r[3] for r in orders}) == 90 and all(r[5][1] == T0 + int(r[3][1:]) for r in orders)
        profiles = read_all(cluster, "profiles", 1, 13)
        assert profiles == read_all(src, "profiles", 1, 13)
        assert profiles[-1][2:4] == (b"user3", None)  # the tombstone stays one
        payments = read_all(cluster, "payments", 1, 10)
        assert [r[1:] for r in payments] == [(i, *r[2:]) for i, r in enumerate(read_all(src, "payments", 1, 10))]
        assert [r[3] for r in payments] == [f"p{i}".encode() for i in range(10)]

        # Topic configs, partition counts, replication factor 3.
        for topic, config in (("orders", ORDERS_CONFIG), ("profiles", PROFILES_CONFIG), ("payments", {})):
            resource = ConfigResource(ResourceType.TOPIC, topic)
            entries = admin.describe_configs([resource])[resource].result(30)
            assert {k: e.value for k, e in entries.items()
                    if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value} == config, topic
        topics = ("orders", "profiles", "payments")
        layout = wait_until(lambda: (t := admin.list_topics(timeout=30).topics) and len(t["orders"].partitions) == 4
                            and t, 60, "orders' fourth partition on the cluster")
        assert {t: len(layout[t].partitions) for t in topics} == {"orders": 4, "profiles": 1, "payments": 1}
        assert all(len(p.replicas) == 3 for t in topics for p in layout[t].partitions.values())

        # Topic ACLs as MirrorMaker carries them.
        want_acls = sorted((name, who, target) for (name, pattern), who, _, target in ACLS if target is not None)

        def acls_synced() -> bool:
            everything = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                          AclOperation.ANY, AclPermissionType.ANY)
            acls = admin.describe_acls(everything).result(timeout=30)
            return sorted((a.name, a.principal, a.operation) for a in acls) == want_acls
        wait_until(acls_synced, 60, f"the topic ACLs {want_acls} on the cluster")

        # What MirrorMaker made on Shoal and on the cluster.
        on_shoal = set(src_admin.list_topics(timeout=30).topics)
        assert {"mm2-offset-syncs.kafka.internal", "mm2-configs.kafka.internal", "mm2-offsets.kafka.internal",
                "mm2-status.kafka.internal", "heartbeats"} <= on_shoal, on_shoal
        assert {"shoal.checkpoints.internal", "mm2-configs.shoal.internal", "heartbeats"} <= set(layout), layout
        mirrored = {t for t in layout if not t.startswith("__") and not t.endswith((".internal", "heartbeats"))}
        assert mirrored == set(topics), layout
        requests, errors = shoal_requests(shoal.ports["prometheus"])
        assert mm2.alive(), mm2.tail()
    finally:
        mm2.stop()
    assert mm2.errors() == [], "\n".join(mm2.errors())

    # ---- MirrorMaker restarted goes on where it stopped: records written to Shoal meanwhile arrive once, and a
    # group committing on Shoal again now gets its offsets on the cluster. What it reads back from Shoal for that: the
    # offset syncs, and the heartbeat flow's Connect worker state (configs, offsets, status: compacted topics).
    produce_orders(src, range(90, 96), t0=T0, flush_timeout_s=60)  # 2 more per partition: each ends at 32
    restarted = MirrorMaker(tmp_path / "mm2-restarted", mm2_properties(src, cluster), registry=kafka_registry)
    t2 = time.monotonic()
    restarted.start()
    try:
        late = group_member(src, "cg-late", "classic")
        process_up_to(late, {p: END for p in range(3)})
        late.close()
        orders = read_all(cluster, "orders", 3, 96)
        restart_s = time.monotonic() - t2
        assert orders == read_all(src, "orders", 3, 96)  # stopped when idle, its offsets committed: none twice
        wait_until(lambda: committed(admin, "cg-late") == {p: END for p in range(3)}, 60,
                   "MirrorMaker, restarted, to sync cg-late's offsets to the cluster")
        requests, errors = shoal_requests(shoal.ports["prometheus"])
        assert restarted.alive(), restarted.tail()
    finally:
        restarted.stop()
    assert restarted.errors() == [], "\n".join(restarted.errors())
    shoal_errors = [line for line in shoal.log_path.read_text().splitlines() if '"level": "error"' in line]
    assert shoal_errors == [], "\n".join(shoal_errors)

    # ---- each group resumes on the cluster at the translated offsets (the restarted MirrorMaker may have moved
    # them forward, never back, never past the commit)
    for group, protocol in GROUPS:
        start = committed(admin, group)
        last = LAST[group]
        assert all(offsets[group][p] <= start[p] <= last[p] for p in last), (group, offsets[group], start)
        got = resume(cluster, group, protocol, start, END)
        for p, read in got.items():
            assert read == list(range(start[p], END)), (group, p, read)  # in order, none skipped
        again = {p: last[p] - start[p] for p in last}
        print(f"\n[figures] group {group} ({protocol}): committed on Shoal {last}, translated {start}, "
              f"read again on the cluster {again} (offset.lag.max {OFFSET_LAG_MAX}), processed on Shoal "
              f"{len(processed[group])}")

    used = {api: n - before_mm2[0].get(api, 0) for api, n in sorted(requests.items())}
    assert {api for api, n in used.items() if n} >= MM2_APIS, used
    assert set(errors) <= EXPECTED_ERRORS, errors
    print(f"[figures] MirrorMaker 2 (connect-mirror {version()}): 96 orders + 13 profiles + 10 payments "
          f"replicated; first 60 orders on the cluster {first_copy_s:.1f} s after its start, offsets of both "
          f"groups synced {sync_s:.1f} s after their last commit; restarted, the 6 orders written meanwhile on "
          f"the cluster {restart_s:.1f} s after its start\n"
          f"[figures] requests MirrorMaker and the test's clients made to Shoal after its start: "
          f"{ {a: int(n) for a, n in used.items() if n} }\n"
          f"[figures] error codes Shoal answered (whole run): { {k: int(v) for k, v in errors.items()} }")
