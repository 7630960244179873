"""shoal_client.ShareGroupMember against a real broker process: join, fetch raw batches with acquired ranges,
acknowledge whole ranges, renew locks, release on close, survive a broker restart."""

from __future__ import annotations

import time

import pytest

from protocol.records import iter_batch_views, iter_records
from shoal_client import (
    ACCEPT,
    RELEASE,
    RENEW,
    Acquired,
    ShareGroupMember,
    TopicIdPartition,
    acknowledgements,
)
from tests.helpers.broker_process import free_port
from tests.helpers.confluent_clients import (
    create_topic,
    produce_all,
    share_from_earliest,
)
from tests.helpers.share_members import MemberLoops, SteadyProducer, drain_leftovers

pytestmark = pytest.mark.integration

SHORT_LOCKS = {"group.share.record.lock.duration.ms": "1000", "group.share.min.record.lock.duration.ms": "1000"}


def values_in(acquired: list[Acquired]) -> list[bytes]:
    """Values of the acquired records (records of the returned batches outside the ranges are skipped)."""
    out = []
    for a in acquired:
        wanted = [(first, last) for first, last, _ in a.ranges]
        for _, _, view in iter_batch_views(a.records):
            for r in iter_records(view):
                if any(first <= r.offset <= last for first, last in wanted):
                    out.append(r.value)
    return out


def drain(member: ShareGroupMember, want: int, *, ack: int | None = ACCEPT, max_records: int = 500,
          timeout: float = 30.0) -> list[Acquired]:
    got: list[Acquired] = []
    pending: dict[TopicIdPartition, list] = {}
    deadline = time.monotonic() + timeout
    while sum(a.count for a in got) < want:
        assert time.monotonic() < deadline, f"got {sum(a.count for a in got)} of {want}"
        result = member.fetch(max_records=max_records, max_bytes=1 << 20, max_wait_ms=500,
                              acknowledgements=pending)
        assert not result.ack_errors, result.ack_errors
        pending = {}
        for a in result.acquired:
            got.append(a)
            if ack is not None:
                pending[a.key] = [(first, last, ack) for first, last, _ in a.ranges]
    if pending:
        assert member.acknowledge(pending) == {}
    return got


def test_fetch_acknowledge_and_bounds(broker):
    create_topic(broker.bootstrap, "sc-basic", partitions=2)
    share_from_earliest(broker.bootstrap, "g")
    values = [f"v{i}".encode() for i in range(300)]
    produce_all(broker.bootstrap, "sc-basic", values, partition=None)
    with ShareGroupMember(broker.bootstrap, "g", ["sc-basic"]) as member:
        assert member.wait_for_assignment(30)
        assert len(member.assignment()) == 2
        first = member.fetch(max_records=40, max_bytes=1 << 20, max_wait_ms=2000)
        assert 0 < first.count <= 40  # MaxRecords is a hard limit (record-limit acquire mode)
        rest = drain(member, 300 - first.count)
        assert member.acknowledge(acknowledgements(first.acquired, ACCEPT)) == {}
        assert sorted(values_in(first.acquired + rest)) == sorted(values)
        assert all(d == 1 for a in first.acquired + rest for _, _, d in a.ranges)
        assert member.fetch(max_records=100, max_bytes=1 << 20, max_wait_ms=100).count == 0
    with ShareGroupMember(broker.bootstrap, "g", ["sc-basic"]) as other:
        assert other.wait_for_assignment(30)
        assert other.fetch(max_records=500, max_bytes=1 << 20, max_wait_ms=300).count == 0  # all accepted


def test_acquire_modes_record_limit_cuts_a_batch_batch_optimized_takes_it_whole(broker):
    create_topic(broker.bootstrap, "sc-mode")
    values = [f"v{i}".encode() for i in range(200)]
    produce_all(broker.bootstrap, "sc-mode", values, **{"linger.ms": 1000})  # one producer batch
    for mode in ("record_limit", "batch_optimized"):
        share_from_earliest(broker.bootstrap, f"g-{mode}")
        with ShareGroupMember(broker.bootstrap, f"g-{mode}", ["sc-mode"], acquire_mode=mode) as member:
            assert member.wait_for_assignment(30)
            [acquired] = member.fetch(max_records=10, max_bytes=1 << 20, max_wait_ms=2000).acquired
            first_batch = next(h for _pos, h, _view in iter_batch_views(acquired.records))
            assert first_batch.last_offset >= 10  # the batch holds more than MaxRecords
            expected_last = 9 if mode == "record_limit" else first_batch.last_offset
            assert acquired.ranges == [(0, expected_last, 1)], mode
            assert values_in([acquired]) == values[:expected_last + 1]


def test_an_unknown_acquire_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="acquire_mode"):
        ShareGroupMember("127.0.0.1:9", "g", ["t"], acquire_mode="strict")
    member = ShareGroupMember("127.0.0.1:9", "g", ["t"])  # never started: the check comes before any request
    with pytest.raises(ValueError, match="acquire_mode"):
        member.fetch(max_records=1, max_bytes=1, max_wait_ms=0, acquire_mode="strict")


def test_close_releases_to_another_member_at_once(broker):
    create_topic(broker.bootstrap, "sc-close")
    share_from_earliest(broker.bootstrap, "g")
    produce_all(broker.bootstrap, "sc-close", [b"a", b"b", b"c"])
    a = ShareGroupMember(broker.bootstrap, "g", ["sc-close"]).start()
    held = drain(a, 3, ack=None)
    b = ShareGroupMember(broker.bootstrap, "g", ["sc-close"]).start()
    try:
        assert b.wait_for_assignment(30)
        assert b.fetch(max_records=10, max_bytes=1 << 20, max_wait_ms=200).count == 0  # a holds them
        tp = held[0].key
        # a releases one explicitly in its final request; closing its session releases the rest.
        assert a.close({tp: [(0, 0, RELEASE)]}) == {}
        got = drain(b, 3)
        assert sorted(values_in(got)) == [b"a", b"b", b"c"]
        assert {d for g in got for _, _, d in g.ranges} == {2}
    finally:
        a.close()
        b.close()


def test_renew_keeps_locks_past_the_lock_duration(broker_factory):
    # 2 s locks renewed about every 0.2 s: a margin for a loaded machine, where a round may take a second
    broker = broker_factory({"group.share.record.lock.duration.ms": "2000",
                             "group.share.min.record.lock.duration.ms": "2000"})
    create_topic(broker.bootstrap, "sc-renew")
    share_from_earliest(broker.bootstrap, "g")
    produce_all(broker.bootstrap, "sc-renew", [b"x"] * 5)
    with ShareGroupMember(broker.bootstrap, "g", ["sc-renew"]) as a, \
            ShareGroupMember(broker.bootstrap, "g", ["sc-renew"]) as b:
        held = drain(a, 5, ack=None)
        assert a.lock_timeout_ms == 2000
        renew = acknowledgements(held, RENEW)
        end = time.monotonic() + 5.0  # two and a half lock durations
        while time.monotonic() < end:
            assert a.acknowledge(renew, renew=True) == {}
            assert b.fetch(max_records=10, max_bytes=1 << 20, max_wait_ms=200).count == 0
        assert a.acknowledge(acknowledgements(held, ACCEPT)) == {}
        assert b.fetch(max_records=10, max_bytes=1 << 20, max_wait_ms=2500).count == 0


def test_broker_restart_loses_the_session_and_redelivers(broker_factory):
    # A fixed port, so that the client finds the restarted broker where it was.
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    create_topic(broker.bootstrap, "sc-restart")
    share_from_earliest(broker.bootstrap, "g")
    produce_all(broker.bootstrap, "sc-restart", [f"r{i}".encode() for i in range(10)])
    member = ShareGroupMember(broker.bootstrap, "g", ["sc-restart"]).start()
    try:
        held = drain(member, 10, ack=None)
        broker.restart()
        acks = acknowledgements(held, ACCEPT)
        deadline = time.monotonic() + 30
        result = member.fetch(max_records=100, max_bytes=1 << 20, max_wait_ms=500, acknowledgements=acks)
        assert result.session_lost and result.ack_errors
        got = result.acquired
        while sum(a.count for a in got) < 10:
            assert time.monotonic() < deadline
            got += member.fetch(max_records=100, max_bytes=1 << 20, max_wait_ms=500).acquired
        assert sorted(values_in(got)) == sorted(f"r{i}".encode() for i in range(10))
        assert {d for g in got for _, _, d in g.ranges} == {2}
    finally:
        member.close()


@pytest.mark.parametrize("fsync_interval_ms", ["0", "60000"])
def test_acknowledged_state_survives_kill9_whatever_the_share_state_fsync_interval(broker_factory,
                                                                                  fsync_interval_ms):
    """shoal.share.state.fsync.interval.ms=0 fsyncs every share-state write before answering (the write may
    suspend); a long interval answers once the write is in the log file, with no fsync before the kill: either
    way the broker's kill -9 keeps what was acknowledged (the page cache survives a process), so only the
    records never acknowledged come back."""
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                             "shoal.share.state.fsync.interval.ms": fsync_interval_ms})
    create_topic(broker.bootstrap, "sc-fsync")
    share_from_earliest(broker.bootstrap, "g")
    values = [f"f{i}".encode() for i in range(20)]
    produce_all(broker.bootstrap, "sc-fsync", values)
    with ShareGroupMember(broker.bootstrap, "g", ["sc-fsync"]) as member:
        got = drain(member, 20, ack=None)
        # accept offsets 0-11; the rest stay acquired (released by the close)
        acks = {a.key: [(first, min(last, 11), ACCEPT) for first, last, _ in a.ranges if first <= 11]
                for a in got}
        assert member.acknowledge({k: v for k, v in acks.items() if v}) == {}
    broker.kill9()
    broker.start()
    with ShareGroupMember(broker.bootstrap, "g", ["sc-fsync"]) as member:
        again = drain(member, 8)
        assert sorted(values_in(again)) == sorted(values[12:])
        assert member.fetch(max_records=100, max_bytes=1 << 20, max_wait_ms=500).count == 0


def test_members_consuming_through_a_broker_sigterm_and_sigkill_lose_nothing(broker_factory):
    """The cluster scenarios (tests/kafka/test_share_client_cluster.py) on one Shoal broker, where every partition
    has the same leader: two members consume while records are produced and the broker is stopped (SIGTERM),
    started, killed (SIGKILL) and started again; every record produced is delivered, the failed acknowledgements
    are those of the lost sessions (NETWORK_EXCEPTION), and nothing is left behind."""
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    create_topic(broker.bootstrap, "sc-failures", partitions=4)
    share_from_earliest(broker.bootstrap, "g")
    producer = SteadyProducer(broker.bootstrap, "sc-failures", "shoal", partitions=4)
    first = producer.produce(400)
    with MemberLoops(broker.bootstrap, "g", ["sc-failures"], 2) as loops:
        producer.start()
        loops.wait_for(first, 60)
        broker.stop()
        broker.start()
        loops.wait_for(producer.produce(200), 90)
        broker.kill9()
        broker.start()
        produced = producer.stop()
        loops.wait_for(produced, 90)
        loops.stop()
        assert loops.failures() == []
    leftovers = drain_leftovers(broker.bootstrap, "g", ["sc-failures"])
    assert set(leftovers) <= loops.delivered()
    tally = loops.tally(produced)
    print(tally.line("one Shoal broker, SIGTERM then SIGKILL") + f"; delivered again after: {len(leftovers)}")
    assert tally.lost == 0 and tally.delivered == tally.produced
    assert set(tally.ack_errors) <= {"NETWORK_EXCEPTION"}
