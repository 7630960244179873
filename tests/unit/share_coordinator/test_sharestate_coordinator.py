"""Share coordinator operations: initialize, read, write, delete, summary, their error paths, and the wire API."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker.share_coordinator import (
    ShareCoordinator,
    ShareCoordinatorConfig,
    SharePartitionKey,
    StateBatch,
)
from broker.share_coordinator import records as rec
from broker.share_coordinator.coordinator import (
    BATCHES_WITHOUT_START,
    INVALID_BATCH,
    INVALID_DELIVERY_COUNT,
    INVALID_DELIVERY_STATE,
    INVALID_START_OFFSET,
)
from protocol.codec import request_codec, response_codec
from protocol.errors import ErrorCode

T = uuid.UUID("12345678-9abc-def0-0fed-cba987654321")
UNKNOWN_TOPIC = uuid.UUID(int=99)
AV, ACK, ARCH = 0, 2, 4
B = StateBatch


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        self.now += 1
        return self.now


def make(per_snapshot: int = 500, partitions: int = 50) -> ShareCoordinator:
    return ShareCoordinator(ShareCoordinatorConfig(partitions, per_snapshot), clock=Clock(),
                            partition_exists=lambda t, p: t != UNKNOWN_TOPIC and 0 <= p < 8)


def kinds(records: list) -> list[str]:
    out = []
    for r in records:
        name = {rec.SNAPSHOT_TYPE: "snapshot", rec.UPDATE_TYPE: "update"}[rec.record_type(r.key)]
        out.append(name if r.value is not None else name + "-tombstone")
    return out


# --------------------------------------------------------------------------------------------- initialize

def test_initialize_writes_a_fresh_snapshot() -> None:
    c = make()
    code, records = c.initialize("g", T, 0, state_epoch=3, start_offset=10)
    assert code == ErrorCode.NONE and kinds(records) == ["snapshot"]
    assert records[0].partition == c.partition_for(SharePartitionKey("g", T, 0))
    s = c.state(SharePartitionKey("g", T, 0))
    assert (s.snapshot_epoch, s.state_epoch, s.start_offset, s.state_batches) == (0, 3, 10, ())
    assert s.delivery_complete_count == 0 and s.create_timestamp == s.write_timestamp > 0


def test_initialize_without_start_offset_has_unknown_delivery_complete_count() -> None:
    c = make()
    c.initialize("g", T, 0, 0, -1)
    s = c.state(SharePartitionKey("g", T, 0))
    assert s.start_offset == -1 and s.delivery_complete_count == -1


def test_reinitialize_replaces_state_and_fences_older_state_epochs() -> None:
    c = make()
    c.initialize("g", T, 0, 1, 0)
    c.write_state("g", T, 0, 1, 0, 0, [B(0, 5, ACK, 1)])
    code, _ = c.initialize("g", T, 0, 2, 100)
    assert code == ErrorCode.NONE
    s = c.state(SharePartitionKey("g", T, 0))
    assert (s.snapshot_epoch, s.state_epoch, s.start_offset, s.state_batches) == (1, 2, 100, ())
    assert c.write_state("g", T, 0, 1, 0, 100, []).error_code == ErrorCode.FENCED_STATE_EPOCH
    assert c.initialize("g", T, 0, 1, 0).error_code == ErrorCode.FENCED_STATE_EPOCH
    assert c.initialize("g", T, 0, 2, 50).error_code == ErrorCode.NONE  # same epoch is allowed


@pytest.mark.parametrize(("args", "code"), [
    (("g", T, -1, 0, 0), ErrorCode.INVALID_REQUEST),
    (("", T, 0, 0, 0), ErrorCode.INVALID_GROUP_ID),
    (("g", UNKNOWN_TOPIC, 0, 0, 0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (("g", T, 9, 0, 0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
])
def test_initialize_errors(args: tuple, code: ErrorCode) -> None:
    c = make()
    r = c.initialize(*args)
    assert r.error_code == code and r.records == []
    assert c.keys() == []


def test_initialize_refuses_start_offsets_below_minus_one() -> None:
    c = make()
    r = c.initialize("g", T, 0, 0, -2)
    assert (r.error_code, r.records, r.error_message) == (ErrorCode.INVALID_REQUEST, [], INVALID_START_OFFSET)
    assert c.keys() == []


def test_initialize_with_state_epoch_minus_one_cannot_replace_a_newer_state() -> None:
    c = make()
    c.initialize("g", T, 0, 5, 10)
    r = c.initialize("g", T, 0, -1, 0)
    assert r.error_code == ErrorCode.FENCED_STATE_EPOCH and r.records == []
    s = c.state(SharePartitionKey("g", T, 0))
    assert (s.state_epoch, s.start_offset) == (5, 10)


# ------------------------------------------------------------------------------------------------ write

def test_write_merges_batches_and_moves_start_offset() -> None:
    c = make()
    c.initialize("g", T, 0, 1, 0)
    code, records = c.write_state("g", T, 0, 1, 0, -1, [B(0, 9, AV, 1)])
    assert code == ErrorCode.NONE and kinds(records) == ["update"]
    c.write_state("g", T, 0, 1, 0, -1, [B(3, 4, ACK, 1)])
    c.write_state("g", T, 0, 1, 0, 4, [B(8, 9, ARCH, 5)], delivery_complete_count=1)
    s = c.state(SharePartitionKey("g", T, 0))
    assert s.start_offset == 4 and s.delivery_complete_count == 1
    assert s.state_batches == (B(4, 4, ACK, 1), B(5, 7, AV, 1), B(8, 9, ARCH, 5))


def test_write_uninitialized_is_invalid_request() -> None:
    r = make().write_state("g", T, 0, 0, 0, 0, [])
    assert r.error_code == ErrorCode.INVALID_REQUEST and r.records == []
    assert "uninitialized" in r.error_message


def test_write_fencing() -> None:
    c = make()
    c.initialize("g", T, 0, 5, 0)
    assert c.write_state("g", T, 0, 5, 7, -1, []).error_code == ErrorCode.NONE
    r = c.write_state("g", T, 0, 5, 6, -1, [B(0, 0, ACK, 1)])
    assert r.error_code == ErrorCode.FENCED_LEADER_EPOCH and r.records == []
    r = c.write_state("g", T, 0, 4, 7, -1, [B(0, 0, ACK, 1)])
    assert r.error_code == ErrorCode.FENCED_STATE_EPOCH and r.records == []
    # leader fencing is checked first, as in Kafka
    assert c.write_state("g", T, 0, 4, 6, -1, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
    # -1 means "not supplied" and is never fenced
    assert c.write_state("g", T, 0, -1, -1, -1, [B(0, 0, ACK, 1)]).error_code == ErrorCode.NONE
    assert c.state(SharePartitionKey("g", T, 0)).state_batches == (B(0, 0, ACK, 1),)


@pytest.mark.parametrize(("bad", "message"), [
    (B(5, 4, AV, 1), INVALID_BATCH), (B(-1, 3, AV, 1), INVALID_BATCH),
    (B(2, 3, 1, 1), INVALID_DELIVERY_STATE), (B(2, 3, 3, 1), INVALID_DELIVERY_STATE),
    (B(2, 3, -1, 1), INVALID_DELIVERY_STATE), (B(2, 3, ACK, -1), INVALID_DELIVERY_COUNT)])
def test_write_rejects_malformed_batches(bad: StateBatch, message: str) -> None:
    c = make()
    c.initialize("g", T, 0, 0, 0)
    r = c.write_state("g", T, 0, 0, 0, -1, [B(0, 1, AV, 1), bad])
    assert (r.error_code, r.records, r.error_message) == (ErrorCode.INVALID_REQUEST, [], message)
    assert c.state(SharePartitionKey("g", T, 0)).state_batches == ()


def test_write_rejects_start_offsets_below_minus_one_and_batches_without_a_start_offset() -> None:
    c = make()
    c.initialize("g", T, 0, 0, -1)  # SPSO left to share.auto.offset.reset
    r = c.write_state("g", T, 0, 0, 0, -5, [])
    assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST, INVALID_START_OFFSET)
    r = c.write_state("g", T, 0, 0, 0, -1, [B(0, 1, ACK, 1)])
    assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST, BATCHES_WITHOUT_START)
    assert c.state(SharePartitionKey("g", T, 0)).state_batches == ()
    # with a start offset (in the write, or stored) batches are fine
    assert c.write_state("g", T, 0, 0, 0, 0, [B(0, 1, ACK, 1)]).error_code == ErrorCode.NONE
    assert c.write_state("g", T, 0, 0, 0, -1, [B(2, 2, ARCH, 5)]).error_code == ErrorCode.NONE
    assert c.state(SharePartitionKey("g", T, 0)).state_batches == (B(0, 1, ACK, 1), B(2, 2, ARCH, 5))


def test_write_unknown_topic_partition() -> None:
    c = make()
    c.initialize("g", T, 0, 0, 0)
    c.write_state("g", T, 0, 0, 0, 0, [])
    c._partition_exists = lambda t, p: False  # topic deleted meanwhile
    assert c.write_state("g", T, 0, 0, 0, 0, []).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_write_with_newer_state_epoch_is_a_snapshot() -> None:
    c = make()
    c.initialize("g", T, 0, 1, 0)
    c.write_state("g", T, 0, 1, 0, -1, [B(0, 3, AV, 1)])
    _, records = c.write_state("g", T, 0, 2, 0, -1, [B(4, 4, ACK, 1)])
    assert kinds(records) == ["snapshot"]
    s = c.state(SharePartitionKey("g", T, 0))
    assert s.state_epoch == 2 and s.snapshot_epoch == 1
    assert s.state_batches == (B(0, 3, AV, 1), B(4, 4, ACK, 1))


def test_dict_batches_are_accepted() -> None:
    c = make()
    c.initialize("g", T, 0, 0, 0)
    batch = {"first_offset": 0, "last_offset": 2, "delivery_state": ACK, "delivery_count": 1}
    assert c.write_state("g", T, 0, 0, 0, -1, [batch]).error_code == ErrorCode.NONE
    assert c.state(SharePartitionKey("g", T, 0)).state_batches == (B(0, 2, ACK, 1),)


# ------------------------------------------------------------------------------------------ snapshots

@pytest.mark.parametrize("n", [0, 1, 3])
def test_snapshot_every_n_updates(n: int) -> None:
    c = make(per_snapshot=n)
    _, records = c.initialize("g", T, 0, 0, 0)
    seen = kinds(records)
    for i in range(3 * (n + 1)):
        _, records = c.write_state("g", T, 0, 0, 0, -1, [B(i, i, ACK, 1)])
        seen += kinds(records)
    # the initialize snapshot, then N updates and a snapshot, again and again
    assert seen == ["snapshot"] + (["update"] * n + ["snapshot"]) * 3
    s = c.state(SharePartitionKey("g", T, 0))
    assert s.snapshot_epoch == 3
    assert s.state_batches == (B(0, 3 * (n + 1) - 1, ACK, 1),)


def test_snapshot_carries_the_whole_state() -> None:
    c = make(per_snapshot=2)
    c.initialize("g", T, 0, 0, 0)
    c.write_state("g", T, 0, 0, 0, -1, [B(0, 4, AV, 1)])
    c.write_state("g", T, 0, 0, 3, -1, [B(2, 2, ACK, 1)])
    _, records = c.write_state("g", T, 0, 0, -1, 1, [B(6, 6, ARCH, 2)])
    decoded = rec.decode(records[0].key, records[0].value)
    assert decoded.name == rec.SNAPSHOT
    assert decoded.value == c.state(SharePartitionKey("g", T, 0))
    assert decoded.value.leader_epoch == 3 and decoded.value.start_offset == 1
    assert decoded.value.state_batches == (B(1, 1, AV, 1), B(2, 2, ACK, 1), B(3, 4, AV, 1), B(6, 6, ARCH, 2))


# ------------------------------------------------------------------------------------------------- read

def test_read_returns_state_and_records_a_new_leader_epoch() -> None:
    c = make()
    c.initialize("g", T, 0, 2, 0)
    c.write_state("g", T, 0, 2, 0, -1, [B(0, 1, ACK, 1)])
    code, state, records = c.read_state("g", T, 0, leader_epoch=4)
    assert code == ErrorCode.NONE and state.state_epoch == 2 and state.state_batches == (B(0, 1, ACK, 1),)
    assert kinds(records) == ["update"]
    assert c.state(SharePartitionKey("g", T, 0)).leader_epoch == 4
    # the same leader reading again writes nothing; an older one is fenced, for reads and writes
    assert c.read_state("g", T, 0, 4).records == []
    assert c.read_state("g", T, 0, 3).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert c.write_state("g", T, 0, 2, 3, -1, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
    # -1 reads without fencing or recording
    r = c.read_state("g", T, 0, -1)
    assert r.error_code == ErrorCode.NONE and r.records == []


@pytest.mark.parametrize(("args", "code"), [
    (("g", T, 0, 0), ErrorCode.INVALID_REQUEST),  # uninitialized
    (("g", T, -1, 0), ErrorCode.INVALID_REQUEST),
    (("", T, 0, 0), ErrorCode.INVALID_GROUP_ID),
])
def test_read_errors(args: tuple, code: ErrorCode) -> None:
    r = make().read_state(*args)
    assert r.error_code == code and r.state is None and r.records == []


def test_read_unknown_topic_partition() -> None:
    c = make()
    c.initialize("g", T, 0, 0, 0)
    c._partition_exists = lambda t, p: False
    assert c.read_state("g", T, 0, 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ------------------------------------------------------------------------------------- delete, summary

def test_delete_tombstones_both_record_keys() -> None:
    c = make()
    c.initialize("g", T, 0, 0, 0)
    code, records = c.delete_state("g", T, 0)
    assert code == ErrorCode.NONE and kinds(records) == ["snapshot-tombstone", "update-tombstone"]
    assert c.state(SharePartitionKey("g", T, 0)) is None
    assert c.read_state("g", T, 0, 0).error_code == ErrorCode.INVALID_REQUEST
    # deleting what is not there is fine and writes nothing
    assert tuple(c.delete_state("g", T, 0)) == (ErrorCode.NONE, [])
    assert c.delete_state("g", T, -1).error_code == ErrorCode.INVALID_REQUEST
    assert c.delete_state("g", UNKNOWN_TOPIC, 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topics_tombstones_all_their_share_partitions() -> None:
    c = make()
    other = uuid.uuid4()
    for g in ("a", "b"):
        for p in (0, 1):
            c.initialize(g, T, p, 0, 0)
    c.initialize("a", other, 0, 0, 0)
    records = c.delete_topics([T])
    assert len(records) == 8 and all(r.value is None for r in records)
    assert c.keys() == [SharePartitionKey("a", other, 0)]


def test_summary() -> None:
    c = make()
    code, s, _ = c.read_state_summary("g", T, 0)
    assert code == ErrorCode.NONE and (s.state_epoch, s.leader_epoch, s.start_offset,
                                       s.delivery_complete_count) == (0, 0, -1, -1)
    c.initialize("g", T, 0, 3, 5)
    c.read_state("g", T, 0, 7)
    c.write_state("g", T, 0, 3, 7, 8, [B(9, 9, ACK, 1)], delivery_complete_count=1)
    code, s, _ = c.read_state_summary("g", T, 0)
    assert (s.state_epoch, s.leader_epoch, s.start_offset, s.delivery_complete_count) == (3, 7, 8, 1)
    assert c.read_state_summary("g", T, -1)[0] == ErrorCode.INVALID_REQUEST
    assert c.read_state_summary("g", UNKNOWN_TOPIC, 0)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ---------------------------------------------------------------------------------------------- loading

def test_load_in_progress_and_not_coordinator() -> None:
    c = make(partitions=3)
    key = SharePartitionKey("g", T, 0)
    p = c.partition_for(key)
    _, records = c.initialize("g", T, 0, 0, 0)
    c.write_state("g", T, 0, 0, 0, -1, [B(0, 0, ACK, 1)])
    c.load_begin(p)
    assert c.state(key) is None  # a load starts from nothing
    for r in (c.initialize("g", T, 0, 0, 0), c.write_state("g", T, 0, 0, 0, -1, []),
              c.read_state("g", T, 0, 0), c.delete_state("g", T, 0)):
        assert r.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and r.records == []
    assert c.read_state_summary("g", T, 0)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    # keys of other partitions are served meanwhile
    other = next(g for g in (f"g{i}" for i in range(100)) if c.partition_for(SharePartitionKey(g, T, 0)) != p)
    assert c.initialize(other, T, 0, 0, 0).error_code == ErrorCode.NONE
    for r in records:
        c.replay(r.key, r.value)
    c.load_complete(p)
    assert c.read_state("g", T, 0, 0).state.start_offset == 0
    c.unload(p)
    assert c.state(key) is None
    assert c.read_state("g", T, 0, 0).error_code == ErrorCode.NOT_COORDINATOR
    # a topic deletion reaches only the partitions this coordinator serves
    assert {r.partition for r in c.delete_topics([T])} == {c.partition_for(SharePartitionKey(other, T, 0))}


# -------------------------------------------------------------------------------------------- wire API

def roundtrip_request(api: int, version: int, body: dict[str, Any]) -> Any:
    codec = request_codec(api, version)
    return codec.decode(codec.encode(body))


def roundtrip_response(api: int, version: int, body: dict[str, Any]) -> Any:
    codec = response_codec(api, version)
    return codec.decode(codec.encode(body))


def test_wire_initialize_write_read_delete() -> None:
    c = make()
    req = roundtrip_request(83, 0, {"group_id": "g", "topics": [{"topic_id": T, "partitions": [
        {"partition": 0, "state_epoch": 1, "start_offset": 0},
        {"partition": -1, "state_epoch": 1, "start_offset": 0}]}]})
    response, records = c.initialize_share_group_state(req, 0)
    resp = roundtrip_response(83, 0, response)
    assert [(p.partition, p.error_code) for p in resp.results[0].partitions] == [(0, 0), (-1, 42)]
    assert resp.results[0].topic_id == T and len(records) == 1

    for version in (0, 1):
        req = roundtrip_request(85, version, {"group_id": "g", "topics": [{"topic_id": T, "partitions": [
            {"partition": 0, "state_epoch": 1, "leader_epoch": 2, "start_offset": -1,
             "delivery_complete_count": 3,
             "state_batches": [{"first_offset": 0, "last_offset": 4, "delivery_state": ACK, "delivery_count": 1}]},
        ]}]})
        response, records = c.write_share_group_state(req, version)
        resp = roundtrip_response(85, version, response)
        assert resp.results[0].partitions[0].error_code == 0 and len(records) == 1
        assert c.state(SharePartitionKey("g", T, 0)).delivery_complete_count == (3 if version else -1)

    req = roundtrip_request(84, 0, {"group_id": "g", "topics": [{"topic_id": T, "partitions": [
        {"partition": 0, "leader_epoch": 1}, {"partition": 0, "leader_epoch": 2}, {"partition": 1,
                                                                                   "leader_epoch": 2}]}]})
    response, records = c.read_share_group_state(req, 0)
    parts = roundtrip_response(84, 0, response).results[0].partitions
    assert [p.error_code for p in parts] == [ErrorCode.FENCED_LEADER_EPOCH, 0, ErrorCode.INVALID_REQUEST]
    assert parts[1].state_epoch == 1 and parts[1].start_offset == 0
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in parts[1].state_batches] == [(0, 4, ACK, 1)]
    assert records == []

    for version in (0, 1):
        req = roundtrip_request(87, version, {"group_id": "g", "topics": [{"topic_id": T, "partitions": [
            {"partition": 0, "leader_epoch": 2}]}]})
        response, records = c.read_share_group_state_summary(req, version)
        p = roundtrip_response(87, version, response).results[0].partitions[0]
        assert records == [] and (p.error_code, p.state_epoch, p.leader_epoch, p.start_offset) == (0, 1, 2, 0)
        if version:
            assert p.delivery_complete_count == 3

    req = roundtrip_request(86, 0, {"group_id": "g", "topics": [{"topic_id": T, "partitions": [{"partition": 0}]}]})
    response, records = c.delete_share_group_state(req, 0)
    assert roundtrip_response(86, 0, response).results[0].partitions[0].error_code == 0
    assert len(records) == 2 and c.keys() == []


def test_wire_empty_group_id() -> None:
    c = make()
    req = roundtrip_request(84, 0, {"group_id": "", "topics": [{"topic_id": T, "partitions": [
        {"partition": 0, "leader_epoch": 1}]}]})
    response, records = c.read_share_group_state(req, 0)
    p = roundtrip_response(84, 0, response).results[0].partitions[0]
    assert p.error_code == ErrorCode.INVALID_GROUP_ID and p.error_message and records == []
