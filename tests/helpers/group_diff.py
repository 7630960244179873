"""Consumer groups in the differential suite: members driven step by step over raw requests (our codecs), the
labels that stand for their ids, and running one scenario on both brokers at once.

Member ids are the broker's choice (classic: `<client id>-<UUID>`; KIP-848 v0: a random id in Kafka's base64
form) and Kafka keeps a group's members in hash order, so a scenario names each member it drives by a label
("A", "B", ...) as it learns its id; `Labels.apply` replaces every id it knows by its label and checks the shape of
each id it replaces, and lists of members are sorted by label before they are compared.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from protocol.codec import message_codec
from tests.helpers.differential import Pair, Target, normalize
from tests.helpers.differential_admin import alter_group, wait_group_configs
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 8, 9, 11, 12, 13, 14
DESCRIBE, LIST, DELETE, OFFSET_DELETE, DESCRIBE_CONFIGS = 15, 16, 42, 47, 32
CONSUMER_HEARTBEAT, CONSUMER_DESCRIBE = 68, 69
GROUP_RESOURCE = 32  # ConfigResource type of a group

_CLASSIC_ID = re.compile(r"^(?P<prefix>.*)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_BASE64_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def run_both(pair: Pair, scenario: Callable[[Target], Any]) -> dict[str, Any]:
    """Pair.run with both brokers at once (scenarios wait out session and rebalance timeouts, so this halves
    the wall time): the same steps, each broker in its own thread; normalised as Pair.run does, and names made by
    `unique` are replaced in dict keys too (assignments keyed by topic)."""
    with ThreadPoolExecutor(2) as pool:
        futures = {target.name: pool.submit(scenario, target) for target in pair}
        return {name: normalize(base_keys(future.result(), target), target)
                for (name, future), target in zip(futures.items(), pair, strict=True)}


def base_keys(value: Any, target: Target) -> Any:
    """`value` with unique names in its dict keys replaced by their base (the normaliser only rewrites values)."""
    names = target.names()
    ordered = sorted(names, key=len, reverse=True)

    def key(k: Any) -> Any:
        if isinstance(k, str):
            for name in ordered:
                if name in k:
                    k = k.replace(name, names[name])
        return k

    def walk(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {key(k): walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)


def id_shape(member_id: str) -> str:
    """What a member id looks like, without its random part: `<prefix>-<uuid>`, `<base64 uuid>`, or the id."""
    if (m := _CLASSIC_ID.match(member_id)) is not None:
        return f"{m['prefix']}-<uuid>"
    if _BASE64_ID.match(member_id):
        return "<base64 uuid>"
    return member_id


class Labels:
    """Member ids -> labels. `apply` turns an observation into one with labels in place of ids (and sorts lists
    of dicts that have a member id field by label)."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}

    def name(self, member_id: str, label: str) -> str:
        assert member_id, f"no member id for {label}"
        known = self.ids.setdefault(member_id, label)
        assert known == label, f"{member_id} is already {known}, not {label}"
        return label

    def __call__(self, member_id: str | None) -> str | None:
        if member_id is None or member_id == "":
            return member_id
        return self.ids.get(member_id, f"<unknown {id_shape(member_id)}>")

    def apply(self, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: self.apply(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            items = [self.apply(v) for v in value]
            if items and all(isinstance(i, dict) and "member_id" in i for i in items):
                items.sort(key=lambda i: str(i["member_id"]))
            return items
        if isinstance(value, str) and value:
            if value in self.ids:
                return self.ids[value]
            if _CLASSIC_ID.match(value) or _BASE64_ID.match(value):
                return f"<unknown {id_shape(value)}>"
            for mid, label in self.ids.items():  # ids inside messages
                value = value.replace(mid, label)
        return value


def plain(value: Any) -> Any:
    """A decoded message as dicts and lists (bytes stay bytes)."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def subscription(*topics: str, version: int = 0, user_data: bytes | None = None) -> bytes:
    """ConsumerProtocolSubscription bytes (the version first, as clients write them)."""
    body: dict[str, Any] = {"topics": list(topics), "user_data": user_data}
    return version.to_bytes(2, "big") + message_codec("ConsumerProtocolSubscription", version).encode(body)


def assignment(parts: Mapping[str, Iterable[int]], version: int = 0) -> bytes:
    body = {"assigned_partitions": [{"topic": t, "partitions": sorted(p)} for t, p in sorted(parts.items())],
            "user_data": None}
    return version.to_bytes(2, "big") + message_codec("ConsumerProtocolAssignment", version).encode(body)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    if not data:
        return {}
    version = int.from_bytes(data[:2], "big")
    value = message_codec("ConsumerProtocolAssignment", min(version, 3)).decode_prefix(memoryview(data)[2:])[0]
    return {tp.topic: sorted(tp.partitions) for tp in value.assigned_partitions}


# ================================================================================================ classic members

class ClassicMember:
    """One classic group member over its own connection, driven one request at a time. `send_*` returns a
    handle on a request whose answer the broker may park (JoinGroup, SyncGroup); `finish` reads it. A broker
    serves one request of a connection at a time, so requests made while one is parked go over `side`, a second
    connection (`side=True`)."""

    def __init__(self, target: Target, group: str, *, version: int = 9, instance: str | None = None,
                 protocols: Iterable[tuple[str, bytes]] | None = None, protocol_type: str = "consumer",
                 session_ms: int = 10_000, rebalance_ms: int = 10_000, client_id: str = "raw-test") -> None:
        self.client: RawClient = target.raw()
        self.client.client_id = client_id
        self.group = group
        self.version = version
        self.instance = instance
        self.protocols = list(protocols if protocols is not None else [("range", subscription("t"))])
        self.protocol_type = protocol_type
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.member_id = ""
        self.generation = -1
        self._target = target
        self._side: RawClient | None = None
        wait_group_coordinator(self.client, group)

    @property
    def side(self) -> RawClient:
        if self._side is None:
            self._side = self._target.raw()
            self._side.client_id = self.client.client_id
        return self._side

    def _conn(self, side: bool) -> RawClient:
        return self.side if side else self.client

    def close(self) -> None:
        self.client.close()
        if self._side is not None:
            self._side.close()

    def __enter__(self) -> ClassicMember:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- JoinGroup
    def join_body(self) -> dict[str, Any]:
        return {"group_id": self.group, "session_timeout_ms": self.session_ms,
                "rebalance_timeout_ms": self.rebalance_ms, "member_id": self.member_id,
                "group_instance_id": self.instance, "protocol_type": self.protocol_type,
                "protocols": [{"name": n, "metadata": m} for n, m in self.protocols], "reason": "differential"}

    def send_join(self, side: bool = False, **overrides: Any) -> tuple:
        conn = self._conn(side)
        return conn, conn.send(JOIN, self.version, {**self.join_body(), **overrides}), JOIN, self.version

    def finish(self, handle: tuple):
        conn, cid, api, version = handle
        answer = conn.receive(api, version, cid)
        if api == JOIN and answer.member_id:
            self.member_id = answer.member_id
            if answer.error_code == 0:
                self.generation = answer.generation_id
        return answer

    def join(self, side: bool = False, **overrides: Any):
        return self.finish(self.send_join(side, **overrides))

    def join_fully(self):
        """JoinGroup, again with the id the broker gave (MEMBER_ID_REQUIRED, v4+ dynamic members)."""
        first = self.join()
        if first.error_code == 79:
            return self.join()
        return first

    # -- SyncGroup
    def sync_version(self) -> int:
        return min(self.version, 5)

    def send_sync(self, assignments: Mapping[str, bytes] | None = None, side: bool = False,
                  **overrides: Any) -> tuple:
        body = {"group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": self.instance, "protocol_type": self.protocol_type,
                "protocol_name": self.protocols[0][0],
                "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}
        conn = self._conn(side)
        return conn, conn.send(SYNC, self.sync_version(), {**body, **overrides}), SYNC, self.sync_version()

    def sync(self, assignments: Mapping[str, bytes] | None = None, side: bool = False, **overrides: Any):
        return self.finish(self.send_sync(assignments, side, **overrides))

    # -- Heartbeat, LeaveGroup
    def heartbeat(self, side: bool = False, **overrides: Any):
        body = {"group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": self.instance}
        return self._conn(side).call(HEARTBEAT, min(self.version, 4), {**body, **overrides})

    def wait_for_heartbeat_error(self, code: int, timeout: float = 30.0, side: bool = False) -> int:
        """Heartbeat until the answer is `code` (a rebalance another connection started, a session that
        expired); returns how many heartbeats it took."""
        count = 0

        def answered() -> bool:
            nonlocal count
            count += 1
            return self.heartbeat(side).error_code == code

        wait_until(answered, timeout, f"heartbeat error {code}", interval=0.05)
        return count

    def leave(self, version: int | None = None, reason: str | None = "differential", side: bool = False):
        v = min(self.version, 5) if version is None else version
        return self._conn(side).call(LEAVE, v, {"group_id": self.group, "member_id": self.member_id, "members": [
            {"member_id": self.member_id, "group_instance_id": self.instance, "reason": reason}]})


def describe_group(client: RawClient, group: str, version: int = 5) -> dict[str, Any]:
    [entry] = client.call(DESCRIBE, version, {"groups": [group], "include_authorized_operations": False}).groups
    return plain(entry)


def decoded_describe(entry: Mapping[str, Any], labels: Labels) -> dict[str, Any]:
    """A DescribeGroups entry with members' subscriptions and assignments decoded (consumer protocol)."""
    out = labels.apply(plain(entry))
    for m in out.get("members", []):
        if out.get("protocol_type") == "consumer":
            m["member_assignment"] = decode_assignment(m["member_assignment"])
            m["member_metadata"] = decode_subscription(m["member_metadata"])
    return out


def decode_subscription(data: bytes) -> dict[str, Any] | bytes:
    """A consumer-protocol subscription as {version, topics, owned partitions} (names are normalised as text)."""
    if not data:
        return data
    version = int.from_bytes(data[:2], "big")
    value = message_codec("ConsumerProtocolSubscription", min(version, 3)).decode_prefix(memoryview(data)[2:])[0]
    owned = value.get("owned_partitions") or []
    return {"version": version, "topics": sorted(value.topics),
            "owned": {tp.topic: sorted(tp.partitions) for tp in owned}, "user_data": value.user_data}


def unique_id() -> str:
    return uuid.uuid4().hex[:8]


# ============================================================================================ KIP-848 members

class TopicNames:
    """Topic ids -> names for one broker, so that assignments read as {topic: [partitions]} (names made by
    `target.unique` read as their base: they are keys, which the normaliser leaves alone)."""

    def __init__(self, client: RawClient, target: Target | None = None) -> None:
        self.client = client
        self.target = target
        self.names: dict[uuid.UUID, str] = {}

    def learn(self, *topics: str) -> None:
        """Learn the ids of these topics, waiting until the broker's metadata has them (Kafka's CreateTopics
        answers before its metadata cache knows the topic)."""
        def known():
            meta = self.client.call(3, 12, {"topics": [{"name": t} for t in topics],
                                            "allow_auto_topic_creation": False})
            return all(t.error_code == 0 for t in meta.topics) and meta

        for t in wait_until(known, 30, f"metadata of {topics}").topics:
            self.names[t.topic_id] = t.name

    def base(self, name: str) -> str:
        return self.target.names().get(name, name) if self.target is not None else name

    def id_of(self, topic: str) -> uuid.UUID:
        """The id of a learned topic, by its name or its base name."""
        [tid] = [tid for tid, name in self.names.items() if topic in (name, self.base(name))]
        return tid

    def read(self, topic_partitions: Iterable[Mapping[str, Any]] | None) -> dict[str, list[int]] | None:
        if topic_partitions is None:
            return None
        out: dict[str, list[int]] = {}
        for tp in topic_partitions:
            name = self.base(self.names.get(tp["topic_id"], f"<unknown topic {tp['topic_id']}>"))
            out.setdefault(name, []).extend(tp["partitions"])
        return {t: sorted(ps) for t, ps in sorted(out.items()) if ps}

    def owned(self, parts: Mapping[str, Iterable[int]]) -> list[dict[str, Any]]:
        return [{"topic_id": self.id_of(t), "partitions": sorted(ps)} for t, ps in sorted(parts.items())]


class ConsumerMember:
    """One KIP-848 member driven by explicit ConsumerGroupHeartbeats. `beat` sends what a client would (its
    subscription on the first heartbeat and when it changes, the partitions it owns) and records the member
    epoch and assignment answered; `owned` is what it reports next (by default what it was last given)."""

    def __init__(self, target: Target, group: str, topics: TopicNames, *, member_id: str = "",
                 version: int = 1, instance: str | None = None, rack: str | None = None,
                 subscribe: Iterable[str] | None = (), regex: str | None = None, assignor: str | None = None,
                 rebalance_ms: int = 30_000, client_id: str = "raw-consumer") -> None:
        self.client: RawClient = target.raw()
        self.client.client_id = client_id
        self.group = group
        self.topics = topics
        self.member_id = member_id
        self.version = version
        self.instance = instance
        self.rack = rack
        self.subscribe = None if subscribe is None else list(subscribe)
        self.regex = regex
        self.assignor = assignor
        self.rebalance_ms = rebalance_ms
        self.epoch = 0
        self.assigned: dict[str, list[int]] = {}
        self.last: Any = None
        wait_group_coordinator(self.client, group)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> ConsumerMember:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def body(self, full: bool) -> dict[str, Any]:
        """A heartbeat's fields: `full` as on a join or after an error (every field), else only the epoch and
        what changed (here: the owned partitions, always sent)."""
        body: dict[str, Any] = {"group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch,
                                "instance_id": self.instance, "rack_id": None, "rebalance_timeout_ms": -1,
                                "subscribed_topic_names": None, "subscribed_topic_regex": None,
                                "server_assignor": None, "topic_partitions": self.topics.owned(self.assigned)}
        if full:
            body.update({"rack_id": self.rack, "rebalance_timeout_ms": self.rebalance_ms,
                         "subscribed_topic_names": self.subscribe, "subscribed_topic_regex": self.regex,
                         "server_assignor": self.assignor})
        return body

    def beat(self, *, full: bool | None = None, **overrides: Any) -> dict[str, Any]:
        """One heartbeat; returns its answer as plain data with the assignment read as {topic: partitions}."""
        body = {**self.body(self.epoch == 0 if full is None else full), **overrides}
        answer = self.client.call(CONSUMER_HEARTBEAT, self.version, body)
        self.last = answer
        out = plain(answer)
        if answer.error_code == 0:
            if answer.member_id:
                self.member_id = answer.member_id
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.assigned = self.topics.read(answer.assignment.topic_partitions) or {}
                out["assignment"] = self.assigned
        elif answer.assignment is not None:
            out["assignment"] = self.topics.read(answer.assignment.topic_partitions)
        return out

    def leave(self, epoch: int = -1) -> dict[str, Any]:
        return plain(self.client.call(CONSUMER_HEARTBEAT, self.version, {
            **self.body(False), "member_epoch": epoch, "topic_partitions": None}))


def consumer_describe(client: RawClient, topics: TopicNames, groups: Iterable[str], version: int = 1,
                      authorized: bool = False) -> list[dict[str, Any]]:
    """ConsumerGroupDescribe entries with assignments read as {topic: partitions} and topic ids dropped."""
    answer = client.call(CONSUMER_DESCRIBE, version, {"group_ids": list(groups),
                                                     "include_authorized_operations": authorized})
    bases = topics.target.names() if topics.target is not None else {}
    out = []
    for g in plain(answer.groups):
        for m in g.get("members", []):
            for key in ("assignment", "target_assignment"):
                m[key] = {bases.get(tp["topic_name"], tp["topic_name"]): sorted(tp["partitions"])
                          for tp in m[key]["topic_partitions"]}
            m["subscribed_topic_names"] = sorted(m["subscribed_topic_names"])
        g["members"] = sorted(g.get("members", []), key=lambda m: m["member_id"])  # Kafka's are in hash order
        out.append(g)
    return out


def alter_group_configs(client: RawClient, group: str, configs: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """IncrementalAlterConfigs of a GROUP resource (SET, or DELETE for None)."""
    return plain(alter_group(client, group, configs).responses)


# Kafka 4.4 computes a group's new target assignment at most once per consumer.assignment.interval.ms (1 s by
# default), on the first heartbeat after it; Shoal computes it in the heartbeat that bumps the group epoch
# (docs/kafka-differences.md, "Consumer groups"). Scenarios that drive rebalances step by step set the interval to
# 0 on Kafka's groups, which is Shoal's behaviour.
KAFKA_IMMEDIATE_ASSIGNMENT = {"consumer.assignment.interval.ms": "0"}


def immediate_assignment(target: Target, client: RawClient, group: str) -> None:
    if target.name == "kafka":
        [result] = alter_group_configs(client, group, KAFKA_IMMEDIATE_ASSIGNMENT)
        assert result["error_code"] == 0, result
        wait_group_configs(client, group, KAFKA_IMMEDIATE_ASSIGNMENT)


def wait_coordinator_sees(target: Target, client: RawClient, topics: TopicNames, topic: str, partitions: int) -> None:
    """Wait until the group coordinator assigns every partition of a new topic: Kafka's coordinator learns of
    topics from its metadata image a little after CreateTopics answers."""
    group = target.unique("probe")
    immediate_assignment(target, client, group)
    member = ConsumerMember(target, group, topics, member_id="probe", subscribe=[topic])
    try:
        def sees() -> bool:
            member.beat(full=True)
            return member.assigned.get(topics.base(topic), []) == list(range(partitions))
        wait_until(sees, 30, f"the group coordinator to see topic {topic}")
        member.leave()
    finally:
        member.close()


def wait_coordinators(client: RawClient, *key_types: int) -> None:
    """Wait until FindCoordinator answers for these key types (0 groups, 1 transactions, 2 share): a fresh
    Kafka creates its internal topics on the first look-up and answers COORDINATOR_NOT_AVAILABLE until then."""
    share_key = "probe:" + "A" * 22 + ":0"

    def found() -> bool:
        answer = client.call(FIND_COORDINATOR, 6, {"key_type": 0, "coordinator_keys": ["probe"]})
        ok = answer.coordinators[0].error_code == 0
        for key_type in key_types:
            key = share_key if key_type == 2 else "probe"
            answer = client.call(FIND_COORDINATOR, 6, {"key_type": key_type, "coordinator_keys": [key]})
            ok = ok and answer.coordinators[0].error_code == 0
        return ok

    wait_until(found, 60, "the coordinators", interval=0.2)


_NOT_READY = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def wait_group_coordinator(client: RawClient, group: str) -> None:
    """Wait until the coordinator of `group` serves it, as a client retries: a fresh Kafka creates
    __consumer_offsets on the first FindCoordinator and loads its partitions one by one."""
    def ready() -> bool:
        found = client.call(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        if found.error_code != 0:
            return False
        [entry] = client.call(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False}).groups
        return entry.error_code not in _NOT_READY

    wait_until(ready, 60, f"the coordinator of group {group}", interval=0.1)


def create_topic_and_wait(client: RawClient, topic: str, partitions: int) -> uuid.UUID:
    """CreateTopics, then wait until the broker's metadata has the topic (Kafka answers CreateTopics before its
    metadata cache knows it, and commits to it answer UNKNOWN_TOPIC_OR_PARTITION until then); its id."""
    from tests.helpers.raw_requests import create_topic  # noqa: PLC0415

    create_topic(client, topic, partitions)
    names = TopicNames(client)
    names.learn(topic)
    return names.id_of(topic)
