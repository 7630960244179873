"""Every version we advertise of the classic group, offset and group admin APIs, over the wire with our codecs."""

from __future__ import annotations

import pytest

from broker.groups.consumer.protocol import encode_assignment
from protocol.errors import ErrorCode
from tests.helpers.confluent_clients import create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import (
    DELETE,
    DESCRIBE,
    HEARTBEAT,
    LEAVE,
    LIST,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC,
    join,
    topic_id,
)

pytestmark = pytest.mark.integration

E = ErrorCode


@pytest.mark.parametrize("version", range(10))
def test_join_sync_heartbeat_commit_leave_in_every_version(broker_module, version):
    group = f"raw-g{version}"
    sync_v, hb_v, leave_v = min(version, 5), min(version, 4), min(version, 5)
    with RawClient(broker_module.port) as c:
        if version == 0:
            create_topic(broker_module.bootstrap, "raw", 2)
        first = join(c, version, group)
        if version >= 4:
            assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
            first = join(c, version, group, first.member_id)
        assert first.error_code == 0, first
        mid = first.member_id
        assert first.generation_id == 1 and first.leader == mid and first.protocol_name == "range"
        assert [m.member_id for m in first.members] == [mid]
        if version >= 7:
            assert first.protocol_type == "consumer"
        mine = encode_assignment({"raw": [0, 1]})
        synced = c.call(SYNC, sync_v, {"group_id": group, "generation_id": 1, "member_id": mid,
                                       "group_instance_id": None, "protocol_type": "consumer",
                                       "protocol_name": "range", "assignments": [{"member_id": mid,
                                                                                  "assignment": mine}]})
        assert synced.error_code == 0 and synced.assignment == mine
        if sync_v >= 5:
            assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
        hb = c.call(HEARTBEAT, hb_v, {"group_id": group, "generation_id": 1, "member_id": mid,
                                      "group_instance_id": None})
        assert hb.error_code == 0
        stale = c.call(HEARTBEAT, hb_v, {"group_id": group, "generation_id": 0, "member_id": mid,
                                         "group_instance_id": None})
        assert stale.error_code == E.ILLEGAL_GENERATION
        leave = {"group_id": group, "member_id": mid,
                 "members": [{"member_id": mid, "group_instance_id": None, "reason": "done"}]}
        left = c.call(LEAVE, leave_v, leave)
        assert left.error_code == 0
        if leave_v >= 3:
            assert [(m.member_id, m.error_code) for m in left.members] == [(mid, 0)]
        again = c.call(LEAVE, leave_v, leave)
        assert (again.error_code if leave_v < 3 else again.members[0].error_code) == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", range(2, 11))
def test_offset_commit_and_fetch_in_every_version(broker_module, version):
    group = f"raw-o{version}"
    with RawClient(broker_module.port) as c:
        create_topic(broker_module.bootstrap, f"raw-o{version}", 2)
        tid = topic_id(c, f"raw-o{version}")
        topic = {"name": f"raw-o{version}", "topic_id": tid, "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 0, "committed_metadata": "m"},
            {"partition_index": 5, "committed_offset": 1, "committed_leader_epoch": 0, "committed_metadata": None}]}
        committed = c.call(OFFSET_COMMIT, version, {"group_id": group, "generation_id_or_member_epoch": -1,
                                                    "member_id": "", "group_instance_id": None,
                                                    "retention_time_ms": -1, "topics": [topic]})
        [t] = committed.topics
        assert [(p.partition_index, p.error_code) for p in t.partitions] == [(0, 0), (5, E.UNKNOWN_TOPIC_OR_PARTITION)]
        assert (t.topic_id == tid) if version >= 10 else (t.name == f"raw-o{version}")
        for fetch_v in {min(version, 10), 1, 7, 8}:
            if fetch_v < 8:
                body = {"group_id": group, "topics": [{"name": f"raw-o{version}", "partition_indexes": [0, 1]}]}
                got = c.call(OFFSET_FETCH, fetch_v, body)
                parts = got.topics[0].partitions
            else:
                req_topic = {"name": f"raw-o{version}", "topic_id": tid, "partition_indexes": [0, 1]}
                got = c.call(OFFSET_FETCH, fetch_v, {"groups": [{"group_id": group, "member_id": None,
                                                                 "member_epoch": -1, "topics": [req_topic]},
                                                                {"group_id": "nobody", "topics": None}],
                                                     "require_stable": True})
                assert [g.group_id for g in got.groups] == [group, "nobody"]
                assert got.groups[1].topics == [] and got.groups[1].error_code == 0
                parts = got.groups[0].topics[0].partitions
            assert [(p.committed_offset, p.metadata) for p in parts] == [(42, "m"), (-1, "")]
        every = c.call(OFFSET_FETCH, 7, {"group_id": group, "topics": None})
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in every.topics] == [
            (f"raw-o{version}", [0])]


def test_list_describe_delete_and_offset_delete_in_every_version(broker_module):
    with RawClient(broker_module.port) as c:
        create_topic(broker_module.bootstrap, "raw-admin", 1)
        body = {"group_id": "raw-adm", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": "raw-admin", "partitions": [{"partition_index": 0, "committed_offset": 3,
                                                  "committed_metadata": ""}]}]}
        assert c.call(OFFSET_COMMIT, 8, body).topics[0].partitions[0].error_code == 0
        for v in range(6):
            listed = c.call(LIST, v, {"states_filter": ["empty"], "types_filter": ["classic"]})
            assert listed.error_code == 0
            entry = next(g for g in listed.groups if g.group_id == "raw-adm")
            assert entry.protocol_type == ""
            if v >= 4:
                assert entry.group_state == "Empty"
            if v >= 5:
                assert entry.group_type == "classic"
        for v in range(7):
            described = c.call(DESCRIBE, v, {"groups": ["raw-adm", "raw-absent"],
                                             "include_authorized_operations": True})
            assert [(g.group_id, g.group_state) for g in described.groups] == [("raw-adm", "Empty"),
                                                                               ("raw-absent", "Dead")]
            assert described.groups[1].error_code == (E.GROUP_ID_NOT_FOUND if v >= 6 else 0)
        gone = c.call(OFFSET_DELETE, 0, {"group_id": "raw-adm", "topics": [
            {"name": "raw-admin", "partitions": [{"partition_index": 0}]}]})
        assert gone.error_code == 0 and gone.topics[0].partitions[0].error_code == 0
        for v in range(4):
            deleted = c.call(DELETE, v, {"groups_names": [f"raw-del{v}"]})
            assert deleted.results[0].error_code == E.GROUP_ID_NOT_FOUND
        deleted = c.call(DELETE, 3, {"groups_names": ["raw-adm"]})
        assert deleted.results[0].error_code == 0


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_heartbeat_and_describe_in_every_version(broker_module, version):
    cg_hb, cg_describe = 68, 69
    group = f"raw-cg{version}"
    with RawClient(broker_module.port) as c:
        create_topic(broker_module.bootstrap, f"raw-cg{version}", 3)
        tid = topic_id(c, f"raw-cg{version}")
        body = {"group_id": group, "member_id": "" if version == 0 else "member-one", "member_epoch": 0,
                "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [f"raw-cg{version}"],
                "topic_partitions": []}
        joined = c.call(cg_hb, version, body)
        # a new group is at epoch 1, as in Kafka 4.4: its first member joins at 2
        assert joined.error_code == 0 and joined.member_epoch == 2 and joined.member_id
        assert [(t.topic_id, list(t.partitions)) for t in joined.assignment.topic_partitions] == [(tid, [0, 1, 2])]
        beat = c.call(cg_hb, version, {"group_id": group, "member_id": joined.member_id, "member_epoch": 2})
        assert beat.error_code == 0 and beat.assignment is None
        for v in (0, 1):
            described = c.call(cg_describe, v, {"group_ids": [group, "raw-cg-absent"],
                                                "include_authorized_operations": False})
            ok, absent = described.groups
            assert (ok.group_state, ok.group_epoch, ok.assignment_epoch, ok.assignor_name) == (
                "Stable", 2, 2, "uniform")
            [m] = ok.members
            assert m.member_id == joined.member_id and m.member_epoch == 2
            assert [p for t in m.assignment.topic_partitions for p in t.partitions] == [0, 1, 2]
            if v >= 1:
                assert m.member_type == 1
            assert absent.error_code == E.GROUP_ID_NOT_FOUND
        left = c.call(cg_hb, version, {"group_id": group, "member_id": joined.member_id, "member_epoch": -1})
        assert left.error_code == 0 and left.member_epoch == -1
