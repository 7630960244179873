"""Raw-protocol share-group coordinator tests: ShareGroupHeartbeat/Describe and the share-state APIs (83-87)
against a real broker, including replay of `__consumer_offsets` and `__share_group_state` after a restart."""

from __future__ import annotations

import time
import uuid

import pytest

from protocol.errors import ErrorCode
from tests.helpers.confluent_clients import admin_client, create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import topic_id
from tests.helpers.share_raw import FAST, assigned, describe, heartbeat, join_until_assigned

pytestmark = pytest.mark.integration

HEARTBEAT, DESCRIBE = 76, 77
INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87


def test_join_gets_assignment_after_share_partitions_are_initialized(broker_factory):
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "sg-join", partitions=3)
    with RawClient(broker.port) as c:
        tid = topic_id(c, "sg-join")
        epoch, got = join_until_assigned(c, "g1", "m1", "sg-join", 3)
        assert got == {tid: [0, 1, 2]}
        d = describe(c, "g1").groups[0]
        assert d.error_code == 0 and d.group_state == "Stable" and d.assignor_name == "simple"
        [m] = d.members
        assert (m.member_id, m.member_epoch, m.client_id) == ("m1", epoch, "raw-test")
        assert m.client_host == "/127.0.0.1"
        assert list(m.subscribed_topic_names) == ["sg-join"]
        assert [(t.topic_name, list(t.partitions)) for t in m.assignment.topic_partitions] == [("sg-join", [0, 1, 2])]
        # The group coordinator initialized the share-partitions through the share coordinator.
        summary = c.call(SUMMARY, 1, {"group_id": "g1", "topics": [
            {"topic_id": tid, "partitions": [{"partition": p, "leader_epoch": -1} for p in range(3)]}]})
        for p in summary.results[0].partitions:
            assert p.error_code == 0 and p.start_offset == -1 and p.state_epoch >= 1


def test_two_members_split_partitions_and_leave_removes_member(broker_factory):
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "sg-two", partitions=4)
    with RawClient(broker.port) as c:
        tid = topic_id(c, "sg-two")
        e1, _ = join_until_assigned(c, "g2", "a", "sg-two", 4)
        r = heartbeat(c, "g2", "b", 0, ["sg-two"])
        assert r.error_code == 0
        e2 = r.member_epoch
        # Each member converges on its own heartbeats.
        end = time.monotonic() + 30
        got: dict[str, list[int]] = {"a": [0, 1, 2, 3], "b": assigned(r).get(tid, [])}
        while sorted(got["a"] + got["b"]) != [0, 1, 2, 3] or not got["a"] or not got["b"]:
            assert time.monotonic() < end, got
            time.sleep(0.05)
            ra, rb = heartbeat(c, "g2", "a", e1), heartbeat(c, "g2", "b", e2)
            assert ra.error_code == 0 and rb.error_code == 0
            e1, e2 = ra.member_epoch, rb.member_epoch
            if ra.assignment is not None:
                got["a"] = assigned(ra).get(tid, [])
            if rb.assignment is not None:
                got["b"] = assigned(rb).get(tid, [])
        assert set(got["a"]).isdisjoint(got["b"])
        left = heartbeat(c, "g2", "b", -1)
        assert (left.error_code, left.member_epoch) == (0, -1)
        d = describe(c, "g2").groups[0]
        assert [m.member_id for m in d.members] == ["a"]
        # The remaining member takes every partition back.
        end = time.monotonic() + 30
        while True:
            ra = heartbeat(c, "g2", "a", e1)
            e1 = ra.member_epoch
            if ra.assignment is not None and sorted(assigned(ra).get(tid, [])) == [0, 1, 2, 3]:
                break
            assert time.monotonic() < end
            time.sleep(0.05)


def test_heartbeat_errors(broker):
    create_topic(broker.bootstrap, "sg-err")
    with RawClient(broker.port) as c:
        assert heartbeat(c, "g3", "", 0, ["sg-err"]).error_code == ErrorCode.INVALID_REQUEST
        assert heartbeat(c, "", "m", 0, ["sg-err"]).error_code == ErrorCode.INVALID_REQUEST
        assert heartbeat(c, "g3", "m", 0, None).error_code == ErrorCode.INVALID_REQUEST  # no subscription on join
        assert heartbeat(c, "g3", "m", 0, ["sg-err"], rack="").error_code == ErrorCode.INVALID_REQUEST
        assert heartbeat(c, "g3", "m", -2).error_code == ErrorCode.INVALID_REQUEST
        assert heartbeat(c, "nope", "m", 3).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        r = heartbeat(c, "g3", "m", 0, ["sg-err"])
        assert r.error_code == 0 and r.member_epoch >= 1 and r.heartbeat_interval_ms == 5000
        assert heartbeat(c, "g3", "other", 1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(c, "g3", "other", -1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        fenced = heartbeat(c, "g3", "m", r.member_epoch + 5)
        assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH and fenced.error_message
        d = describe(c, "g3", "missing", "")
        # the empty (invalid) id is answered first, as Kafka does
        assert [g.error_code for g in d.groups] == [ErrorCode.INVALID_GROUP_ID, 0, ErrorCode.GROUP_ID_NOT_FOUND]


def test_group_survives_restart(broker_factory):
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "sg-restart", partitions=2)
    with RawClient(broker.port) as c:
        tid = topic_id(c, "sg-restart")
        epoch, got = join_until_assigned(c, "g4", "m", "sg-restart", 2)
        before = describe(c, "g4").groups[0]
    broker.restart()
    with RawClient(broker.port) as c:
        after = describe(c, "g4").groups[0]
        assert after.error_code == 0
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert [(m.member_id, m.member_epoch) for m in after.members] == [("m", epoch)]
        r = heartbeat(c, "g4", "m", epoch)
        assert (r.error_code, r.member_epoch) == (0, epoch)
        # A full heartbeat (subscription included) returns the replayed assignment.
        r = heartbeat(c, "g4", "m", epoch, ["sg-restart"])
        assert r.error_code == 0 and assigned(r) == {tid: [0, 1]}


def test_session_expiry_removes_member(broker_factory):
    broker = broker_factory({**FAST, "group.share.min.session.timeout.ms": "1000",
                             "group.share.session.timeout.ms": "1000"})
    create_topic(broker.bootstrap, "sg-expire")
    with RawClient(broker.port) as c:
        r = heartbeat(c, "g5", "m", 0, ["sg-expire"])
        assert r.error_code == 0
        end = time.monotonic() + 30
        while describe(c, "g5").groups[0].members:
            assert time.monotonic() < end
            time.sleep(0.1)
        assert heartbeat(c, "g5", "m", r.member_epoch).error_code == ErrorCode.UNKNOWN_MEMBER_ID


# --- share-state APIs ------------------------------------------------------------------------------------------

def _one(resp):
    [t] = resp.results
    [p] = t.partitions
    return p


def initialize(c, group, tid, p, state_epoch, start_offset):
    return _one(c.call(INITIALIZE, 0, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
        {"partition": p, "state_epoch": state_epoch, "start_offset": start_offset}]}]}))


def write(c, group, tid, p, state_epoch, leader_epoch, start_offset, batches):
    return _one(c.call(WRITE, 0, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
        {"partition": p, "state_epoch": state_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset,
         "state_batches": [{"first_offset": a, "last_offset": b, "delivery_state": s, "delivery_count": n}
                           for a, b, s, n in batches]}]}]}))


def read(c, group, tid, p, leader_epoch=-1):
    return _one(c.call(READ, 0, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
        {"partition": p, "leader_epoch": leader_epoch}]}]}))


def delete(c, group, tid, p):
    return _one(c.call(DELETE, 0, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
        {"partition": p}]}]}))


def batches(resp) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in resp.state_batches]


def test_share_state_apis_fencing_and_replay(broker):
    create_topic(broker.bootstrap, "ss-topic", partitions=2)
    with RawClient(broker.port) as c:
        tid = topic_id(c, "ss-topic")
        assert read(c, "sg", tid, 0).error_code == ErrorCode.INVALID_REQUEST  # not initialized
        assert write(c, "sg", tid, 0, 1, 0, 0, []).error_code == ErrorCode.INVALID_REQUEST
        assert initialize(c, "sg", tid, 0, 2, 10).error_code == 0
        assert initialize(c, "sg", tid, 0, 1, 10).error_code == ErrorCode.FENCED_STATE_EPOCH
        assert initialize(c, "sg", tid, 9, 2, 10).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert initialize(c, "sg", uuid.uuid4(), 0, 2, 10).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert write(c, "sg", tid, 0, 2, 3, 10, [(10, 14, 2, 1), (15, 15, 4, 5)]).error_code == 0
        assert write(c, "sg", tid, 0, 1, 3, 10, []).error_code == ErrorCode.FENCED_STATE_EPOCH
        assert write(c, "sg", tid, 0, 2, 2, 10, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert write(c, "sg", tid, 0, 2, 3, 12, [(12, 12, 0, 1)]).error_code == 0
        r = read(c, "sg", tid, 0, leader_epoch=3)
        assert (r.error_code, r.state_epoch, r.start_offset) == (0, 2, 12)
        want = [(12, 12, 0, 1), (13, 14, 2, 1), (15, 15, 4, 5)]
        assert batches(r) == want
        assert read(c, "sg", tid, 0, leader_epoch=2).error_code == ErrorCode.FENCED_LEADER_EPOCH
        s = _one(c.call(SUMMARY, 1, {"group_id": "sg", "topics": [{"topic_id": tid, "partitions": [
            {"partition": 0, "leader_epoch": -1}]}]}))
        assert (s.error_code, s.state_epoch, s.leader_epoch, s.start_offset) == (0, 2, 3, 12)
        assert initialize(c, "sg", tid, 1, 0, -1).error_code == 0
        assert delete(c, "sg", tid, 1).error_code == 0
        assert read(c, "sg", tid, 1).error_code == ErrorCode.INVALID_REQUEST
        assert delete(c, "", tid, 0).error_code == ErrorCode.INVALID_GROUP_ID
    broker.restart()
    with RawClient(broker.port) as c:
        r = read(c, "sg", tid, 0)
        assert (r.error_code, r.state_epoch, r.start_offset, batches(r)) == (0, 2, 12, want)
        # Fencing survives the restart: it is rebuilt from the replayed records.
        assert write(c, "sg", tid, 0, 2, 2, 12, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert write(c, "sg", tid, 0, 1, 3, 12, []).error_code == ErrorCode.FENCED_STATE_EPOCH
        assert read(c, "sg", tid, 1).error_code == ErrorCode.INVALID_REQUEST  # the delete was replayed too


def test_share_state_apis_refuse_invalid_offsets_states_and_epochs(broker):
    """What a share-partition leader could not load is refused before it is written (INVALID_REQUEST), and an
    initialization cannot replace the state of a newer state epoch."""
    create_topic(broker.bootstrap, "ss-invalid", partitions=1)
    with RawClient(broker.port) as c:
        tid = topic_id(c, "ss-invalid")
        r = initialize(c, "sv", tid, 0, 3, -7)
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST, "The start offset must be -1 or non-negative.")
        assert read(c, "sv", tid, 0).error_code == ErrorCode.INVALID_REQUEST  # nothing was initialized
        assert initialize(c, "sv", tid, 0, 3, -1).error_code == 0
        r = write(c, "sv", tid, 0, 3, 0, -1, [(0, 4, 2, 1)])  # batches, but no start offset yet
        assert r.error_code == ErrorCode.INVALID_REQUEST, r
        assert write(c, "sv", tid, 0, 3, 0, -3, []).error_code == ErrorCode.INVALID_REQUEST
        assert write(c, "sv", tid, 0, 3, 0, 5, [(5, 6, 2, 1)]).error_code == 0
        for bad in [(9, 8, 2, 1), (7, 8, 1, 1), (7, 8, 7, 1), (7, 8, 4, -2)]:
            r = write(c, "sv", tid, 0, 3, 0, -1, [(7, 7, 0, 1), bad])
            assert r.error_code == ErrorCode.INVALID_REQUEST, (bad, r)
        assert initialize(c, "sv", tid, 0, -1, 0).error_code == ErrorCode.FENCED_STATE_EPOCH
        assert initialize(c, "sv", tid, 0, 2, 0).error_code == ErrorCode.FENCED_STATE_EPOCH
        r = read(c, "sv", tid, 0)
        assert (r.error_code, r.state_epoch, r.start_offset, batches(r)) == (0, 3, 5, [(5, 6, 2, 1)])


def test_apis_are_advertised(broker):
    with RawClient(broker.port) as c:
        versions = {k.api_key: (k.min_version, k.max_version) for k in c.call(18, 3, {"client_software_name": "raw", "client_software_version": "1"}).api_keys}
    assert versions[HEARTBEAT] == (1, 1) and versions[DESCRIBE] == (1, 1)
    for key in (INITIALIZE, READ, WRITE, DELETE, SUMMARY):
        assert key in versions


def test_topic_deletion_is_forgotten_by_the_group_and_the_share_state(broker_factory):

    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "sg-del", partitions=2)
    with RawClient(broker.port) as c:
        tid = topic_id(c, "sg-del")
        epoch, _ = join_until_assigned(c, "g6", "m", "sg-del", 2)
        admin = admin_client(broker.bootstrap)
        admin.delete_topics(["sg-del"])["sg-del"].result(30)
        end = time.monotonic() + 30
        while True:  # the next heartbeat sees the metadata change and drops the assignment
            r = heartbeat(c, "g6", "m", epoch)
            assert r.error_code == 0
            epoch = r.member_epoch
            if r.assignment is not None and assigned(r) == {}:
                break
            assert time.monotonic() < end
            time.sleep(0.05)
    broker.restart()
    with RawClient(broker.port) as c:
        [m] = describe(c, "g6").groups[0].members
        assert m.assignment.topic_partitions == []
        # Re-created under the same name the topic has a new id: fresh share-partitions are initialized.
    create_topic(broker.bootstrap, "sg-del", partitions=1)
    with RawClient(broker.port) as c:
        new_tid = topic_id(c, "sg-del")
        assert new_tid != tid
        end = time.monotonic() + 30
        while True:
            r = heartbeat(c, "g6", "m", epoch, ["sg-del"])
            assert r.error_code == 0
            epoch = r.member_epoch
            if assigned(r) == {new_tid: [0]}:
                break
            assert time.monotonic() < end
            time.sleep(0.05)


def test_group_initialization_keeps_state_written_before_the_group_assigned_it(broker_factory):
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "sg-keep")
    with RawClient(broker.port) as c:
        tid = topic_id(c, "sg-keep")
        # The share-partition leader may initialize and write before the group coordinator gets to it.
        assert initialize(c, "g7", tid, 0, 0, 5).error_code == 0
        assert write(c, "g7", tid, 0, 0, 0, 7, [(7, 8, 2, 1)]).error_code == 0
        join_until_assigned(c, "g7", "m", "sg-keep", 1)
        r = read(c, "g7", tid, 0)
        assert (r.error_code, r.start_offset, batches(r)) == (0, 7, [(7, 8, 2, 1)])


def test_first_heartbeat_answers_an_empty_assignment_and_a_later_one_assigns(broker):
    """As Kafka: share-partitions are assigned once the share coordinator has initialized them, which starts
    after the first heartbeat's answer (epoch 2, nothing assigned); a later heartbeat gets them (epoch 3)."""
    create_topic(broker.bootstrap, "sg-first", partitions=2)
    with RawClient(broker.port) as c:
        tid = topic_id(c, "sg-first")
        r = heartbeat(c, "g8", "m1", 0, ["sg-first"])
        assert (r.error_code, r.member_epoch, assigned(r)) == (0, 2, {})
        d = describe(c, "g8").groups[0]
        assert [(m.member_id, m.member_epoch) for m in d.members] == [("m1", 2)]
        epoch, got = join_until_assigned(c, "g8", "m1", "sg-first", 2)
        assert (epoch, got) == (3, {tid: [0, 1]})
