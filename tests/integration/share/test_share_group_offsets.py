"""Raw-protocol tests of the share-group offsets admin APIs against a real broker: DescribeShareGroupOffsets v0-1
(start offset, leader epoch and KIP-1226 lag), AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0, with
their errors, and what a member sees afterwards. Members are Shoal's own share client (explicit acknowledgements
of exact ranges, so start offsets and lags are known)."""

from __future__ import annotations

import time
import uuid

import pytest

from protocol.errors import ErrorCode
from shoal_client import ACCEPT, RELEASE, ShareGroupMember
from tests.helpers.confluent_clients import create_topic, produce_all
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import topic_id
from tests.helpers.share_consumers import earliest
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
SHARE_DESCRIBE, SUMMARY, LIST_GROUPS, DELETE_GROUPS, OFFSET_COMMIT = 77, 87, 16, 42, 8
ZERO = uuid.UUID(int=0)
FAST = {"group.share.min.heartbeat.interval.ms": "50", "group.share.heartbeat.interval.ms": "100"}


def describe_offsets(c: RawClient, group: str, topics=None, version: int = 1):
    body = {"groups": [{"group_id": group, "topics": None if topics is None else [
        {"topic_name": t, "partitions": list(ps)} for t, ps in topics.items()]}]}
    [g] = c.call(DESCRIBE_OFFSETS, version, body).groups
    return g


def offsets(group_answer) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, lag)."""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag)
            for t in group_answer.topics for p in t.partitions}


def alter(c: RawClient, group: str, topics: dict[str, dict[int, int]]):
    return c.call(ALTER_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": o} for p, o in ps.items()]}
        for t, ps in topics.items()]})


def delete_offsets(c: RawClient, group: str, *topics: str):
    return c.call(DELETE_OFFSETS, 0, {"group_id": group, "topics": [{"topic_name": t} for t in topics]})


def group_epoch(c: RawClient, group: str) -> int:
    [g] = c.call(SHARE_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False}).groups
    assert g.error_code == 0, g
    return g.group_epoch


def member(broker, group: str, topic: str) -> ShareGroupMember:
    return ShareGroupMember(broker.bootstrap, group, [topic], client_id="offsets-test").start()


def acquire(m: ShareGroupMember, want: int, timeout: float = 30.0) -> dict[int, list[tuple[int, int]]]:
    """Fetch until `want` offsets are acquired; partition -> acquired (first, last) ranges."""
    got: dict[int, list[tuple[int, int]]] = {}
    end = time.monotonic() + timeout
    while sum(last - first + 1 for rs in got.values() for first, last in rs) < want:
        assert time.monotonic() < end, got
        for a in m.fetch(max_records=1000, max_bytes=1 << 20, max_wait_ms=200).acquired:
            got.setdefault(a.key.partition, []).extend((first, last) for first, last, _ in a.ranges)
    return got


def setup(broker, topic: str, group: str, per_partition: list[int]) -> None:
    create_topic(broker.bootstrap, topic, len(per_partition))
    earliest(broker, group)
    for p, n in enumerate(per_partition):
        produce_all(broker.bootstrap, topic, [f"{p}-{i}".encode() for i in range(n)], partition=p)


def share_group_state(c: RawClient, group: str) -> str | None:
    listed = c.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
    return {g.group_id: g.group_state for g in listed.groups}.get(group)


def wait_empty(c: RawClient, group: str) -> None:
    wait_until(lambda: share_group_state(c, group) == "Empty", 30, f"share group {group} to be Empty")


def test_describe_offsets_start_offset_and_lag(broker_factory):
    broker = broker_factory(FAST)
    setup(broker, "so-desc", "g-desc", [10, 5])
    with RawClient(broker.port) as c:
        # No such group: no share-partition has state (all-topics form), named topics read as "no offset" (as
        # Kafka, tests/differential/test_share_admin.py).
        g = describe_offsets(c, "g-desc")
        assert (g.error_code, g.error_message, list(g.topics)) == (0, None, [])
        g = describe_offsets(c, "g-desc", {"so-desc": [0, 1], "so-none": [0]})
        assert g.error_code == 0
        assert offsets(g) == {("so-desc", 0): (-1, -1), ("so-desc", 1): (-1, -1), ("so-none", 0): (-1, -1)}
        assert {t.topic_name: t.topic_id for t in g.topics} == {"so-desc": topic_id(c, "so-desc"), "so-none": ZERO}

        m = member(broker, "g-desc", "so-desc")
        try:
            got = acquire(m, 15)
            assert got == {0: [(0, 9)], 1: [(0, 4)]}
            key0 = next(k for k in m.assignment() if k.partition == 0)
            key1 = next(k for k in m.assignment() if k.partition == 1)
            # p0: 0-3 and 6-7 accepted, the rest released: SPSO 4, two records complete above it, lag 10-4-2=4.
            # p1: all released: SPSO 0, lag 5.
            errors = m.acknowledge({key0: [(0, 3, ACCEPT), (4, 5, RELEASE), (6, 7, ACCEPT), (8, 9, RELEASE)],
                                    key1: [(0, 4, RELEASE)]})
            assert not errors
            g = describe_offsets(c, "g-desc")
            assert g.error_code == 0 and g.error_message is None
            assert offsets(g) == {("so-desc", 0): (4, 4), ("so-desc", 1): (0, 5)}
            [p0] = [p for t in g.topics for p in t.partitions if p.partition_index == 0]
            assert p0.leader_epoch == 0 and p0.error_code == 0
            # v0 has no lag: the same answer without it.
            g0 = describe_offsets(c, "g-desc", version=0)
            assert {(t.topic_name, p.partition_index): p.start_offset for t in g0.topics for p in t.partitions} \
                == {("so-desc", 0): 4, ("so-desc", 1): 0}
            # New records raise the lag.
            produce_all(broker.bootstrap, "so-desc", [b"more"] * 3, partition=1)
            assert offsets(describe_offsets(c, "g-desc", {"so-desc": [1]})) == {("so-desc", 1): (0, 8)}
        finally:
            m.close()
        # An empty group id has no share-partition state (as Kafka's coordinator answers it).
        g = describe_offsets(c, "")
        assert (g.error_code, list(g.topics)) == (0, [])
        assert offsets(describe_offsets(c, "", {"so-desc": [0]})) == {("so-desc", 0): (-1, -1)}


def test_alter_offsets_only_on_empty_groups_and_members_resume_there(broker_factory):
    broker = broker_factory(FAST)
    setup(broker, "so-alter", "g-alter", [10])
    with RawClient(broker.port) as c:
        m = member(broker, "g-alter", "so-alter")
        try:
            acquire(m, 10)
            key = next(iter(m.assignment()))
            assert not m.acknowledge({key: [(0, 9, ACCEPT)]})
            assert offsets(describe_offsets(c, "g-alter")) == {("so-alter", 0): (10, 0)}
            r = alter(c, "g-alter", {"so-alter": {0: 3}})
            assert (r.error_code, r.error_message, list(r.responses)) == (
                ErrorCode.NON_EMPTY_GROUP, "The group is not empty.", [])
        finally:
            m.close()
        wait_empty(c, "g-alter")
        epoch = group_epoch(c, "g-alter")
        r = alter(c, "g-alter", {"so-alter": {0: 3, 5: 0}, "so-missing": {0: 1}})
        assert r.error_code == 0
        answer = {(t.topic_name, p.partition_index): (p.error_code, p.error_message)
                  for t in r.responses for p in t.partitions}
        unknown = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        assert answer == {("so-alter", 0): (0, None), ("so-alter", 5): unknown, ("so-missing", 0): unknown}
        assert {t.topic_name: t.topic_id for t in r.responses} == {"so-alter": topic_id(c, "so-alter"),
                                                                    "so-missing": ZERO}
        # The group epoch stays (as Kafka's); the start offset is the new one (nothing complete above it: lag 7).
        assert group_epoch(c, "g-alter") == epoch
        assert offsets(describe_offsets(c, "g-alter")) == {("so-alter", 0): (3, 7)}
        # A new member gets the records from offset 3 again (the leader dropped its old in-memory state).
        m = member(broker, "g-alter", "so-alter")
        try:
            assert acquire(m, 7) == {0: [(3, 9)]}
        finally:
            m.close()
        # Errors: empty group id, another type's group, a group that does not exist yet is created.
        assert alter(c, "", {"so-alter": {0: 0}}).error_code == ErrorCode.INVALID_GROUP_ID
        commit = c.call(OFFSET_COMMIT, 8, {"group_id": "classic-g", "generation_id_or_member_epoch": -1,
                                           "member_id": "", "group_instance_id": None, "topics": [
                                               {"name": "so-alter", "partitions": [
                                                   {"partition_index": 0, "committed_offset": 1,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert commit.topics[0].partitions[0].error_code == 0
        r = alter(c, "classic-g", {"so-alter": {0: 0}})
        assert (r.error_code, r.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group classic-g is not a share group.")
        r = alter(c, "g-new", {"so-alter": {0: 8}})
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
        assert offsets(describe_offsets(c, "g-new")) == {("so-alter", 0): (8, 2)}


def test_delete_offsets_only_on_empty_groups_and_members_start_over(broker_factory):
    broker = broker_factory(FAST)
    setup(broker, "so-del", "g-del", [6])
    create_topic(broker.bootstrap, "so-other", 1)
    with RawClient(broker.port) as c:
        r = delete_offsets(c, "g-del", "so-del")
        assert (r.error_code, r.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g-del not found.")
        m = member(broker, "g-del", "so-del")
        try:
            acquire(m, 6)
            assert not m.acknowledge({next(iter(m.assignment())): [(0, 5, ACCEPT)]})
            r = delete_offsets(c, "g-del", "so-del")
            assert (r.error_code, r.error_message) == (ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        finally:
            m.close()
        wait_empty(c, "g-del")
        tid = topic_id(c, "so-del")
        r = delete_offsets(c, "g-del", "so-del", "so-other", "so-missing")
        assert r.error_code == 0
        assert {t.topic_name: (t.topic_id, t.error_code, t.error_message) for t in r.responses} == {
            "so-del": (tid, 0, None),
            "so-other": (ZERO, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."),
            "so-missing": (ZERO, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           "This server does not host this topic-partition."),
        }
        # The state is gone: no offsets described, the share coordinator has none, the group still exists.
        g = describe_offsets(c, "g-del")
        assert g.error_code == 0 and list(g.topics) == []
        summary = c.call(SUMMARY, 1, {"group_id": "g-del", "topics": [
            {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": -1}]}]})
        assert summary.results[0].partitions[0].start_offset == -1
        assert group_epoch(c, "g-del") > 0
        # Deleting again: nothing left to delete.
        r = delete_offsets(c, "g-del", "so-del")
        assert [(t.error_code, t.error_message) for t in r.responses] == [
            (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")]
        # A new member starts over (share.auto.offset.reset=earliest): every record again.
        m = member(broker, "g-del", "so-del")
        try:
            assert acquire(m, 6) == {0: [(0, 5)]}
        finally:
            m.close()


def test_delete_groups_deletes_share_state_first_and_list_filters_share(broker_factory):
    broker = broker_factory(FAST)
    setup(broker, "so-dg", "g-dg", [4])
    with RawClient(broker.port) as c:
        tid = topic_id(c, "so-dg")
        m = member(broker, "g-dg", "so-dg")
        try:
            acquire(m, 4)
            assert not m.acknowledge({next(iter(m.assignment())): [(0, 1, ACCEPT), (2, 3, RELEASE)]})
            listed = c.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
            assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [("g-dg", "share", "Stable")]
            assert [g.group_id for g in c.call(LIST_GROUPS, 5, {"states_filter": [],
                                                                "types_filter": ["classic"]}).groups] == []
            # A real admin client's ListGroups with the type filter (kafka-python; confluent-kafka 2.16 has no
            # share group type).
            from kafka.admin import KafkaAdminClient

            kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            try:
                assert [g["group_id"] for g in kadmin.list_groups(types_filter=["share"])] == ["g-dg"]
                assert kadmin.list_groups(states_filter=["Stable"], types_filter=["consumer"]) == []
            finally:
                kadmin.close()
            r = c.call(DELETE_GROUPS, 2, {"groups_names": ["g-dg"]})
            assert [(x.group_id, x.error_code) for x in r.results] == [("g-dg", ErrorCode.NON_EMPTY_GROUP)]
        finally:
            m.close()
        wait_empty(c, "g-dg")
        r = c.call(DELETE_GROUPS, 2, {"groups_names": ["g-dg"]})
        assert [(x.group_id, x.error_code) for x in r.results] == [("g-dg", 0)]
        summary = c.call(SUMMARY, 1, {"group_id": "g-dg", "topics": [
            {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": -1}]}]})
        assert summary.results[0].partitions[0].start_offset == -1
        assert (describe_offsets(c, "g-dg").error_code, list(describe_offsets(c, "g-dg").topics)) == (0, [])
        assert list(c.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]}).groups) == []


def test_negative_start_offsets_are_refused_or_read_as_uninitialized(broker_factory):
    """Regression (found by the fuzzer): a negative start offset in the share state made every ShareFetch of the
    share-partition fail with UNKNOWN_SERVER_ERROR (ValueError in the leader). AlterShareGroupOffsets refuses it,
    and so does the share coordinator itself (InitializeShareGroupState below -1); the partition is served."""
    broker = broker_factory(FAST)
    setup(broker, "so-neg", "g-neg", [3])
    with RawClient(broker.port) as c:
        r = alter(c, "g-neg", {"so-neg": {0: -5}})
        assert r.error_code == 0
        assert [(p.error_code, p.error_message) for t in r.responses for p in t.partitions] == [
            (ErrorCode.INVALID_REQUEST, "The start offset must not be negative.")]
        init = c.call(83, 0, {"group_id": "g-neg", "topics": [{"topic_id": topic_id(c, "so-neg"), "partitions": [
            {"partition": 0, "state_epoch": 5, "start_offset": -7}]}]})
        assert (init.results[0].partitions[0].error_code, init.results[0].partitions[0].error_message) == (
            ErrorCode.INVALID_REQUEST, "The start offset must be -1 or non-negative.")
    m = member(broker, "g-neg", "so-neg")
    try:
        # share.auto.offset.reset=earliest resolves it: every record.
        assert acquire(m, 3) == {0: [(0, 2)]}
    finally:
        m.close()
    assert "request handler failed" not in broker.tail(100_000)
