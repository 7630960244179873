"""Group administration with real admin clients: confluent-kafka AdminClient (list, describe, delete groups;
list and alter consumer group offsets) and kafka-python's KafkaAdminClient (delete group offsets)."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.helpers.confluent_clients import admin_client, create_topic, produce_batch
from tests.helpers.group_members import Member
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration


def offsets_of(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def test_list_describe_delete_groups_and_alter_offsets(broker):
    create_topic(broker.bootstrap, "adm", 3)
    produced = produce_batch(broker.bootstrap, "adm", 90, "a")
    admin = admin_client(broker.bootstrap)
    member = Member("adm-m", broker.bootstrap, "adm-live", "adm", "classic")
    member.start()
    try:
        counts = {p: 0 for p in range(3)}
        for p, _ in produced:
            counts[p] += 1
        wait_until(lambda: member.committed() == counts, 60, "everything consumed and committed")
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=30).valid}
        assert listed["adm-live"].state == ConsumerGroupState.STABLE
        described = admin.describe_consumer_groups(["adm-live"])["adm-live"].result(timeout=30)
        assert described.state == ConsumerGroupState.STABLE and described.partition_assignor == "range"
        [m] = described.members
        assert m.client_id == "adm-m" and m.host == "/127.0.0.1"
        assert sorted(tp.partition for tp in m.assignment.topic_partitions) == [0, 1, 2]
        assert offsets_of(admin, "adm-live") == {("adm", p): n for p, n in counts.items()}
        # A live group cannot be deleted, nor its offsets changed by a non-member.
        with pytest.raises(KafkaException) as err:
            admin.delete_consumer_groups(["adm-live"])["adm-live"].result(timeout=30)
        assert err.value.args[0].name() == "NON_EMPTY_GROUP"
        refused = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "adm-live", [TopicPartition("adm", 0, 1)])])["adm-live"].result(timeout=30)
        assert [tp.error.name() for tp in refused.topic_partitions] == ["UNKNOWN_MEMBER_ID"]
    finally:
        member.stop()
    # Empty now: offsets can be altered, deleted and the group deleted.
    assert admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(timeout=30).valid[0].group_id == \
        "adm-live"
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "adm-live", [TopicPartition("adm", 0, 1)])])["adm-live"].result(timeout=30)
    assert offsets_of(admin, "adm-live")[("adm", 0)] == 1

    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        deleted = kadmin.delete_group_offsets("adm-live", [KTP("adm", 0)])
        assert [err.errno for err in deleted.values()] == [0]
        listed = kadmin.list_groups(states_filter=["Empty"], types_filter=["classic"])
        assert [g["group_id"] for g in listed] == ["adm-live"], listed
    finally:
        kadmin.close()
    assert ("adm", 0) not in offsets_of(admin, "adm-live")

    # A standalone commit creates a group without protocol (Kafka's "simple" group).
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "adm-simple", [TopicPartition("adm", 2, 5)])])["adm-simple"].result(timeout=30)
    groups = {g.group_id for g in admin.list_consumer_groups().result(timeout=30).valid}
    assert groups == {"adm-live", "adm-simple"}
    results = admin.delete_consumer_groups(["adm-live", "adm-simple", "adm-absent"])
    results["adm-live"].result(timeout=30)
    results["adm-simple"].result(timeout=30)
    with pytest.raises(KafkaException) as err:
        results["adm-absent"].result(timeout=30)
    assert err.value.args[0].name() == "GROUP_ID_NOT_FOUND"
    assert admin.list_consumer_groups().result(timeout=30).valid == []
    assert offsets_of(admin, "adm-live") == {}


def test_delete_share_group_deletes_its_share_state(broker):
    from tests.helpers.share_consumers import consumer, drain, earliest, setup

    produced = setup(broker, "adm-share", "adm-sg", 200)
    admin = admin_client(broker.bootstrap)
    c = consumer(broker, "adm-sg", "adm-share")
    seen: list = []
    try:
        drain(c, len(produced), 60, seen)
        assert set(seen) == produced
        # A share group with members is not deleted.
        with pytest.raises(KafkaException) as err:
            admin.delete_consumer_groups(["adm-sg"])["adm-sg"].result(timeout=30)
        assert err.value.args[0].name() == "NON_EMPTY_GROUP"
    finally:
        c.close()
    wait_until(lambda: _share_state(broker, "adm-sg") == "Empty", 30, "the share group to be empty")
    admin.delete_consumer_groups(["adm-sg"])["adm-sg"].result(timeout=30)
    assert _share_state(broker, "adm-sg") is None
    # Its share-partitions start over: a new group of the same name gets every record again.
    earliest(broker, "adm-sg")
    again = consumer(broker, "adm-sg", "adm-share")
    seen = []
    try:
        drain(again, len(produced), 60, seen)
    finally:
        again.close()
    assert set(seen) == produced


def _share_state(broker, group: str) -> str | None:
    from tests.helpers.raw_client import RawClient

    with RawClient(broker.port) as c:
        listed = c.call(16, 5, {"states_filter": [], "types_filter": ["share"]})
    return next((g.group_state for g in listed.groups if g.group_id == group), None)


def test_admin_client_on_consumer_protocol_and_classic_groups_side_by_side(broker):
    """A KIP-848 consumer group and a classic group, live at the same time: listed with state and type filters,
    described (ConsumerGroupDescribe for the one, DescribeGroups for the other), protected while they have members,
    then their offsets altered and deleted, and the groups deleted."""
    from confluent_kafka import ConsumerGroupType

    create_topic(broker.bootstrap, "adm2", 4)
    produced = produce_batch(broker.bootstrap, "adm2", 200, "a")
    counts = {p: sum(1 for q, _ in produced if q == p) for p in range(4)}
    admin = admin_client(broker.bootstrap)
    new = [Member(f"new-{i}", broker.bootstrap, "g-consumer", "adm2", "consumer") for i in range(2)]
    old = Member("old-0", broker.bootstrap, "g-classic", "adm2", "classic")
    members = [*new, old]
    for m in members:
        m.start()
    try:
        def committed(ms: list[Member]) -> dict[int, int]:
            return {p: o for m in ms for p, o in m.committed().items()}

        wait_until(lambda: committed(new) == counts and committed([old]) == counts
                   and sorted(p for m in new for p in m.assigned) == [0, 1, 2, 3]
                   and all(len(m.assigned) == 2 for m in new), 60, "both groups consumed and committed everything")

        def listed(**filters) -> dict[str, tuple]:
            result = admin.list_consumer_groups(**filters).result(timeout=30)
            assert not result.errors
            return {g.group_id: (g.type, g.state) for g in result.valid}

        consumer_type, classic_type = ConsumerGroupType.CONSUMER, ConsumerGroupType.CLASSIC
        stable = ConsumerGroupState.STABLE
        assert listed() == {"g-consumer": (consumer_type, stable), "g-classic": (classic_type, stable)}
        assert listed(types={consumer_type}) == {"g-consumer": (consumer_type, stable)}
        assert listed(types={classic_type}) == {"g-classic": (classic_type, stable)}
        assert listed(states={ConsumerGroupState.EMPTY}) == {}
        assert listed(states={stable}, types={consumer_type}) == {"g-consumer": (consumer_type, stable)}

        described = admin.describe_consumer_groups(["g-consumer", "g-classic"], include_authorized_operations=True)
        cg = described["g-consumer"].result(timeout=30)
        assert cg.type == consumer_type and cg.state == stable and cg.partition_assignor == "uniform"
        assert not cg.is_simple_consumer_group
        assert {m.client_id for m in cg.members} == {"new-0", "new-1"}
        for m in cg.members:
            mine = sorted(tp.partition for tp in m.assignment.topic_partitions)
            assert len(mine) == 2 and {tp.topic for tp in m.assignment.topic_partitions} == {"adm2"}
            assert sorted(tp.partition for tp in m.target_assignment.topic_partitions) == mine
            assert m.host.endswith("127.0.0.1")
        assert sorted(p for m in cg.members for p in (tp.partition for tp in m.assignment.topic_partitions)) == \
            [0, 1, 2, 3]
        assert cg.authorized_operations  # no authorizer: every group operation
        classic = described["g-classic"].result(timeout=30)
        assert classic.type == classic_type and classic.state == stable and classic.partition_assignor == "range"
        assert [m.client_id for m in classic.members] == ["old-0"]

        # Groups with members are not deleted; their offsets are changed only by members.
        for gid in ("g-consumer", "g-classic"):
            with pytest.raises(KafkaException) as err:
                admin.delete_consumer_groups([gid])[gid].result(timeout=30)
            assert err.value.args[0].name() == "NON_EMPTY_GROUP"
            refused = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                gid, [TopicPartition("adm2", 0, 1)])])[gid].result(timeout=30)
            assert [tp.error.name() for tp in refused.topic_partitions] == ["UNKNOWN_MEMBER_ID"]
            assert offsets_of(admin, gid) == {("adm2", p): n for p, n in counts.items()}
        from kafka import TopicPartition as KTP
        from kafka.admin import KafkaAdminClient
        from kafka.errors import GroupSubscribedToTopicError
        kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            refused = kadmin.delete_group_offsets("g-consumer", [KTP("adm2", 1)])
            assert list(refused.values()) == [GroupSubscribedToTopicError]
        finally:
            kadmin.close()
    finally:
        for m in members:
            m.stop()

    assert listed(states={ConsumerGroupState.EMPTY}) == {"g-consumer": (consumer_type, ConsumerGroupState.EMPTY),
                                                         "g-classic": (classic_type, ConsumerGroupState.EMPTY)}
    empty = admin.describe_consumer_groups(["g-consumer"])["g-consumer"].result(timeout=30)
    assert empty.type == consumer_type and empty.state == ConsumerGroupState.EMPTY and empty.members == []
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "g-consumer", [TopicPartition("adm2", 0, 1)])])["g-consumer"].result(timeout=30)
    assert offsets_of(admin, "g-consumer")[("adm2", 0)] == 1
    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        deleted = kadmin.delete_group_offsets("g-consumer", [KTP("adm2", 1)])
        assert [e.errno for e in deleted.values()] == [0]
    finally:
        kadmin.close()
    assert set(offsets_of(admin, "g-consumer")) == {("adm2", 0), ("adm2", 2), ("adm2", 3)}
    results = admin.delete_consumer_groups(["g-consumer", "g-classic"])
    for gid in ("g-consumer", "g-classic"):
        results[gid].result(timeout=30)
    assert listed() == {}
    assert offsets_of(admin, "g-consumer") == {}
