"""Differential: confluent-kafka's ShareConsumer against Kafka 4.4 and Shoal, what each poll returns.

The two first-poll cases of the issue: two share consumers of a new group subscribing together to a 4-partition
topic of 400 records (each is assigned two partitions, on its heartbeat after the share-partitions are
initialized, and gets each partition's records in one piece), and one share consumer of a 2-partition topic of 50
records per partition (the first poll returns one partition's 50, the next the other's). Polls are compared by
shape (how many partitions and records each returned): which partition comes first, and which consumer gets
which partitions, depend on member ids and Kafka's hash orders. The groups' share.heartbeat.interval.ms is 1 s
(librdkafka asks for the assignment again only at that interval).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from confluent_kafka import ShareConsumer

from shoal_client import ACCEPT, RELEASE, RENEW, ShareGroupMember
from tests.helpers.differential import Target, assert_same
from tests.helpers.share_differential import make_topic, share_group

pytestmark = pytest.mark.integration


def _consumer(target: Target, group: str, topic: str, mode: str = "implicit") -> ShareConsumer:
    c = ShareConsumer({**target.client_config(), "group.id": group, "share.acknowledgement.mode": mode,
                       "log_level": 3})
    c.subscribe([topic])
    return c


def _polls(consumers: Sequence[ShareConsumer], total: int, timeout: float = 60.0,
           explicit: bool = False) -> list[list[list[int]]]:
    """Poll the consumers in turn until `total` records came (acknowledging each one in explicit mode); per
    consumer, the record count per partition of each poll that returned records, sorted."""
    seen: list[list[list[int]]] = [[] for _ in consumers]
    got = 0
    end = time.monotonic() + timeout
    while got < total:
        assert time.monotonic() < end, (got, seen)
        for i, c in enumerate(consumers):
            counts: dict[int, int] = {}
            for m in c.poll(0.5):
                assert m.error() is None, m.error()
                counts[m.partition()] = counts.get(m.partition(), 0) + 1
                if explicit:
                    c.acknowledge(m)
            if counts:
                seen[i].append(sorted(counts.values()))
                got += sum(counts.values())
    return seen


def _close(consumers: Sequence[ShareConsumer]) -> None:
    for c in consumers:
        c.close()


def test_two_consumers_of_a_new_group_split_a_four_partition_topic(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "sc-four", [[100]] * 4)
            group = share_group(target, raw, "sc-four", **{"share.heartbeat.interval.ms": "1000",
                                                           "share.assignment.interval.ms": "1000"})
        consumers = [_consumer(target, group, topic) for _ in range(2)]
        try:
            per_consumer = _polls(consumers, 400)
        finally:
            _close(consumers)
        # How many of its partitions' fetches librdkafka hands out in one poll depends on timing on both brokers
        # (on a loaded machine Kafka's consumer once returned two partitions in one poll): compared are each
        # consumer's partitions and their record counts, each partition's records coming in one piece.
        return sorted(sorted(count for poll in polls for count in poll) for polls in per_consumer)

    seen = pair.run(scenario)
    assert_same(seen, "two share consumers' partitions of a new 4-partition topic")
    assert seen["shoal"] == [[100, 100], [100, 100]]


def test_one_consumer_of_a_two_partition_topic(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "sc-two", [[50], [50]])
            group = share_group(target, raw, "sc-two", **{"share.heartbeat.interval.ms": "1000"})
        consumers = [_consumer(target, group, topic, "explicit")]
        try:
            polls = _polls(consumers, 100, explicit=True)
        finally:
            _close(consumers)
        return polls

    seen = pair.run(scenario)
    assert_same(seen, "one share consumer's polls of a 2-partition topic")
    assert seen["shoal"] == [[[50], [50]]]


def test_shoal_client_member(pair):
    """Shoal's own share member (shoal_client) against both brokers: join, fetch everything (records of a
    share-partition come with its first fetch), release some, accept the rest, renew, close."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "sc-client", [[4, 4], [3]])
            group = share_group(target, raw, "sc-client", **{"share.heartbeat.interval.ms": "1000"})
        member = ShareGroupMember(target.bootstrap, group, [topic], member_id=target.unique("m"))
        out: dict = {}
        try:
            member.start()
            assert member.wait_for_assignment(30)
            got: dict[int, list] = {}
            end = time.monotonic() + 30
            while sum(a[1] - a[0] + 1 for ranges in got.values() for a in ranges) < 11:
                assert time.monotonic() < end, got
                for a in member.fetch(max_records=100, max_bytes=1 << 20, max_wait_ms=500).acquired:
                    got.setdefault(a.partition, []).extend(a.ranges)
            out["acquired"] = {str(p): sorted(r) for p, r in sorted(got.items())}
            releases = {a: [(0, 1, RELEASE)] for a in member.assignment() if a.partition == 0}
            out["release"] = {str(k.partition): v for k, v in member.acknowledge(releases).items()}
            again = member.fetch(max_records=100, max_bytes=1 << 20, max_wait_ms=1000)
            out["again"] = sorted((a.partition, a.ranges) for a in again.acquired)
            out["renew"] = {str(k.partition): v for k, v in member.acknowledge(
                {a.key: [(0, 1, RENEW)] for a in again.acquired}, renew=True).items()}
            accept = {}
            for p, ranges in got.items():
                key = next(a for a in member.assignment() if a.partition == p)
                accept[key] = [(f, last, ACCEPT) for f, last, _ in sorted(ranges) if not (p == 0 and f == 0)]
            accept[next(a for a in member.assignment() if a.partition == 0)].insert(0, (0, 1, ACCEPT))
            out["accept"] = {str(k.partition): v for k, v in member.acknowledge(accept).items()}
            out["left"] = member.fetch(max_records=100, max_bytes=1 << 20, max_wait_ms=300).count
        finally:
            out["close"] = {str(k.partition): v for k, v in member.close().items()}
        return out

    assert_same(pair.run(scenario), "shoal_client's share member")


def test_one_consumer_with_max_poll_records_below_what_is_there(pair):
    """max.poll.records=50 (MaxRecords 50) over two partitions of two batches of 50 records: what each poll
    returns."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "sc-rot", [[50, 50], [50, 50]])
            group = share_group(target, raw, "sc-rot", **{"share.heartbeat.interval.ms": "1000"})
        c = ShareConsumer({**target.client_config(), "group.id": group, "share.acknowledgement.mode": "explicit",
                           "max.poll.records": 50, "log_level": 3})
        c.subscribe([topic])
        polls: list = []
        try:
            end = time.monotonic() + 60
            while sum(n for _, n in polls) < 200:
                assert time.monotonic() < end, polls
                msgs = [m for m in c.poll(0.5) if m.error() is None]
                if msgs:
                    polls.append((sorted({m.partition() for m in msgs}), len(msgs)))
                    for m in msgs:
                        c.acknowledge(m)
        finally:
            c.close()
        # Which partition each poll serves depends on when Kafka finishes loading the second share-partition (the
        # first fetches serve the one loaded first): compare the polls' sizes and what each partition gave.
        per_partition: dict[int, int] = {}
        for ps, n in polls:
            for p in ps:
                per_partition[p] = per_partition.get(p, 0) + n // len(ps)
        return {"polls": [(len(p), n) for p, n in polls], "per_partition": sorted(per_partition.values())}

    assert_same(pair.run(scenario), "polls of 50 over two partitions")
