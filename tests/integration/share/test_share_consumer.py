"""Share groups end to end with confluent_kafka.ShareConsumer (librdkafka) over TCP.

Groups are set to share.auto.offset.reset=earliest first (a GROUP config), so records produced before the
consumers' first fetch are delivered too and the tests do not race the share-partition's creation.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import AcknowledgeType

from tests.helpers.raw_client import RawClient
from tests.helpers.share_consumers import consumer, drain, messages, send, setup
from tests.helpers.share_raw import describe
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

Key = tuple[int, int]  # (partition, offset)


def test_implicit_one_consumer_gets_every_record_once(broker):
    produced = setup(broker, "sc-one", "g-one", 3000)
    c = consumer(broker, "g-one", "sc-one")
    seen: list[Key] = []
    t0 = time.monotonic()
    try:
        drain(c, len(produced), 60, seen)
    finally:
        c.close()
    assert len(seen) == len(set(seen)), "a record was delivered twice"
    assert set(seen) == produced
    print(f"1 consumer: {len(seen)} records in {time.monotonic() - t0:.2f} s")


def test_implicit_three_consumers_share_the_records(broker):
    n = 30_000
    setup(broker, "sc-three", "g-three", n, produce=False)
    seen: list[list[Key]] = [[], [], []]
    done = threading.Event()
    consumers = [consumer(broker, "g-three", "sc-three") for _ in range(3)]

    def run(i: int) -> None:
        while not done.is_set():
            seen[i].extend((m.partition(), m.offset()) for m in messages(consumers[i], 0.5))
            if sum(len(s) for s in seen) >= n:
                done.set()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    with RawClient(broker.port) as raw:  # all three join the group before the records arrive
        wait_until(lambda: len(describe(raw, "g-three").groups[0].members) == 3, 30, "the three members")
    t0 = time.monotonic()
    produced = send(broker, "sc-three", n)
    done.wait(120)
    done.set()
    for t in threads:
        t.join(30)
    for c in consumers:
        c.close()
    every = [k for s in seen for k in s]
    dupes = [k for k, cnt in Counter(every).items() if cnt > 1]
    assert not dupes, f"{len(dupes)} records delivered twice, e.g. {dupes[:5]}"
    assert set(every) == produced
    assert sum(1 for s in seen if s) >= 2, [len(s) for s in seen]
    print(f"3 consumers: {[len(s) for s in seen]} records in {time.monotonic() - t0:.2f} s")


def test_explicit_release_redelivers_and_reject_does_not(broker):
    setup(broker, "sc-explicit", "g-explicit", 10, partitions=1)
    c = consumer(broker, "g-explicit", "sc-explicit", "explicit")
    try:
        first: list = []
        end = time.monotonic() + 30
        while len(first) < 10 and time.monotonic() < end:
            for m in messages(c):
                first.append(m)
                # Offsets 0-3 released, 4-5 rejected, the rest accepted.
                kind = (AcknowledgeType.RELEASE if m.offset() < 4 else
                        AcknowledgeType.REJECT if m.offset() < 6 else AcknowledgeType.ACCEPT)
                c.acknowledge(m, kind)
        assert sorted(m.offset() for m in first) == list(range(10))
        assert all(m.delivery_count() == 1 for m in first)
        c.commit_sync()
        again: list = []
        end = time.monotonic() + 20  # inside the 30 s lock, which would bring them back without the release
        while time.monotonic() < end and len(again) < 4:
            for m in messages(c):
                again.append((m.offset(), m.delivery_count()))
                c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
        assert sorted(again) == [(o, 2) for o in range(4)]
        assert messages(c, 2.0) == []  # rejected 4-5 and accepted 6-9 never come back
    finally:
        c.close()


def test_delivery_count_limit_archives(broker_factory):
    broker = broker_factory({"group.share.delivery.count.limit": "2"})
    setup(broker, "sc-limit", "g-limit", 5, partitions=1)
    c = consumer(broker, "g-limit", "sc-limit", "explicit")
    try:
        counts: Counter = Counter()
        end = time.monotonic() + 20
        while time.monotonic() < end:
            for m in messages(c, 0.5):
                counts[m.offset()] += 1
                c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync()
            if counts and all(v >= 2 for v in counts.values()) and len(counts) == 5:
                break
        assert counts == {o: 2 for o in range(5)}
        assert messages(c, 2.0) == []  # archived after the second release
    finally:
        c.close()


LOW_LOCK = {"group.share.record.lock.duration.ms": "1000", "group.share.min.record.lock.duration.ms": "1000"}


def test_lock_expiry_hands_records_to_another_consumer(broker_factory):
    broker = broker_factory(LOW_LOCK)
    setup(broker, "sc-expiry", "g-expiry", 20, partitions=1)
    stuck = consumer(broker, "g-expiry", "sc-expiry", "explicit")
    other = None
    try:
        held: list = []
        end = time.monotonic() + 20
        while not held and time.monotonic() < end:
            held = messages(stuck)
        assert held
        # `stuck` stops polling; after the 1 s lock the records go to `other`.
        other = consumer(broker, "g-expiry", "sc-expiry")
        got: list = []
        end = time.monotonic() + 20
        while len({m.offset() for m in got}) < 20 and time.monotonic() < end:
            got.extend(messages(other))
        offsets = {m.offset() for m in got}
        assert {m.offset() for m in held} <= offsets
        assert any(m.delivery_count() >= 2 for m in got)
    finally:
        stuck.close()
        if other is not None:
            other.close()


def test_close_releases_records_at_once(broker):
    setup(broker, "sc-close", "g-close", 50, partitions=1)
    first = consumer(broker, "g-close", "sc-close", "explicit")
    held: list = []
    end = time.monotonic() + 20
    while not held and time.monotonic() < end:
        held = messages(first)
    assert held
    first.close()  # unacknowledged records are released, not left to the 30 s lock
    second = consumer(broker, "g-close", "sc-close")
    try:
        seen: list[Key] = []
        t0 = time.monotonic()
        drain(second, 50, 20, seen)
        assert {o for _, o in seen} == set(range(50))
        assert time.monotonic() - t0 < 20  # before the 30 s lock (taken before t0 and the close) would free them
    finally:
        second.close()


def test_accepted_records_survive_kill9(broker):
    setup(broker, "sc-crash", "g-crash", 2000, partitions=1)
    c = consumer(broker, "g-crash", "sc-crash", "explicit")
    accepted: list = []
    end = time.monotonic() + 20
    while not accepted and time.monotonic() < end:
        accepted = messages(c)
    for m in accepted:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    c.commit_sync()  # durable on the broker before it answers
    held: list = []
    end = time.monotonic() + 20
    while not held and time.monotonic() < end:
        held = messages(c)  # acquired, never acknowledged
    accepted_offsets = {m.offset() for m in accepted}
    assert accepted_offsets and held
    broker.kill9()
    broker.restart()
    c.close()
    after = consumer(broker, "g-crash", "sc-crash")
    try:
        want = 2000 - len(accepted_offsets)
        seen: list[Key] = []
        drain(after, want, 60, seen)
        offsets = {o for _, o in seen}
        assert not offsets & accepted_offsets, "accepted records came back after kill -9"
        assert offsets == set(range(2000)) - accepted_offsets
        assert {m.offset() for m in held} <= offsets
    finally:
        after.close()
