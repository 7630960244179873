"""Share-group membership with confluent_kafka.ShareConsumer (librdkafka, ShareGroupHeartbeat v1) over TCP.

Membership is read back with a raw ShareGroupDescribe (assignment, split, leave, restart). Before a consumer
is closed, one record per partition shows that it applied its assignment (see tests/helpers/share_consumers.py:
librdkafka's close never returns for an assignment still being applied); record delivery
itself is covered by the share-fetch tests.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ShareConsumer

from tests.helpers.bounded_close import close_within
from tests.helpers.confluent_clients import create_topic, produce_all
from tests.helpers.raw_client import RawClient
from tests.helpers.share_consumers import earliest, poll_until_served
from tests.helpers.share_raw import FAST, describe

pytestmark = pytest.mark.integration


def consumer(broker, group: str, topic: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.subscribe([topic])
    return c


def setup(broker, topic: str, group: str, partitions: int) -> None:
    create_topic(broker.bootstrap, topic, partitions=partitions)
    # Records produced before a share-partition's first fetch are delivered too.
    earliest(broker, group)


def one_record_per_partition(broker, topic: str, partitions: int) -> None:
    for p in range(partitions):
        assert len(produce_all(broker.bootstrap, topic, [b"r"], partition=p)) == 1


def members_until(broker, group: str, consumers: list[ShareConsumer], check, timeout: float = 20.0):
    """Poll the consumers (which drives their heartbeats) until `check(members)` holds; returns the members as
    {member id: sorted partitions}."""
    end = time.monotonic() + timeout
    members: dict[str, list[int]] = {}
    with RawClient(broker.port) as raw:
        while True:
            d = describe(raw, group).groups[0]
            if d.error_code == 0:
                members = {m.member_id: sorted(p for t in m.assignment.topic_partitions for p in t.partitions)
                           for m in d.members}
                if check(members):
                    return members
            assert time.monotonic() < end, (d.error_code, members)
            for c in consumers:
                c.poll(0.1)


def test_share_consumer_joins_and_gets_every_partition(broker_factory):
    broker = broker_factory(FAST)
    setup(broker, "scm-one", "scm-g1", 3)
    c = consumer(broker, "scm-g1", "scm-one")
    try:
        members = members_until(broker, "scm-g1", [c], lambda ms: len(ms) == 1 and next(iter(ms.values())) == [0, 1, 2])
        assert len(members) == 1
        one_record_per_partition(broker, "scm-one", 3)
        poll_until_served([c], lambda served: served[0] == {0, 1, 2})
    finally:
        close_within(c)
    # Closing the consumer sends a leave heartbeat: the member is gone at once.
    with RawClient(broker.port) as raw:
        assert describe(raw, "scm-g1").groups[0].members == []


def test_two_share_consumers_split_partitions_and_leave(broker_factory):
    broker = broker_factory(FAST)
    setup(broker, "scm-two", "scm-g2", 4)
    a, b = consumer(broker, "scm-g2", "scm-two"), consumer(broker, "scm-g2", "scm-two")
    try:
        def split(ms):
            parts = [p for ps in ms.values() for p in ps]
            return len(ms) == 2 and sorted(parts) == [0, 1, 2, 3] and all(ms.values())

        members = members_until(broker, "scm-g2", [a, b], split)
        # Each consumer is served exactly the partitions of one member: both applied the split.
        one_record_per_partition(broker, "scm-two", 4)
        want = sorted(sorted(ps) for ps in members.values())
        poll_until_served([a, b], lambda served: sorted(sorted(s) for s in served) == want)
        close_within(b)
        members = members_until(broker, "scm-g2", [a], lambda ms: len(ms) == 1 and next(iter(ms.values())) == [0, 1, 2, 3])
        assert len(members) == 1
        one_record_per_partition(broker, "scm-two", 4)
        poll_until_served([a], lambda served: served[0] == {0, 1, 2, 3})
    finally:
        close_within(a)
        close_within(b)  # a second close() returns at once


def test_share_group_is_replayed_after_restart(broker_factory):
    broker = broker_factory(FAST)
    setup(broker, "scm-restart", "scm-g3", 2)
    c = consumer(broker, "scm-g3", "scm-restart")
    try:
        members_until(broker, "scm-g3", [c], lambda ms: len(ms) == 1 and next(iter(ms.values())) == [0, 1])
        one_record_per_partition(broker, "scm-restart", 2)
        poll_until_served([c], lambda served: served[0] == {0, 1})
        with RawClient(broker.port) as raw:
            before = describe(raw, "scm-g3").groups[0]
    finally:
        close_within(c)
    broker.restart()
    with RawClient(broker.port) as raw:
        after = describe(raw, "scm-g3").groups[0]
    # The member left before the restart; the group, its epochs and the initialized partitions remain.
    assert after.error_code == 0 and after.members == []
    assert after.group_epoch == before.group_epoch + 1
    c = consumer(broker, "scm-g3", "scm-restart")
    try:
        members_until(broker, "scm-g3", [c], lambda ms: len(ms) == 1 and next(iter(ms.values())) == [0, 1])
        one_record_per_partition(broker, "scm-restart", 2)
        poll_until_served([c], lambda served: served[0] == {0, 1})
    finally:
        close_within(c)
