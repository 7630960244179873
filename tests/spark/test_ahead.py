"""Acquiring the next micro-batch ahead (shoal_spark.ahead) and the stream reader's use of it, against a fake
share-group member that keeps the broker's per-partition lock limit (no SparkSession, no broker)."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import shoal_spark.stream as stream
from shoal_client import ACCEPT, RELEASE, RENEW, AckTarget, Acquired, FetchResult, TopicIdPartition
from shoal_spark.ahead import AcquireAhead, split
from shoal_spark.options import parse_options

TOPIC_ID = uuid.uuid4()


def acquired(partition: int, *ranges: tuple[int, int]) -> Acquired:
    return Acquired("t", TOPIC_ID, partition, b"batches-%d" % partition, [(f, last, 1) for f, last in ranges])


def offsets(items: list[Acquired]) -> set[tuple[int, int]]:
    return {(a.partition, o) for a in items for f, last, _ in a.ranges for o in range(f, last + 1)}


def test_split_takes_that_many_offsets_cutting_inside_a_range():
    items = [acquired(0, (0, 9)), acquired(1, (0, 4), (10, 14)), acquired(2, (0, 9))]
    taken, rest = split(items, 13)
    assert sum(a.count for a in taken) == 13 and sum(a.count for a in rest) == 17
    assert offsets(taken) | offsets(rest) == offsets(items) and not offsets(taken) & offsets(rest)
    assert [a.ranges for a in taken] == [[(0, 9, 1)], [(0, 2, 1)]]
    assert [a.ranges for a in rest] == [[(3, 4, 1), (10, 14, 1)], [(0, 9, 1)]]
    assert taken[1].records == rest[0].records  # both halves keep the record batches
    assert split(items, 100) == (items, [])
    assert split(items, 0) == ([], items)


def test_acquire_ahead_runs_in_the_background_and_take_waits_for_it():
    release = threading.Event()
    calls: list[tuple[dict, int, int]] = []

    def acquire(acks: dict, max_records: int, max_bytes: int) -> list[Acquired]:
        calls.append((acks, max_records, max_bytes))
        assert release.wait(10)
        return [acquired(0, (0, 9)), acquired(1, (0, 9))]

    ahead = AcquireAhead(acquire)
    began = time.monotonic()
    ahead.start({"acks": 1}, 20, 1000)
    assert time.monotonic() - began < 5 and ahead.held() == []  # start() did not wait for the fetch
    threading.Timer(0.2, release.set).start()
    taken = ahead.take(15)  # waits for the acquisition in progress
    assert calls == [({"acks": 1}, 20, 1000)]
    assert sum(a.count for a in taken) == 15 and ahead.count == 5
    assert offsets(ahead.held()) == {(1, o) for o in range(5, 10)}
    assert offsets(ahead.take(100)) == {(1, o) for o in range(5, 10)} and ahead.count == 0


def test_acquire_ahead_error_surfaces_in_take_and_keeps_what_was_held():
    outcomes: list = [[acquired(0, (0, 4))], RuntimeError("broker gone"), [acquired(0, (5, 9))]]

    def acquire(acks: dict, max_records: int, max_bytes: int) -> list[Acquired]:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    ahead = AcquireAhead(acquire)
    ahead.start({}, 10, 1000)
    assert ahead.wait(10) and ahead.count == 5
    ahead.start({}, 10, 1000)
    with pytest.raises(RuntimeError, match="broker gone"):
        ahead.take(10)
    assert ahead.count == 5  # held before the failure: still held (to be taken or released)
    ahead.start({}, 10, 1000)
    assert offsets(ahead.take(10)) == {(0, o) for o in range(10)}
    assert ahead.clear() == [] and ahead.count == 0


def test_records_held_when_their_session_was_lost_are_dropped():
    sessions = {1: 1, 2: 1}  # broker -> its open share session

    def acquire(acks, n, size):
        return [dataclasses.replace(acquired(p, (0, 9)), node=node, session=sessions[node])
                for p, node in ((0, 1), (1, 2))]

    ahead = AcquireAhead(acquire, lambda a: sessions[a.node] != a.session)
    ahead.start({}, 20, 1000)
    assert ahead.wait(10) and ahead.count == 20
    # Broker 1's session is lost (a restart, a failover): it released what it held, and shipping that would only
    # make duplicates; what broker 2 acquired is still held.
    sessions[1] += 1
    assert offsets(ahead.take(20)) == {(1, o) for o in range(10)} and ahead.count == 0 and ahead.dropped == 10
    ahead.start({}, 20, 1000)  # acquired on the new session: kept
    assert len(ahead.take(20)) == 2 and ahead.dropped == 10


def test_split_keeps_the_broker_and_session_of_what_it_cuts():
    item = dataclasses.replace(acquired(0, (0, 9)), node=3, session=7)
    taken, rest = split([item], 4)
    assert [(a.node, a.session, a.ack_key) for a in taken + rest] == [(3, 7, AckTarget(TOPIC_ID, 0, 3))] * 2


class FakeMember:
    """A share-group member over an in-memory partitioned log with Kafka's per-partition lock limit: it records
    every acknowledgement and fetch, so the tests can check what was ACCEPTed when."""

    instances: list[FakeMember] = []
    available_now_end = 1000  # what end_offsets() reports (records past it arrive after an availableNow start)

    def __init__(self, bootstrap: str, group: str, topics, **_: object) -> None:
        self.lock = threading.Lock()
        self.parts = {TopicIdPartition(TOPIC_ID, p): 0 for p in range(2)}  # next offset to hand out
        self.end = 1000  # records per partition
        self.max_locks = 100  # per partition
        self.locked: dict[TopicIdPartition, set[int]] = {tp: set() for tp in self.parts}
        self.accepted: set[tuple[int, int]] = set()
        self.released: set[tuple[int, int]] = set()
        self.renewed: set[tuple[int, int]] = set()
        self.fetches: list[str] = []  # the thread of each fetch
        self.modes: list[str | None] = []  # the acquire mode of each fetch
        self.lock_timeout_ms = 30_000
        self.sessions_lost = 0
        self.closed = False
        FakeMember.instances.append(self)

    def start(self) -> FakeMember:
        return self

    def wait_for_assignment(self, timeout_s: float) -> bool:
        return True  # assigned from the start

    def assignment(self) -> frozenset[TopicIdPartition]:
        return frozenset(self.parts)

    def end_offsets(self) -> dict[TopicIdPartition, int]:
        return {tp: self.available_now_end for tp in self.parts}

    def _apply(self, acks: dict, renew: bool = False) -> None:
        for tp, ranges in acks.items():
            for first, last, kind in ranges:
                for o in range(first, last + 1):
                    if o not in self.locked[tp] and self.sessions_lost:
                        continue  # acquired on a lost session: the broker answers with an error
                    assert o in self.locked[tp], f"acknowledging {o} of {tp}, which this member does not hold"
                    if kind == RENEW:
                        self.renewed.add((tp.partition, o))
                        continue
                    self.locked[tp].discard(o)
                    (self.accepted if kind == ACCEPT else self.released).add((tp.partition, o))
                    if kind == RELEASE:  # delivered again from here
                        self.parts[tp] = min(self.parts[tp], o)

    def fetch(self, *, max_records: int, max_bytes: int, max_wait_ms: int, acknowledgements=None, partitions=None,
              acquire_mode=None):
        with self.lock:
            self.fetches.append(threading.current_thread().name)
            self.modes.append(acquire_mode)
            self._apply(acknowledgements or {})
            result = FetchResult()
            room = max_records
            for tp in sorted(self.parts):
                if partitions is not None and tp not in partitions:
                    continue
                take = min(room, self.max_locks - len(self.locked[tp]), self.end - self.parts[tp])
                if take <= 0:
                    continue
                first = self.parts[tp]
                self.parts[tp] += take
                self.locked[tp].update(range(first, first + take))
                result.acquired.append(Acquired("t", TOPIC_ID, tp.partition, b"x" * take, [(first, first + take - 1, 1)],
                                                session=self.sessions_lost))
                room -= take
            return result

    def still_held(self, acquired: Acquired) -> bool:
        return acquired.session == self.sessions_lost  # acquired on the session still open

    def acknowledge(self, acks: dict, *, renew: bool = False) -> dict:
        with self.lock:
            self._apply(acks, renew)
        return {}

    def close(self, release=None) -> dict:
        with self.lock:
            self._apply(release or {})
            self.closed = True
        return {}


@pytest.fixture
def reader(monkeypatch):
    FakeMember.instances.clear()
    monkeypatch.setattr(stream, "ShareGroupMember", FakeMember)
    monkeypatch.setattr(stream, "_install_sigterm_handler", lambda: None)

    def make(**options: str) -> stream.ShareStreamReader:
        return stream.ShareStreamReader(parse_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                                       "group.id": "g", **options}))
    made: list[stream.ShareStreamReader] = []
    yield lambda **o: made.append(make(**o)) or made[-1]
    for r in made:
        r.stop()


def batch_offsets(r: stream.ShareStreamReader, seq: int) -> set[tuple[int, int]]:
    return offsets(r._held[seq].acquired)


def test_the_next_batch_is_acquired_while_spark_runs_the_current_one(reader):
    r = reader(maxRecordsPerTrigger="100")
    limit = ReadMaxRows(100)
    assert r.latestOffset({"seq": 0}, limit) == {"seq": 1}
    member = FakeMember.instances[0]
    assert r._ahead.wait(10) and r._ahead.count == 100  # batch 2's records, fetched in the background
    assert member.fetches == ["MainThread", "shoal-acquire-ahead"]
    first = batch_offsets(r, 1)
    # Spark committed batch 1 and asks for the next: the records are there already, no fetch in this call.
    assert r.latestOffset({"seq": 1}, limit) == {"seq": 2}
    assert r._ahead.wait(10)
    assert member.fetches == ["MainThread", "shoal-acquire-ahead", "shoal-acquire-ahead"]
    second = batch_offsets(r, 2)
    assert len(second) == 100 and not second & first
    # Batch 1's ACCEPT rides on the next acquisition (background), batch 2 is not accepted before its turn.
    assert r._ahead.wait(10)
    assert member.accepted == first and not member.accepted & second
    assert r.latestOffset({"seq": 2}, limit) == {"seq": 3}
    assert r._ahead.wait(10)
    assert member.accepted == first | second and not member.accepted & batch_offsets(r, 3)


def test_a_row_limit_fetches_in_record_limit_mode_and_no_limit_in_whole_batches(reader):
    bounded = reader(maxRecordsPerTrigger="100", acquireAhead="false")
    bounded.latestOffset({"seq": 0}, ReadMaxRows(100))
    unbounded = reader(acquireAhead="false")
    unbounded.latestOffset({"seq": 0}, ReadAllAvailable())
    # acquired ahead: whole batches under a row limit too (take() hands Spark the limit, holds the rest)
    ahead = reader(maxRecordsPerTrigger="100")
    ahead.latestOffset({"seq": 0}, ReadMaxRows(100))
    assert ahead._ahead.wait(10)
    assert [m.modes for m in FakeMember.instances] == [["record_limit"], ["batch_optimized"],
                                                       ["record_limit", "batch_optimized"]]


def test_without_acquire_ahead_each_batch_is_fetched_in_latest_offset(reader):
    r = reader(maxRecordsPerTrigger="100", acquireAhead="false")
    r.latestOffset({"seq": 0}, ReadMaxRows(100))
    r.latestOffset({"seq": 1}, ReadMaxRows(100))
    assert FakeMember.instances[0].fetches == ["MainThread", "MainThread"] and r._ahead is None


def test_a_smaller_limit_takes_part_of_what_was_acquired_ahead(reader):
    r = reader()
    r.latestOffset({"seq": 0}, ReadMaxRows(150))
    assert r._ahead.wait(10) and r._ahead.count == 50  # the lock limit (2 x 100) leaves 50 beside batch 1
    assert r.latestOffset({"seq": 1}, ReadMaxRows(30)) == {"seq": 2}
    assert len(batch_offsets(r, 2)) == 30


def test_stop_releases_what_was_acquired_ahead_and_the_batches_in_progress(reader):
    r = reader(maxRecordsPerTrigger="60")
    r.latestOffset({"seq": 0}, ReadMaxRows(60))
    assert r._ahead.wait(10)
    member = FakeMember.instances[0]
    held = batch_offsets(r, 1) | offsets(r._ahead.held())
    assert len(held) == 120
    r.stop()
    assert member.closed and member.released == held and not member.accepted


def test_records_acquired_ahead_have_their_locks_renewed(reader):
    r = reader(maxRecordsPerTrigger="60", lockRenewIntervalMs="50")
    r.latestOffset({"seq": 0}, ReadMaxRows(60))
    assert r._ahead.wait(10)
    member = FakeMember.instances[0]
    ahead = offsets(r._ahead.held())
    deadline = time.monotonic() + 10
    while not ahead <= member.renewed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ahead <= member.renewed and batch_offsets(r, 1) <= member.renewed


@pytest.mark.parametrize("last", [1000, 900])
def test_available_now_ends_when_nothing_is_left_and_everything_was_accepted(reader, monkeypatch, last):
    # last 900: the records past it (there when the acquisition ahead asks) are released, and the ACCEPT of the
    # last batch still goes out although there is nothing left to fetch.
    monkeypatch.setattr(FakeMember, "available_now_end", last)
    r = reader(maxRecordsPerTrigger="150")
    r.prepareForTriggerAvailableNow()
    seq, batches = 0, []
    while True:
        end = r.latestOffset({"seq": seq}, ReadMaxRows(150))
        if end["seq"] == seq:
            break
        seq = end["seq"]
        batches.append(len(batch_offsets(r, seq)))
        assert len(batches) < 100
    member = FakeMember.instances[0]
    assert sum(batches) == 2 * last and all(0 < n <= 150 for n in batches)
    assert member.accepted == {(p, o) for p in (0, 1) for o in range(last)} and r._ahead.count == 0
    assert all(o >= last for _, o in member.released)


def test_after_a_lost_session_the_next_batch_is_fetched_anew(reader):
    r = reader(maxRecordsPerTrigger="50")
    r.latestOffset({"seq": 0}, ReadMaxRows(50))
    assert r._ahead.wait(10) and r._ahead.count == 50
    member = FakeMember.instances[0]
    stale = offsets(r._ahead.held())
    with member.lock:  # a broker restart: the session and what it held are gone
        member.sessions_lost += 1
        for tp in member.parts:
            member.locked[tp].clear()
        member.parts = dict.fromkeys(member.parts, 0)
    assert r.latestOffset({"seq": 1}, ReadMaxRows(50)) == {"seq": 2}
    assert r._ahead.dropped == 50 and member.fetches[-2:] == ["MainThread", "shoal-acquire-ahead"]
    # Acquired anew on the new session (the broker delivers everything the lost session held again).
    assert batch_offsets(r, 2) == {(0, o) for o in range(50)} and stale == {(0, o) for o in range(50, 100)}
