"""Share-group offsets administration in the group coordinator, sans-IO: alter/delete plans, their records
(replay rebuilds the same state), errors, and that empty share groups never expire (as Kafka's
ShareGroup.shouldExpire() is false)."""

from __future__ import annotations

import pytest

from broker.groups.coordinator import GroupCoordinator
from broker.groups.share.group import ShareGroup
from broker.groups.share.offsets_admin import AdminError
from protocol.errors import ErrorCode
from tests.unit.groups.share_helpers import Topics, complete_init, hb, make


def joined_and_left(svc, topics: Topics):
    tid = topics.create("t", 2)
    res = hb(svc, "g", "m", 0, ["t"])
    complete_init(svc, res)
    hb(svc, "g", "m", res.response["member_epoch"])
    hb(svc, "g", "m", -1)
    return tid


def replayed(svc, records, topics: Topics):
    fresh = make(topics)
    for r in records:
        fresh.replay(r.key, r.value)
    return fresh


def test_alter_keeps_the_epoch_and_moves_partitions_to_initializing_then_initialized() -> None:
    topics = Topics()
    svc = make(topics)
    log: list = []
    tid = topics.create("t", 2)
    res = hb(svc, "g", "m", 0, ["t"])
    log += res.records + complete_init(svc, res)
    with pytest.raises(AdminError) as err:
        svc.offsets_admin.alter_offsets("g", [("t", [(0, 5)])])
    assert err.value.code == ErrorCode.NON_EMPTY_GROUP
    log += hb(svc, "g", "m", -1).records
    epoch = svc.groups["g"].group_epoch
    plan = svc.offsets_admin.alter_offsets("g", [("t", [(0, 5), (7, 1), (1, -2)]), ("nope", [(0, 1)])])
    log += plan.records
    assert plan.state_epoch == epoch == svc.groups["g"].group_epoch  # Kafka does not move it
    assert plan.start_offsets == {tid: {0: 5}}
    assert [(t["topic_name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]]) for t in plan.topics] \
        == [("t", [(0, 0), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (1, ErrorCode.INVALID_REQUEST)]),
            ("nope", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]
    md = svc.groups["g"].partition_metadata
    assert md.initializing[tid].partitions == {0} and md.initialized[tid].partitions == {1}
    log += svc.initialized("g", tid, [0])
    md = svc.groups["g"].partition_metadata
    assert md.initialized[tid].partitions == {0, 1} and not md.initializing
    assert replayed(svc, log, topics).snapshot() == svc.snapshot()


def test_alter_creates_a_missing_group_and_refuses_other_group_types() -> None:
    topics = Topics()
    tid = topics.create("t", 1)
    svc = make(topics)
    plan = svc.offsets_admin.alter_offsets("new", [("t", [(0, 3)])])
    assert svc.groups["new"].group_epoch == 1 and plan.start_offsets == {tid: {0: 3}}
    assert replayed(svc, plan.records, topics).snapshot() == svc.snapshot()
    # Nothing valid to alter: no group is created.
    assert svc.offsets_admin.alter_offsets("other", [("missing", [(0, 1)])]).records == []
    assert "other" not in svc.groups

    groups = GroupCoordinator(topic_info=topics.get)
    groups.consumer.groups["cg"] = object()  # any consumer group under that id
    with pytest.raises(AdminError) as err:
        groups.share.offsets_admin.alter_offsets("cg", [("t", [(0, 1)])])
    assert (err.value.code, err.value.message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")


def test_delete_offsets_moves_topics_through_deleting() -> None:
    topics = Topics()
    svc = make(topics)
    tid = joined_and_left(svc, topics)
    topics.create("other", 1)
    with pytest.raises(AdminError) as err:
        svc.offsets_admin.delete_offsets("absent", ["t"])
    assert err.value.code == ErrorCode.GROUP_ID_NOT_FOUND
    plan = svc.offsets_admin.delete_offsets("g", ["t", "other", "missing"])
    assert plan.delete == {tid: ("t", frozenset({0, 1}))}
    assert [(t["topic_name"], t["error_message"]) for t in plan.refused] == [
        ("other", "There is no offset information to delete."),
        ("missing", "This server does not host this topic-partition.")]
    md = svc.groups["g"].partition_metadata
    assert tid not in md.initialized and md.deleting == {tid: "t"}
    # Interrupted before completion: the next delete retries every partition of the topic.
    again = svc.offsets_admin.delete_offsets("g", ["t"])
    assert again.delete == {tid: ("t", frozenset({0, 1}))}
    done, records = svc.offsets_admin.delete_offsets_done("g", {tid: "t"})
    assert done == [{"topic_name": "t", "topic_id": tid, "error_code": 0, "error_message": None}]
    assert svc.groups["g"].partition_metadata.deleting == {}
    assert svc.offsets_admin.initialized_share_partitions("g") == {}


def test_empty_share_groups_never_expire() -> None:
    """Kafka keeps an empty share group until it is deleted (ShareGroup.shouldExpire() is false): the periodic
    cleanup that expires classic and consumer groups leaves it alone."""
    topics = Topics()
    groups = GroupCoordinator(topic_info=topics.get)
    joined_and_left(groups.share, topics)
    assert groups.share.groups["g"].members == {}
    far = 10 * 365 * 24 * 3600 * 1000
    res = groups.cleanup(far)
    assert res.records == [] and "g" in groups.share.groups
    assert [g["group_id"] for g in groups.list_groups(types=["share"])] == ["g"]


def test_delete_groups_plan_includes_an_unfinished_offsets_deletion() -> None:
    topics = Topics()
    groups = GroupCoordinator(topic_info=topics.get)
    tid = joined_and_left(groups.share, topics)
    other = topics.create("u", 3)
    plan = groups.share.offsets_admin.alter_offsets("g", [("u", [(1, 0)])])
    groups.share.initialized("g", other, [1])
    assert plan.start_offsets == {other: {1: 0}}
    groups.share.offsets_admin.delete_offsets("g", ["t"])  # state deletion interrupted: "t" stays in Deleting
    delete = groups.plan_delete_groups(["g"])
    assert delete.deletable == ["g"]
    assert delete.share_partitions["g"] == {tid: frozenset({0, 1}), other: frozenset({1})}


def test_group_deletion_moves_every_topic_to_deleting_first() -> None:
    topics = Topics()
    svc = make(topics)
    tid = joined_and_left(svc, topics)
    log = svc.offsets_admin.begin_group_deletion("g")
    md = svc.groups["g"].partition_metadata
    assert (md.initialized, md.initializing, md.deleting) == ({}, {}, {tid: "t"})
    fresh = make(topics)
    fresh.groups["g"] = ShareGroup("g")
    for r in log:
        fresh.replay(r.key, r.value)
    assert fresh.groups["g"].partition_metadata.deleting == {tid: "t"}
    assert svc.offsets_admin.begin_group_deletion("g") == []  # nothing initialized any more
    hb(svc, "g", "m2", 0, ["t"])
    with pytest.raises(AdminError) as err:
        svc.offsets_admin.begin_group_deletion("g")
    assert err.value.code == ErrorCode.NON_EMPTY_GROUP
