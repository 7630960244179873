"""Offset retention and empty-group expiry on a real broker with Kafka's shortest retention
(`offsets.retention.minutes=1`): offsets of empty and standalone groups expire and those groups go, offsets a live
group is subscribed to stay, an empty group without offsets goes at the next cleanup, and the tombstones
survive a kill -9."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from tests.helpers.confluent_clients import admin_client, create_topic, produce_batch
from tests.helpers.group_members import Member
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration


def test_offsets_expire_after_retention_and_empty_groups_go(broker_factory):
    broker = broker_factory({"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000"})
    create_topic(broker.bootstrap, "ret", 2)
    create_topic(broker.bootstrap, "ret-empty", 1)
    produced = produce_batch(broker.bootstrap, "ret", 40, "a")
    ends = {p: 1 + max(o for q, o in produced if q == p) for p in (0, 1)}
    admin = admin_client(broker.bootstrap)

    def offsets(group: str) -> dict[int, int]:
        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
        return {tp.partition: tp.offset for tp in listed.result(timeout=30).topic_partitions}

    def groups() -> set[str]:
        return {g.group_id for g in admin.list_consumer_groups().result(timeout=30).valid}

    gone = Member("gone", broker.bootstrap, "g-gone", "ret", "classic")
    live = [Member("live-classic", broker.bootstrap, "g-live-classic", "ret", "classic"),
            Member("live-consumer", broker.bootstrap, "g-live-consumer", "ret", "consumer")]
    never = Member("never", broker.bootstrap, "g-no-offsets", "ret-empty", "consumer")
    for m in (gone, *live, never):
        m.start()
    try:
        wait_until(lambda: all(m.committed() == ends for m in (gone, *live)) and never.assigned, 60,
                   "the groups formed and committed")
        gone.stop()
        never.stop()
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "g-simple", [TopicPartition("ret", 0, 3)])])["g-simple"].result(timeout=30)
        # The empty consumer group without offsets goes at the next cleanup (seconds), the others stay a while.
        wait_until(lambda: "g-no-offsets" not in groups(), 60, "the empty group without offsets to go")
        assert offsets("g-gone") == ends and offsets("g-simple") == {0: 3}
        # A minute after the group emptied (and after the standalone commit), their offsets and the groups go.
        wait_until(lambda: not {"g-gone", "g-simple"} & groups(), 180, "the expired groups to go")
        assert offsets("g-gone") == {} and offsets("g-simple") == {}
        # Live groups keep the offsets of the topic they are subscribed to, however old.
        assert groups() == {"g-live-classic", "g-live-consumer"}
        assert offsets("g-live-classic") == ends and offsets("g-live-consumer") == ends
    finally:
        for m in (gone, *live, never):
            if m.is_alive():
                m.stop()
    broker.kill9()
    broker.start()
    admin = admin_client(broker.bootstrap)
    # The expired groups stay gone (their tombstones were written); the others are empty now and expire in turn.
    assert not {"g-gone", "g-simple", "g-no-offsets"} & groups()
    assert offsets("g-gone") == {} and offsets("g-simple") == {}
