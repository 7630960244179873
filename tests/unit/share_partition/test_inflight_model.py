"""Stateful property test: range-based ShareInFlight against the per-offset reference model."""

from __future__ import annotations

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from broker.share_partition.inflight import ACQUIRED, ShareInFlight, StateBatch
from tests.unit.share_partition.inflight_reference import Reference

MEMBERS = ["m1", "m2", "m3"]
LOCK_MS = 100


def expand(batches: list[StateBatch]) -> dict[int, tuple[int, int]]:
    out = {}
    for b in batches:
        for off in range(b.first_offset, b.last_offset + 1):
            out[off] = (b.delivery_state, b.delivery_count)
    return out


def expand_acquired(ranges) -> list[tuple[int, int]]:
    return [(o, r.delivery_count) for r in ranges for o in range(r.first_offset, r.last_offset + 1)]


class InFlightMachine(RuleBasedStateMachine):
    @initialize(
        start=st.integers(0, 5),
        limit=st.integers(1, 4),
        max_in_flight=st.integers(4, 40),
        persist=st.booleans(),
        sizes=st.lists(st.integers(1, 6), min_size=1, max_size=8),
    )
    def setup(self, start: int, limit: int, max_in_flight: int, persist: bool, sizes: list[int]) -> None:
        self.config = dict(max_in_flight_records=max_in_flight, delivery_count_limit=limit,
                           lock_duration_ms=LOCK_MS, persist_acquisitions=persist)
        self.sp = ShareInFlight(start, **self.config)
        self.ref = Reference(start, max_in_flight=max_in_flight, limit=limit, lock_ms=LOCK_MS,
                             persist_acquisitions=persist)
        self.log: list[tuple[int, int]] = []
        self.log_end = start
        self.now = 1000
        # The share coordinator's view, built only from take_dirty() deltas.
        self.stored_start = start
        self.stored: dict[int, tuple[int, int]] = {}
        for size in sizes:
            self.produce(size, 0)

    # -- log --------------------------------------------------------------------------------------
    @rule(size=st.integers(1, 6), gap=st.sampled_from([0, 0, 0, 0, 1, 3]))
    def produce(self, size: int, gap: int) -> None:
        first = self.log_end + gap
        self.log.append((first, first + size - 1))
        self.log_end = first + size

    def batches_from_speo(self) -> list[tuple[int, int]]:
        return [b for b in self.log if b[1] >= self.sp.end_offset]

    # -- operations -------------------------------------------------------------------------------
    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(0, 12))
    def acquire(self, member: str, max_records: int) -> None:
        batches = self.batches_from_speo()
        got = self.sp.acquire(member, batches, max_records, self.now)
        want = self.ref.acquire(member, batches, max_records, self.now)
        assert expand_acquired(got) == want
        event(f"acquire got {'some' if want else 'none'}")

    @rule(data=st.data(), member=st.sampled_from(MEMBERS))
    def acknowledge(self, data, member: str) -> None:
        ranges = []
        nranges = data.draw(st.integers(1, 3))
        owned = [o for o, r in self.ref.recs.items() if r.state == ACQUIRED and r.owner == member]
        owned_set = set(owned)
        cursor = self.ref.start - 3
        for _ in range(nranges):
            usable = [o for o in owned if o >= cursor]
            if usable and data.draw(st.integers(0, 3)) > 0:
                # Mostly valid: a sub-range of one contiguous run this member holds.
                first = data.draw(st.sampled_from(usable))
                run_end = first
                while run_end + 1 in owned_set:
                    run_end += 1
                length = data.draw(st.integers(1, run_end - first + 1))
            else:
                lo = max(cursor, -1)
                first = data.draw(st.integers(lo, max(lo, self.ref.end + 2)))
                length = data.draw(st.integers(1, 8))
            last = first + length - 1
            if data.draw(st.booleans()):
                types = [data.draw(st.sampled_from([1, 1, 2, 3, 0, 4]))]
            else:
                types = data.draw(st.lists(st.sampled_from([1, 2, 3, 0, 4]), min_size=length, max_size=length))
            if data.draw(st.integers(0, 20)) == 0:
                types = [data.draw(st.integers(-1, 6))]  # sometimes an invalid type
            ranges.append((first, last, types))
            cursor = last + 1
        got = self.sp.acknowledge(member, ranges, self.now)
        want = self.ref.acknowledge(member, ranges, self.now)
        assert got == want, (ranges, got, want)
        event(f"ack ok={not any(got)}")

    @rule(member=st.sampled_from(MEMBERS))
    def release_member(self, member: str) -> None:
        assert self.sp.release_member(member, self.now) == self.ref.release_member(member)

    @rule(dt=st.sampled_from([1, 10, 50, 99, 100, 150, 400]))
    def tick(self, dt: int) -> None:
        self.now += dt
        n = self.ref.expire(self.now)
        assert self.sp.expire_locks(self.now) == n
        event(f"expired {'some' if n else 'none'}")

    @rule(back=st.integers(0, 3), length=st.integers(1, 4))
    def archive_range(self, back: int, length: int) -> None:
        first = max(self.ref.end - back, self.ref.start)
        last = first + length - 1
        assert self.sp.archive_range(first, last) == self.ref.archive_range(first, last)

    @rule(step=st.integers(1, 8))
    def log_start_moves(self, step: int) -> None:
        lso = self.ref.start + step
        self.sp.advance_log_start(lso)
        self.ref.advance_log_start(lso)

    @rule()
    def persist(self) -> None:
        delta = self.sp.take_dirty()
        if delta is not None:
            if delta.full:
                self.stored = {}
            self.stored_start = delta.start_offset
            self.stored.update(expand(delta.state_batches))
        self.stored = {o: d for o, d in self.stored.items() if o >= self.stored_start}
        assert self.stored_start == self.ref.start
        assert {o: d for o, d in self.stored.items() if d[0] != 0 or d[1] != 0} == self.ref.durable()

    @rule(from_deltas=st.booleans())
    def restart(self, from_deltas: bool) -> None:
        """Leader restart: rebuild from durable state. Acquired records come back available."""
        if from_deltas:
            self.persist()
            start, batches = self.stored_start, [
                StateBatch(o, o, s, c) for o, (s, c) in sorted(self.stored.items())
            ]
        else:
            start, batches = self.sp.start_offset, self.sp.state_batches()
            self.stored_start, self.stored = start, expand(batches)
            self.sp.take_dirty()
        durable = self.ref.durable()
        self.sp = ShareInFlight.load(start, batches, **self.config)
        self.ref.reload(start, durable)
        self.sp.take_dirty()

    # -- invariants -------------------------------------------------------------------------------
    @invariant()
    def agree(self) -> None:
        sp, ref = self.sp, self.ref
        assert (sp.start_offset, sp.end_offset) == (ref.start, ref.end)
        assert list(sp.iter_records()) == ref.records()
        assert expand(sp.state_batches()) == ref.durable()
        states = [r.state for r in ref.recs.values()]
        assert sp.acquired_count == states.count(1)
        assert sp.archived_count == states.count(4)
        assert sp.available_count == states.count(0)
        assert sp.in_flight_count == len(states)
        deadlines = [r.deadline for r in ref.recs.values() if r.state == ACQUIRED]
        assert sp.next_deadline() == (min(deadlines) if deadlines else None)
        sp._index.check()
        # Pieces tile the window exactly.
        expect = sp.start_offset
        for p in sp.iter_pieces():
            assert p.first == expect and p.last >= p.first
            expect = p.last + 1
        assert expect == sp.end_offset


InFlightMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=80, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestInFlightModel = InFlightMachine.TestCase
