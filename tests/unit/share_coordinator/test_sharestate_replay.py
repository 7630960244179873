"""Records on __share_group_state: byte layout, decoding, and replay rebuilding identical state."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from broker.share_coordinator import (
    ShareCoordinator,
    ShareCoordinatorConfig,
    SharePartitionKey,
    SharePartitionState,
    StateBatch,
)
from broker.share_coordinator import records as rec
from protocol.codec import record_codec
from protocol.errors import DecodeError, ErrorCode
from tests.unit.share_coordinator.sharestate_model import OffsetModel

T = uuid.UUID("12345678-9abc-def0-0fed-cba987654321")
B = StateBatch


def make(per_snapshot: int = 500, partitions: int = 50) -> ShareCoordinator:
    return ShareCoordinator(ShareCoordinatorConfig(partitions, per_snapshot), clock=lambda: 42)


def replay_all(records: list, per_snapshot: int = 500, partitions: int = 50) -> ShareCoordinator:
    fresh = make(per_snapshot, partitions)
    for p in range(partitions):
        fresh.load_begin(p)
    for r in records:
        fresh.replay(r.key, r.value)
    for p in range(partitions):
        fresh.load_complete(p)
    return fresh


def test_key_and_value_layout() -> None:
    key = SharePartitionKey("g", T, 3)
    s = SharePartitionState(1, 2, 3, 4, 5, 6, 7, (B(4, 9, 2, 1),))
    k, v = rec.encode_snapshot(key, s)
    # key: int16 record type 0 (ShareSnapshotKey's apiKey), then the key struct, non-flexible
    assert k == struct.pack(">hh", 0, 1) + b"g" + T.bytes + struct.pack(">i", 3)
    assert struct.unpack_from(">h", v)[0] == 0
    body = record_codec("ShareSnapshotValue", 0).decode(v[2:])
    assert (body.snapshot_epoch, body.state_epoch, body.leader_epoch, body.start_offset,
            body.delivery_complete_count, body.create_timestamp, body.write_timestamp) == (1, 2, 3, 4, 5, 6, 7)
    uk, _ = rec.encode_update(key, rec.ShareUpdate(1, 3, -1, -1, ()))
    assert uk[:2] == struct.pack(">h", 1) and uk[2:] == k[2:]
    decoded = rec.decode(k, v)
    assert decoded.name == rec.SNAPSHOT and decoded.key == key and decoded.value == s
    assert rec.decode(uk, None).value is None


_INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


@settings(max_examples=300, deadline=None)
@given(snapshot_epoch=_INT32, leader_epoch=_INT32, start_offset=_INT64,
       dcc=st.one_of(st.just(-1), _INT32),
       batches=st.lists(st.tuples(_INT64, _INT64, st.integers(-128, 127), st.integers(-(1 << 15), (1 << 15) - 1)),
                        max_size=140))
@example(snapshot_epoch=0, leader_epoch=-1, start_offset=-1, dcc=-1, batches=[])
@example(snapshot_epoch=0, leader_epoch=-1, start_offset=0, dcc=0, batches=[(0, 0, 0, 0)] * 127)
def test_update_value_is_byte_exact_with_the_generic_codec(snapshot_epoch: int, leader_epoch: int,
                                                           start_offset: int, dcc: int, batches: list) -> None:
    """encode_update packs ShareUpdateValue itself (it is written once per acknowledging ShareFetch): the bytes
    must be the schema codec's, tagged DeliveryCompleteCount (default -1 left out) and varint lengths included."""
    u = rec.ShareUpdate(snapshot_epoch, leader_epoch, start_offset, dcc, tuple(B(*b) for b in batches))
    expected = struct.pack(">h", 0) + record_codec("ShareUpdateValue", 0).encode({
        "snapshot_epoch": snapshot_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset,
        "delivery_complete_count": dcc, "state_batches": [
            {"first_offset": f, "last_offset": la, "delivery_state": ds, "delivery_count": dc}
            for f, la, ds, dc in batches]})
    _, value = rec.encode_update(SharePartitionKey("g", T, 3), u)
    assert value == expected
    assert rec.decode(rec.encode_update(SharePartitionKey("g", T, 3), u)[0], value).value == u


def test_decode_errors_and_foreign_records() -> None:
    with pytest.raises(DecodeError):
        rec.decode(b"\x00", None)
    k, v = rec.encode_snapshot(SharePartitionKey("g", T, 0), SharePartitionState(0, 0, 0, 0))
    with pytest.raises(DecodeError):
        rec.decode(k, b"\x00")
    with pytest.raises(DecodeError):
        rec.decode(k, b"\x00\x07" + v[2:])
    # a record type the share coordinator does not own (e.g. a group record) is ignored by replay
    assert rec.decode(struct.pack(">h", 11) + b"\x00\x01g", b"\x00\x00") is None
    c = make()
    c.replay(struct.pack(">h", 11) + b"\x00\x01g", b"\x00\x00")
    assert c.keys() == []


def test_tombstones_remove_state_on_replay() -> None:
    c = make()
    records = list(c.initialize("g", T, 0, 1, 0).records)
    records += c.write_state("g", T, 0, 1, 1, -1, [B(0, 0, 2, 1)]).records
    records += c.delete_state("g", T, 0).records
    assert replay_all(records).keys() == []
    # a re-initialized share-partition starts afresh after its tombstones; the old leader fence is gone too
    records += c.initialize("g", T, 0, 0, 5).records
    fresh = replay_all(records)
    assert fresh.state(SharePartitionKey("g", T, 0)) == c.state(SharePartitionKey("g", T, 0))
    assert fresh.write_state("g", T, 0, 0, 0, -1, []).error_code == ErrorCode.NONE


def test_replay_keeps_fencing() -> None:
    c = make()
    records = list(c.initialize("g", T, 0, 3, 0).records)
    records += c.read_state("g", T, 0, 9).records
    fresh = replay_all(records)
    assert fresh.write_state("g", T, 0, 3, 8, -1, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert fresh.write_state("g", T, 0, 2, 9, -1, []).error_code == ErrorCode.FENCED_STATE_EPOCH


GROUPS = ["a", "b", "c"]
batch = st.builds(lambda first, length, state, count: B(first, first + length, state, count),
                  st.integers(0, 40), st.integers(0, 8), st.sampled_from([0, 2, 4]), st.integers(0, 3))
op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(GROUPS), st.one_of(st.just(-1), st.integers(0, 30)),
              st.lists(batch, max_size=4), st.integers(-1, 5)),
    st.tuples(st.just("read"), st.sampled_from(GROUPS), st.integers(-1, 6)),
    st.tuples(st.just("init"), st.sampled_from(GROUPS), st.integers(0, 3), st.integers(-1, 10)),
    st.tuples(st.just("delete"), st.sampled_from(GROUPS)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=40), st.integers(0, 4))
# a share-partition initialized without a start offset refuses batches until one is written
@example([("init", "a", 1, -1), ("write", "a", -1, [B(0, 1, 0, 0)], -1), ("write", "a", 3, [B(3, 4, 2, 1)], -1)], 0)
def test_replay_rebuilds_identical_state(ops: list, per_snapshot: int) -> None:
    c = make(per_snapshot, partitions=3)
    models: dict[str, OffsetModel] = {}
    records = []
    for g in GROUPS:
        records += c.initialize(g, T, 0, 0, 0).records
        models[g] = OffsetModel(0)
    for o in ops:
        g = o[1]
        key = SharePartitionKey(g, T, 0)
        if o[0] == "write":
            _, _, start, batches, dcc = o
            r = c.write_state(g, T, 0, -1, -1, start, batches, dcc)
            # batches need a start offset to hang from: this write's, or one stored before
            without_start = g in models and batches and start == -1 and models[g].start < 0
            if r.error_code == ErrorCode.NONE:
                assert g in models and not without_start
                models[g].write(start, batches)
            else:
                assert (g not in models or without_start) and r.error_code == ErrorCode.INVALID_REQUEST
        elif o[0] == "read":
            r = c.read_state(g, T, 0, o[2])
            assert r.error_code in (ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_REQUEST)
        elif o[0] == "init":
            r = c.initialize(g, T, 0, o[2], o[3])
            if r.error_code == ErrorCode.NONE:
                models[g] = OffsetModel(o[3])
        else:
            r = c.delete_state(g, T, 0)
            models.pop(g, None)
        records += r.records
        s = c.state(key)
        if g in models:
            assert s.start_offset == models[g].start and s.state_batches == models[g].batches()
        else:
            assert s is None
    fresh = replay_all(records, per_snapshot, partitions=3)
    assert fresh._entries == c._entries  # state, epoch fences and snapshot cadence all rebuilt
    assert all(r.partition == c.partition_for(rec.decode(r.key, r.value).key) for r in records)
