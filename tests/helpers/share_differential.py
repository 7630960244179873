"""Share-group scenarios for the differential suite (tests/differential/test_share_*.py): the same raw steps against
Kafka 4.4 and Shoal through a Target (tests/helpers/differential.py), and readers that turn responses into what is
compared.

    raw = target.raw()
    topic, tid = make_topic(target, raw, "orders", [[3, 2], [4]])  # partition 0: batches of 3 and 2 records, ...
    group = share_group(target, raw, "g", **{"share.record.lock.duration.ms": "1000"})
    member = Member(raw, group)
    member.join([topic], want=2)                                  # heartbeats until 2 partitions are assigned
    got = fetched(member.fetch(tid, [0, 1]))

A new group reads from the log start (share.auto.offset.reset=earliest) and has its assignment computed on every
heartbeat (share.assignment.interval.ms=0), so joining takes the same steps on both brokers; members join one at
a time and only once their topics' share-partitions exist, whatever the timing of their initialization.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protocol.records import Record, build_batch, iter_batches
from tests.helpers import differential_admin
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import create_topic, produce, topic_id

FIND_COORDINATOR = 10
SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1

# What every group of a scenario starts with (see the module docstring).
BASE_GROUP_CONFIGS = {"share.auto.offset.reset": "earliest", "share.assignment.interval.ms": "0"}


def wait_coordinator(raw: RawClient, key: str, key_type: int = 0, timeout: float = 60.0) -> None:
    """FindCoordinator until the coordinator of `key` answers (a fresh Kafka creates __consumer_offsets on the
    first lookup, and answers NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE meanwhile)."""
    end = time.monotonic() + timeout
    while True:
        resp = raw.call(FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})
        if resp.coordinators[0].error_code == 0:
            break
        assert time.monotonic() < end, resp
        time.sleep(0.1)
    # ... and has loaded the group's partition (meanwhile Kafka answers NOT_COORDINATOR or LOAD_IN_PROGRESS)
    while key_type == 0 and key and raw.call(SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": [key], "include_authorized_operations": False}).groups[0].error_code in (14, 15, 16):
        assert time.monotonic() < end, f"the coordinator of {key} is not loaded"
        time.sleep(0.1)


def batch(values: Sequence[bytes], headers: Sequence[tuple[str, bytes]] = ()) -> bytes:
    return build_batch([Record(value=v, key=None, headers=list(headers)) for v in values])


def make_topic(target, raw: RawClient, base: str, layout: Sequence[Sequence[int]],
               configs: Mapping[str, str] | None = None) -> tuple[str, uuid.UUID]:
    """A topic named after `base` with one partition per entry of `layout`, each holding batches of the given
    record counts (values `p<partition>-<offset>`). Returns (name, topic id)."""
    name = target.unique(base)
    if configs:
        resp = raw.call(19, 7, {"topics": [{"name": name, "num_partitions": len(layout), "replication_factor": -1,
                                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                                "timeout_ms": 30_000})
        assert resp.topics[0].error_code == 0, resp.topics[0]
    else:
        create_topic(raw, name, len(layout))
    for p, sizes in enumerate(layout):
        append(raw, name, p, sizes)
    tid = wait_topic_id(raw, name)
    wait_group_metadata(raw, name)
    return name, tid


def wait_group_metadata(raw: RawClient, topic: str, timeout: float = 30.0) -> None:
    """Until the group coordinator knows `topic` (Kafka's learns new topics from its metadata image a moment
    after they exist; a share group joined before that is assigned them only after a later rebalance): a
    throwaway consumer-group member subscribed to it is assigned its partitions, then leaves."""
    group = f"probe-{uuid.uuid4().hex}"
    wait_coordinator(raw, group)
    member = str(uuid.uuid4())
    end = time.monotonic() + timeout
    epoch = 0
    while True:
        resp = raw.call(68, 0, {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
                                "rack_id": None, "rebalance_timeout_ms": 10_000,
                                "subscribed_topic_names": [topic] if epoch == 0 else None, "server_assignor": None,
                                "topic_partitions": [] if epoch == 0 else None})
        if resp.error_code == 0:
            epoch = resp.member_epoch
            if resp.assignment is not None and resp.assignment.topic_partitions:
                break
        else:
            assert resp.error_code in (14, 15, 16), resp  # coordinator loading or moving
        assert time.monotonic() < end, f"the group coordinator does not know {topic}"
        time.sleep(0.02)
    raw.call(68, 0, {"group_id": group, "member_id": member, "member_epoch": -1, "instance_id": None,
                     "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
                     "server_assignor": None, "topic_partitions": None})


def append(raw: RawClient, topic: str, partition: int, sizes: Iterable[int], tag: str = "") -> None:
    """Batches of `sizes` records to one partition (acks=all, each batch its own Produce)."""
    for n in sizes:
        first = None
        end = time.monotonic() + 30
        while True:
            got = produce(raw, topic, batch([f"p{partition}-{tag}{i}".encode() for i in range(n)]), partition)
            if got.error_code == 0:
                break
            # a topic just created may not be led yet on Kafka (NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION)
            assert got.error_code in (3, 6) and time.monotonic() < end, got
            time.sleep(0.05)
        del first


def wait_topic_id(raw: RawClient, name: str, timeout: float = 30.0) -> uuid.UUID:
    end = time.monotonic() + timeout
    while True:
        tid = topic_id(raw, name)
        if tid is not None and tid.int != 0:
            return tid
        assert time.monotonic() < end, f"no topic id for {name}"
        time.sleep(0.05)


def alter_group(raw: RawClient, group: str, configs: Mapping[str, str | None]) -> dict[str, Any]:
    """IncrementalAlterConfigs of a GROUP resource (None deletes a config); the resource's error."""
    [r] = differential_admin.alter_group(raw, group, configs).responses
    return {"error_code": r.error_code, "error_message": r.error_message}


def share_group(target, raw: RawClient, base: str, **configs: str) -> str:
    """A new group id (normalised back to `base`) with BASE_GROUP_CONFIGS and `configs` set and in force on its
    coordinator (tests/helpers/differential_admin.wait_group_configs), whose coordinator is loaded (a fresh Kafka
    answers NOT_COORDINATOR while it loads its __consumer_offsets partition)."""
    group = target.unique(base)
    wait_coordinator(raw, group)
    wanted = {**BASE_GROUP_CONFIGS, **configs}
    assert alter_group(raw, group, wanted)["error_code"] == 0
    differential_admin.wait_group_configs(raw, group, wanted)
    return group


def heartbeat(raw: RawClient, group: str, member: str, epoch: int, topics: Sequence[str] | None = None,
              rack: str | None = None, version: int = 1):
    return raw.call(SHARE_GROUP_HEARTBEAT, version, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": rack,
        "subscribed_topic_names": None if topics is None else list(topics)})


def assignment(resp) -> dict[uuid.UUID, list[int]] | None:
    if resp.assignment is None:
        return None
    return {t.topic_id: sorted(t.partitions) for t in resp.assignment.topic_partitions}


def heartbeat_view(resp) -> dict[str, Any]:
    """A ShareGroupHeartbeat response as compared: member ids are the client's (v1), so they are kept; the
    assignment as [topic id, partitions] pairs in topic id order."""
    got = assignment(resp)
    return {"error_code": resp.error_code, "error_message": resp.error_message, "member_id": resp.member_id,
            "member_epoch": resp.member_epoch, "heartbeat_interval_ms": resp.heartbeat_interval_ms,
            "assignment": None if got is None else [[t, ps] for t, ps in sorted(got.items(), key=lambda kv: str(kv[0]))]}


class Member:
    """One share-group member over raw requests: heartbeats, its share session's epoch, fetch and acknowledge."""

    def __init__(self, raw: RawClient, group: str, member_id: str | None = None) -> None:
        self.raw = raw
        self.group = group
        self.id = member_id or str(uuid.uuid4())
        self.epoch = 0  # member epoch
        self.session = 0  # next share session epoch
        self.assigned: dict[uuid.UUID, list[int]] = {}

    def heartbeat(self, topics: Sequence[str] | None = None):
        resp = heartbeat(self.raw, self.group, self.id, self.epoch, topics)
        if resp.error_code == 0:
            self.epoch = resp.member_epoch
            got = assignment(resp)
            if got is not None:
                self.assigned = got
        return resp

    def join(self, topics: Sequence[str], want: int, timeout: float = 30.0):
        """Join and heartbeat until `want` partitions are assigned (their initialization is asynchronous);
        returns the last response."""
        resp = self.heartbeat(topics)
        assert resp.error_code == 0, resp
        end = time.monotonic() + timeout
        while sum(len(p) for p in self.assigned.values()) != want:
            assert time.monotonic() < end, (self.assigned, resp)
            time.sleep(0.05)
            resp = self.heartbeat()
            assert resp.error_code == 0, resp
        return resp

    def leave(self):
        resp = heartbeat(self.raw, self.group, self.id, -1)
        self.epoch = -1
        return resp

    def fetch(self, topics: Mapping[uuid.UUID, Iterable[int]] | None = None, *, acks=None, epoch: int | None = None,
              max_records: int = 500, batch_size: int | None = None, max_wait_ms: int = 0, min_bytes: int = 1,
              max_bytes: int = 1 << 20, forget: Mapping[uuid.UUID, Iterable[int]] | None = None, version: int = 1,
              mode: int = BATCH_OPTIMIZED, renew_only: bool = False, member_id: str | None = None,
              group: str | None = None):
        """A ShareFetch at the session's next epoch (or `epoch`); `acks`: {(topic id, partition): [(first, last,
        [types])]}; the session epoch moves on unless the answer is a top-level error."""
        acks = dict(acks or {})
        parts: dict[uuid.UUID, dict[int, list]] = {}
        for tid, ps in (topics or {}).items():
            for p in ps:
                parts.setdefault(tid, {})[p] = []
        for (tid, p), ranges in acks.items():
            parts.setdefault(tid, {})[p] = ranges
        used = self.session if epoch is None else epoch
        if renew_only:  # an IsRenewAck fetch only acknowledges: Kafka wants every fetch limit at 0
            max_wait_ms = min_bytes = max_bytes = max_records = 0
            batch_size = 0
        body = {"group_id": self.group if group is None else group, "member_id": self.id if member_id is None else member_id,
                "share_session_epoch": used, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
                "max_bytes": max_bytes, "max_records": max_records,
                "batch_size": max_records if batch_size is None else batch_size,
                "topics": [{"topic_id": tid, "partitions": [
                    {"partition_index": p, "acknowledgement_batches": _ack_batches(ranges)}
                    for p, ranges in ps.items()]} for tid, ps in parts.items()],
                "forgotten_topics_data": [{"topic_id": tid, "partitions": list(ps)} for tid, ps in (forget or {}).items()]}
        if version >= 2:
            body["share_acquire_mode"] = mode
            body["is_renew_ack"] = renew_only
        resp = self.raw.call(SHARE_FETCH, version, body)
        if resp.error_code == 0 and epoch is None:
            self.session = -2 if used == -1 else used + 1
        return resp

    def acknowledge(self, acks, *, epoch: int | None = None, version: int = 1, member_id: str | None = None,
                    group: str | None = None, renew: bool = False):
        """A ShareAcknowledge at the session's next epoch (or `epoch`)."""
        parts: dict[uuid.UUID, dict[int, list]] = {}
        for (tid, p), ranges in acks.items():
            parts.setdefault(tid, {})[p] = ranges
        used = self.session if epoch is None else epoch
        body = {"group_id": self.group if group is None else group, "member_id": self.id if member_id is None else member_id,
                "share_session_epoch": used,
                "topics": [{"topic_id": tid, "partitions": [
                    {"partition_index": p, "acknowledgement_batches": _ack_batches(ranges)} for p, ranges in ps.items()]}
                    for tid, ps in parts.items()]}
        if version >= 2:
            body["is_renew_ack"] = renew
        resp = self.raw.call(SHARE_ACKNOWLEDGE, version, body)
        if resp.error_code == 0 and epoch is None:
            self.session = -2 if used == -1 else used + 1
        return resp


def _ack_batches(ranges) -> list[dict]:
    out = []
    for first, last, types in ranges:
        out.append({"first_offset": first, "last_offset": last,
                    "acknowledge_types": list(types) if isinstance(types, (list, tuple)) else [types]})
    return out


def record_offsets(records: bytes | None) -> list[int]:
    """Offsets of the records in a response's record batches."""
    out: list[int] = []
    for _, b in iter_batches(bytes(records or b"")):
        out.extend(range(b.base_offset, b.base_offset + b.last_offset_delta + 1))
    return out


def fetched(resp, *, messages: bool = True) -> dict[str, Any]:
    """A ShareFetch response as compared: the top-level error, and per partition (sorted: Kafka lists them in
    hash order) its errors, acquired ranges and the offsets of the batches served."""
    out: dict[str, Any] = {"error_code": resp.error_code}
    if messages:
        out["error_message"] = resp.error_message
    if resp.error_code == 0:
        out["acquisition_lock_timeout_ms"] = resp.acquisition_lock_timeout_ms
    parts = []
    for t in resp.responses:
        for p in t.partitions:
            view = {"topic_id": t.topic_id, "partition": p.partition_index, "error_code": p.error_code,
                    "acknowledge_error_code": p.acknowledge_error_code,
                    "acquired": [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records],
                    "offsets": _span(record_offsets(p.records))}
            if messages:
                view["error_message"] = p.error_message
                view["acknowledge_error_message"] = p.acknowledge_error_message
            parts.append(view)
    out["partitions"] = sorted(parts, key=lambda v: (str(v["topic_id"]), v["partition"]))
    return out


def acknowledged(resp, *, messages: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"error_code": resp.error_code}
    if messages:
        out["error_message"] = resp.error_message
    parts = []
    for t in resp.responses:
        for p in t.partitions:
            view = {"topic_id": t.topic_id, "partition": p.partition_index, "error_code": p.error_code}
            if messages:
                view["error_message"] = p.error_message
            parts.append(view)
    out["partitions"] = sorted(parts, key=lambda v: (str(v["topic_id"]), v["partition"]))
    return out


def _span(offsets: list[int]) -> list[tuple[int, int]]:
    """Consecutive offsets as (first, last) ranges."""
    out: list[tuple[int, int]] = []
    for o in offsets:
        if out and out[-1][1] == o - 1:
            out[-1] = (out[-1][0], o)
        else:
            out.append((o, o))
    return out


def warm_share_coordinator(target) -> None:
    """One share group on a throwaway topic, joined until its partition is assigned, then left: a fresh Kafka
    creates __share_group_state and loads its share coordinator on the first share-partition initialization,
    which costs that first group an extra rebalance (an epoch more) that later groups do not see."""
    with target.raw() as raw:
        topic, _ = make_topic(target, raw, "warm-share", [[1]])
        group = share_group(target, raw, "warm-share")
        member = Member(raw, group)
        member.join([topic], want=1)
        member.leave()
