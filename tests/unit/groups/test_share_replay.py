"""Coordinator records: wire format, tombstones, and replay rebuilding identical state."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups.share import records as rec
from broker.groups.share.group import ShareMember
from broker.groups.share.manager import ShareGroupManager
from protocol.codec import record_codec
from protocol.errors import DecodeError
from tests.unit.groups.share_helpers import Topics, complete_init, hb, make


def test_key_and_value_layout() -> None:
    r = rec.group_epoch("g", 7, -3)
    assert r.key == struct.pack(">h", 11) + record_codec("ShareGroupMetadataKey", 0).encode({"group_id": "g"})
    assert r.value[:2] == b"\x00\x00"
    assert record_codec("ShareGroupMetadataValue", 0).decode(r.value[2:]) == {"epoch": 7, "metadata_hash": -3}
    assert rec.group_epoch_tombstone("g") == rec.Record(r.key, None)
    assert [rec.TYPE_OF[n] for n in rec.RECORD_NAMES] == [10, 11, 12, 13, 14, 15]


def test_decode_rejects_foreign_and_malformed_records() -> None:
    offset_commit_key = struct.pack(">h", 1) + b"\x00\x01g\x00\x01t\x00\x00\x00\x00"
    assert not rec.is_share_record(offset_commit_key)
    with pytest.raises(DecodeError):
        rec.decode(offset_commit_key, None)
    with pytest.raises(DecodeError):
        rec.decode(rec.group_epoch("g", 1, 0).key, b"\x00\x05junk")
    svc = make(Topics())
    assert svc.replay(offset_commit_key, b"\x00\x03whatever") is False


def test_member_records_roundtrip() -> None:
    tid = uuid.uuid4()
    m = ShareMember("m", member_epoch=5, previous_member_epoch=4, rack_id=None, client_id="c",
                    client_host="/h", subscribed_topic_names=frozenset({"b", "a"}),
                    assigned_partitions={tid: frozenset({2, 0})})
    groups: dict = {}
    for r in (rec.member_subscription("g", m), rec.current_assignment("g", m)):
        rec.apply(groups, rec.decode(r.key, r.value))
    assert groups["g"].members["m"] == m


def test_tombstones_for_unknown_group_are_ignored() -> None:
    svc = make(Topics())
    for r in (rec.group_epoch_tombstone("x"), rec.member_subscription_tombstone("x", "m"),
              rec.current_assignment_tombstone("x", "m"), rec.target_assignment_tombstone("x", "m"),
              rec.state_partition_metadata_tombstone("x"), rec.target_assignment_epoch_tombstone("x")):
        assert svc.replay(r.key, r.value)
    assert svc.groups == {}


def replayed(topics: Topics, log: list[rec.Record]) -> ShareGroupManager:
    fresh = make(topics)
    for r in log:
        assert fresh.replay(r.key, r.value)
    return fresh


# Weighted so that scripts reach joined, initialized, assigned members most of the time.
ACTIONS = ["join"] * 3 + ["hb"] * 5 + ["init"] * 3 + ["leave", "tick", "grow", "sub", "fail", "stale"]
actions = st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 5), st.integers(0, 2)), max_size=50)


@settings(max_examples=150, deadline=None)
@given(actions)
def test_replay_rebuilds_identical_state(script: list[tuple[str, int, int]]) -> None:
    topics = Topics()
    names = ["t0", "t1", "t2"]
    topics.create("t0", 2)
    topics.create("t1", 3)
    svc = make(topics, session_timeout_ms=20_000, heartbeat_interval_ms=1_000, max_size=4)
    log: list[rec.Record] = []
    epochs: dict[str, int] = {}
    pending = []
    now = 0
    for action, who, what in script:
        member, group = f"m{who}", f"g{who % 2}"
        now += 1_000
        if action == "join":
            res = hb(svc, group, member, 0, names[: what + 1], now)
        elif action == "sub":
            res = hb(svc, group, member, epochs.get(member, 1), names[what:], now)
        elif action == "hb":
            current = svc.groups.get(group)
            known = current.members.get(member) if current else None
            res = hb(svc, group, member, known.member_epoch if known else epochs.get(member, 1), None, now)
        elif action == "stale":
            res = hb(svc, group, member, epochs.get(member, 1) + what - 1, None, now)
        elif action == "leave":
            res = hb(svc, group, member, -1, None, now)
        elif action == "init":
            for req in pending:
                for tid, parts in req.topics.items():
                    log += svc.initialized(req.group_id, tid, parts)
            pending = []
            continue
        elif action == "fail":
            for req in pending:
                for tid, parts in req.topics.items():
                    log += svc.initialize_failed(req.group_id, tid, parts)
            pending = []
            continue
        elif action == "grow":
            if "t2" in topics.by_name:
                topics.grow("t2", topics.by_name["t2"][1] + 1)
            else:
                topics.create("t2", 1)
            continue
        else:
            now += 15_000
            res = svc.expire_sessions(now)
            log += res.records
            continue
        log += res.records
        pending += res.initialize
        if res.response.get("error_code") == 0 and res.response["member_epoch"] >= 0:
            epochs[member] = res.response["member_epoch"]
        # Replay after every step: the state must match at any point of the log.
        assert replayed(topics, log).snapshot() == svc.snapshot()
    # Settle: finish initializations and let every member reconcile, so assignments are always exercised.
    for req in pending:
        for tid, parts in req.topics.items():
            log += svc.initialized(req.group_id, tid, parts)
    for _ in range(2):
        for gid, group in sorted(svc.groups.items()):
            for mid, m in sorted(group.members.items()):
                res = hb(svc, gid, mid, m.member_epoch, None, now)
                log += res.records
                for req in res.initialize:
                    for tid, parts in req.topics.items():
                        log += svc.initialized(req.group_id, tid, parts)
    assert replayed(topics, log).snapshot() == svc.snapshot()


def test_replayed_members_survive_until_session_timeout() -> None:
    topics = Topics()
    topics.create("t", 2)
    svc = make(topics)
    log = []
    for m in ("a", "b"):
        res = hb(svc, "g", m, 0, ["t"], now=0)
        log += res.records + complete_init(svc, res)
    fresh = replayed(topics, log)
    assert fresh.next_deadline() is None
    fresh.loaded(1_000)
    assert fresh.next_deadline() == 46_000
    epoch = fresh.groups["g"].members["a"].member_epoch
    res = hb(fresh, "g", "a", epoch, now=2_000)  # the member carries on after the restart
    assert res.response["error_code"] == 0
    expired = fresh.expire_sessions(46_000)
    assert [r.member_id for r in expired.removed_members] == ["b"]
