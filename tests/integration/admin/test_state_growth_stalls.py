"""A campaign that grows what clients control (a consumer group of 300 members on a 1 000-partition topic, a
200-member share group, 500 topics, 500 more groups, a group with 1 000 committed offsets) and then asks for all of
it (group describes with repeated and with 20 000 distinct ids, ListGroups, OffsetFetch of every group, Metadata of
every topic, DescribeConfigs, ListOffsets and DescribeProducers of every partition, DescribeTopicPartitions), while
another connection sends ApiVersions every few milliseconds. No ping waits while the broker's loop thread runs for
100 ms. Before the fix the same campaign made a ping wait on 1.9 s of the loop's CPU (6.6 s round trip; 45 loop
wake-ups late by more than 100 ms); after it, 55-59 ms on a machine at load 8 (docs/internals.md, "Work that grows
with client state")."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.helpers.loop_probe import PingProbe, lag_histogram, lags_over
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import create_topic

pytestmark = pytest.mark.integration

METADATA, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS = 3, 2, 8, 9, 15, 16
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, DESCRIBE_PRODUCERS = 19, 20, 32, 61
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
DESCRIBE_TOPIC_PARTITIONS, SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 75, 76, 77

WIDE_PARTITIONS = 1_000
BIG_GROUP_MEMBERS = 300
SHARE_MEMBERS = 200  # group.share.max.size
SMALL_GROUPS = 500
TOPICS = 500  # of 4 partitions each
DISTINCT_IDS = 20_000  # unknown group ids asked for in one request
STALL_S = 0.1  # the bound: no event-loop wake-up later than this (a histogram bucket of the watchdog)
# The other client's round trip, measured in a thread of this (busy) test process on a two-core machine shared
# with the broker, less the time the broker's loop thread and that thread waited for a CPU meanwhile (on CI a
# whole round trip reached 686 ms with 54 ms of loop CPU in it). What is left is the loop's own work plus anything
# that blocked it without running; the seconds-long stalls this test guards against are far above it.
MAX_UNQUEUED_PING_MS = 500

# Members stay for the whole campaign (one heartbeat each): sessions longer than it.
OVERRIDES = {"metrics.prometheus.listener": "127.0.0.1:0",
             "group.consumer.session.timeout.ms": "600000", "group.consumer.max.session.timeout.ms": "600000",
             "group.share.session.timeout.ms": "600000", "group.share.max.session.timeout.ms": "600000",
             "shoal.loop.lag.warn.ms": "100"}


def _join(c: RawClient, group: str, topic: str) -> None:
    r = c.call(CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0, "rebalance_timeout_ms": 60_000,
        "subscribed_topic_names": [topic], "topic_partitions": []})
    assert r.error_code == 0, r


def _grow(c: RawClient, marks: list[tuple[str, float]]) -> None:
    create_topic(c, "wide", WIDE_PARTITIONS)
    for _ in range(BIG_GROUP_MEMBERS):
        _join(c, "big", "wide")
    marks.append(("big group", time.monotonic()))
    for _ in range(SHARE_MEMBERS):
        r = c.call(SHARE_GROUP_HEARTBEAT, 1, {"group_id": "shared", "member_id": str(uuid.uuid4()),
                                              "member_epoch": 0, "subscribed_topic_names": ["wide"]})
        assert r.error_code == 0, r
    marks.append(("share group", time.monotonic()))
    for first in range(0, TOPICS, 100):
        r = c.call(CREATE_TOPICS, 7, {"topics": [
            {"name": f"t-{j}", "num_partitions": 4, "replication_factor": 1, "assignments": [], "configs": []}
            for j in range(first, first + 100)], "timeout_ms": 60_000, "validate_only": False})
        assert {t.error_code for t in r.topics} == {0}
    marks.append(("topics", time.monotonic()))
    for i in range(SMALL_GROUPS):
        _join(c, f"small-{i}", f"t-{i % TOPICS}")
    marks.append(("small groups", time.monotonic()))
    r = c.call(OFFSET_COMMIT, 8, {"group_id": "committed", "generation_id_or_member_epoch": -1, "member_id": "",
                                  "group_instance_id": None, "topics": [
                                      {"name": "wide", "partitions": [
                                          {"partition_index": p, "committed_offset": 0, "committed_leader_epoch": -1,
                                           "committed_metadata": ""} for p in range(WIDE_PARTITIONS)]}]})
    assert {p.error_code for t in r.topics for p in t.partitions} == {0}


def _ask(c: RawClient, marks: list[tuple[str, float]]) -> None:
    small = [f"small-{i}" for i in range(SMALL_GROUPS)]
    topics = [f"t-{j}" for j in range(TOPICS)]
    call = c.call

    def marked(api_key: int, version: int, body: dict):
        marks.append((f"api {api_key}", time.monotonic()))
        return call(api_key, version, body)

    c.call = marked  # type: ignore[method-assign]
    r = c.call(CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["big"] * 20, "include_authorized_operations": True})
    assert len(r.groups) == 20 and {len(g.members) for g in r.groups} == {BIG_GROUP_MEMBERS}
    assert sum(len(tp.partitions) for m in r.groups[0].members for tp in m.target_assignment.topic_partitions) \
        == WIDE_PARTITIONS
    r = c.call(CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": small, "include_authorized_operations": False})
    assert [g.group_id for g in r.groups] == small and {len(g.members) for g in r.groups} == {1}
    r = c.call(SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["shared"] * 20, "include_authorized_operations": False})
    assert {len(g.members) for g in r.groups} == {SHARE_MEMBERS}
    r = c.call(DESCRIBE_GROUPS, 5, {"groups": small * 10, "include_authorized_operations": False})
    assert len(r.groups) == 10 * SMALL_GROUPS
    # Many distinct ids in one request: the broker's work stays linear in them.
    unknown = [f"nobody-{i}" for i in range(DISTINCT_IDS)]
    for api_key, version, field in ((CONSUMER_GROUP_DESCRIBE, 1, "group_ids"), (SHARE_GROUP_DESCRIBE, 1, "group_ids"),
                                    (DESCRIBE_GROUPS, 5, "groups")):
        r = c.call(api_key, version, {field: unknown, "include_authorized_operations": False})
        assert [g.group_id for g in r.groups] == unknown
    r = c.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert len(r.groups) == SMALL_GROUPS + 3  # big, shared, committed
    r = c.call(OFFSET_FETCH, 9, {"groups": [{"group_id": g, "member_id": None, "member_epoch": -1, "topics": None}
                                            for g in ["committed"] * 20 + small], "require_stable": False})
    assert sum(len(p.partitions) for p in r.groups[0].topics) == WIDE_PARTITIONS
    r = c.call(METADATA, 12, {"topics": None})
    assert len(r.topics) >= TOPICS + 1
    r = c.call(DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": n} for n in topics], "response_partition_limit": 2000,
                                              "cursor": None})
    assert sum(len(t.partitions) for t in r.topics) == 2000
    r = c.call(DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": 2, "resource_name": n, "configuration_keys": None}
                                                   for n in topics], "include_synonyms": True,
                                     "include_documentation": True})
    assert {x.error_code for x in r.results} == {0}
    partitions = [{"name": n, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                             for p in range(4)]} for n in topics]
    r = c.call(LIST_OFFSETS, 8, {"replica_id": -1, "isolation_level": 1, "topics": partitions})
    assert {p.error_code for t in r.topics for p in t.partitions} == {0}
    r = c.call(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": n, "partition_indexes": [0, 1, 2, 3]} for n in topics]})
    assert {p.error_code for t in r.topics for p in t.partitions} == {0}


def test_growing_state_and_asking_for_it_never_stalls_the_loop(broker_factory) -> None:
    broker = broker_factory(OVERRIDES)
    metrics_port = broker.ports["prometheus"]
    with RawClient(broker.port, "campaign") as c, PingProbe(broker.port, pid=broker.pid) as probe:
        started = time.monotonic()
        marks: list[tuple[str, float]] = []
        _grow(c, marks)
        grown = time.monotonic()
        _ask(c, marks)
        asked = time.monotonic()
    histogram = lag_histogram(metrics_port)
    busiest = sorted(probe.loop_cpu, key=lambda sample: -sample[1])[:10]
    slow = sorted((round(sent - started, 1), round(cpu * 1000)) for sent, cpu in busiest)
    figures = {"grow_s": round(grown - started, 1), "ask_s": round(asked - grown, 1),
               "pings": probe.count(started), "worst_ping_grow_ms": round(probe.worst_ms(started)),
               "worst_ping_ask_ms": round(probe.worst_ms(grown)),
               "worst_loop_cpu_during_a_ping_ms": round(probe.worst_loop_cpu_ms(started)),
               "worst_ping_less_cpu_queue_waits_ms": round(probe.worst_unqueued_ms(started)),
               "loop_wakeups_late_over_100ms": lags_over(histogram, STALL_S),
               "loop_wakeups_late_over_250ms": lags_over(histogram, 0.25),
               "marks_s": [(name, round(t - started, 1)) for name, t in marks], "busiest_pings_s_cpu_ms": slow}
    print("FIGURES", figures)
    assert probe.failures == []
    assert probe.count(grown) >= 20, figures  # the other client kept going while the state was asked for
    # No callback held the loop for 100 ms: while any ping waited, the loop's thread ran for less than that. (The
    # loop-lag histogram and the round trips also count the time the broker waited for a CPU on this shared
    # machine: they are reported, and the round trips are bounded once those waits are taken out.)
    assert probe.worst_loop_cpu_ms(started) < STALL_S * 1000, figures
    assert probe.worst_unqueued_ms(started) < MAX_UNQUEUED_PING_MS, figures


def test_a_topic_deleted_while_a_paced_answer_is_built_is_answered_unknown(broker_factory) -> None:
    """ListOffsets and DescribeProducers yield to the loop between partitions: a topic deleted meanwhile is
    answered UNKNOWN_TOPIC_OR_PARTITION for the partitions not yet done (no handler failure)."""
    broker = broker_factory()
    # ListOffsets answers each partition once (Kafka keys the request by partition): 5 000 distinct ones;
    # DescribeProducers answers every entry, so there the 1 000 partitions are named 40 times over
    distinct = list(range(5_000))
    repeated = [p % 1_000 for p in range(40_000)]
    with RawClient(broker.port, "asker") as asker, RawClient(broker.port, "deleter") as deleter:
        for api_key, version, body, indexes, count in (
                (LIST_OFFSETS, 8, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "doomed", "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in distinct]}]},
                 distinct, 5_000),
                (DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "doomed", "partition_indexes": repeated}]}, repeated,
                 1_000)):
            create_topic(asker, "doomed", count)
            if api_key == DESCRIBE_PRODUCERS:  # producer state loaded first: the racing request only reads
                asker.call(api_key, version, body)
            correlation_id = asker.send(api_key, version, body)
            time.sleep(0.05)  # the answer is being built (40 000 partitions, yielding every 5 ms)
            r = deleter.call(DELETE_TOPICS, 6, {"topics": [{"name": "doomed", "topic_id": uuid.UUID(int=0)}],
                                                "timeout_ms": 30_000})
            assert r.responses[0].error_code == 0
            answer = asker.receive(api_key, version, correlation_id)
            codes = [p.error_code for t in answer.topics for p in t.partitions]
            assert len(codes) == len(indexes)
            assert set(codes) <= {0, 3}, set(codes)  # NONE (done before the deletion), UNKNOWN_TOPIC_OR_PARTITION
    assert not [line for line in broker.log_path.read_text().splitlines() if "request handler failed" in line]
