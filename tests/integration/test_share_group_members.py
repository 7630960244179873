"""Share-group membership with confluent_kafka.ShareConsumer (librdkafka, ShareGroupHeartbeat v1) over TCP.

Only membership is checked here (assignment, split, leave, restart), read back with a raw ShareGroupDescribe;
record delivery is covered by the share-fetch tests.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ShareConsumer

from tests.integration.raw_client import RawClient
from tests.integration.test_confluent_roundtrip import create_topic
from tests.integration.test_share_groups_raw import FAST, describe

pytestmark = pytest.mark.integration


def consumer(broker, group: str, topic: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.subscribe([topic])
    return c


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
    create_topic(broker.bootstrap, "scm-one", partitions=3)
    c = consumer(broker, "scm-g1", "scm-one")
    try:
        members = members_until(broker, "scm-g1", [c], lambda ms: len(ms) == 1 and next(iter(ms.values())) == [0, 1, 2])
        assert len(members) == 1
    finally:
        c.close()
    # Closing the consumer sends a leave heartbeat: the member is gone at once.
    with RawClient(broker.port) as raw:
        assert describe(raw, "scm-g1").groups[0].members == []


def test_two_share_consumers_split_partitions_and_leave(broker_factory):
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "scm-two", partitions=4)
    a, b = consumer(broker, "scm-g2", "scm-two"), consumer(broker, "scm-g2", "scm-two")
    try:
        def split(ms):
            parts = [p for ps in ms.values() for p in ps]
            return len(ms) == 2 and sorted(parts) == [0, 1, 2, 3] and all(ms.values())

        members_until(broker, "scm-g2", [a, b], split)
        b.close()
        members = members_until(broker, "scm-g2", [a], lambda ms: len(ms) == 1 and next(iter(ms.values())) == [0, 1, 2, 3])
        assert len(members) == 1
    finally:
        a.close()


def test_share_group_is_replayed_after_restart(broker_factory):
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "scm-restart", partitions=2)
    c = consumer(broker, "scm-g3", "scm-restart")
    try:
        members_until(broker, "scm-g3", [c], lambda ms: len(ms) == 1 and next(iter(ms.values())) == [0, 1])
        with RawClient(broker.port) as raw:
            before = describe(raw, "scm-g3").groups[0]
    finally:
        c.close()
    broker.restart()
    with RawClient(broker.port) as raw:
        after = describe(raw, "scm-g3").groups[0]
    # The member left before the restart; the group, its epochs and the initialized partitions remain.
    assert after.error_code == 0 and after.members == []
    assert after.group_epoch == before.group_epoch + 1
    c = consumer(broker, "scm-g3", "scm-restart")
    try:
        members_until(broker, "scm-g3", [c], lambda ms: len(ms) == 1 and next(iter(ms.values())) == [0, 1])
    finally:
        c.close()
