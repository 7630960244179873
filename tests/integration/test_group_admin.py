"""Group administration with real admin clients: confluent-kafka AdminClient (list, describe, delete groups;
list and alter consumer group offsets) and kafka-python's KafkaAdminClient (delete group offsets)."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.group_members import Member, wait_until
from tests.integration.test_confluent_roundtrip import create_topic
from tests.integration.test_consumer_groups import produce_batch

pytestmark = pytest.mark.integration


def offsets_of(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def test_list_describe_delete_groups_and_alter_offsets(broker):
    create_topic(broker.bootstrap, "adm", 3)
    produced = produce_batch(broker.bootstrap, "adm", 90, "a")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
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
    from tests.integration.test_share_consumer import consumer, drain, earliest, setup

    produced = setup(broker, "adm-share", "adm-sg", 200)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
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
    from tests.integration.raw_client import RawClient

    with RawClient(broker.port) as c:
        listed = c.call(16, 5, {"states_filter": [], "types_filter": ["share"]})
    return next((g.group_state for g in listed.groups if g.group_id == group), None)
