"""Stateful property test: the coordinator against a small reference model of what producers may observe.

The model does not restate Kafka's epoch arithmetic. It tracks, per transactional id, the phase of the
transaction, the producer id/epoch pair the coordinator last handed out (the live producer) and every pair it
handed out before (zombies), and checks Kafka's promises: a zombie never changes anything; the live producer
sees the lifecycle rules (add, commit/abort, retries, CONCURRENT_TRANSACTIONS while markers are pending); a
new pair is always newer than every pair before it; markers carry an epoch no producer of the transaction can
still write with (TV2, fencing); timeouts fence; the log only holds legal transitions; and replaying the log
rebuilds the same state, at every step and across restarts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from broker.txn import TV_0, TV_2, TopicPartition, TxnMetadata, TxnState
from broker.txn import records as rec
from broker.txn.metadata import SHORT_MAX
from broker.txn.state import is_legal
from protocol.errors import ErrorCode as E
from tests.unit.txn.txn_helpers import Clock, Ids, make, replayed, snapshot, with_ids

TIMEOUT = 10_000
EXPIRATION = 50_000
PARTS = st.lists(st.sampled_from([("t", 0), ("t", 1), ("u", 0)]), min_size=1, max_size=3, unique=True)
TIDS = st.sampled_from(["a", "b"])

IDLE = {"empty": {TxnState.EMPTY}, "commit": {TxnState.COMPLETE_COMMIT}, "abort": {TxnState.COMPLETE_ABORT}}


@dataclass
class Producer:
    phase: str | None = None  # None (unknown id), empty, commit, abort, ongoing, prep-commit, prep-abort
    live: tuple[int, int] | None = None
    zombies: set[tuple[int, int]] = field(default_factory=set)
    parts: set[TopicPartition] = field(default_factory=set)
    txn_epoch: int = -1  # the epoch the ongoing transaction's batches are written with
    started: int = -1
    updated: int = -1
    markers: list = field(default_factory=list)

    def retire(self) -> None:
        if self.live is not None:
            self.zombies.add(self.live)
        self.live = None

    def hand_out(self, pair: tuple[int, int]) -> None:
        assert pair not in self.zombies and pair != self.live, f"pair {pair} handed out twice"
        if self.live is not None:
            assert pair[0] != self.live[0] or pair[1] > self.live[1], f"{pair} is not newer than {self.live}"
        self.retire()
        self.live = pair


class TxnMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock(1_000_000)
        self.ids = Ids(1000)
        self.level = TV_2
        self.tv = {"a": TV_0, "b": TV_2}  # one producer per client transaction version (b's: the cluster's)
        self.c = make(self.clock, transaction_max_timeout_ms=TIMEOUT, transaction_version_level=TV_2)
        self.log: list = []
        self.last: dict[str, TxnMetadata | None] = {}
        self.p = {tid: Producer() for tid in self.tv}

    # ------------------------------------------------------------------------------------------ helpers

    def take(self, result) -> None:
        """Keep the records for replay and check each is a legal step for its id."""
        for r in result.records:
            d = rec.decode(r.key, r.value)
            assert d is not None and r.partition == self.c.partition_for(d.transactional_id)
            prev = self.last.get(d.transactional_id)
            if d.metadata is not None:
                m = d.metadata
                if prev is not None:
                    assert is_legal(prev.state, m.state), f"{prev.state.name} -> {m.state.name}"
                    if m.producer_id == prev.producer_id:
                        assert m.producer_epoch >= prev.producer_epoch
                else:
                    assert m.state is TxnState.EMPTY
                self.p[d.transactional_id].updated = self.clock.now
            self.last[d.transactional_id] = d.metadata
            self.log.append(r)

    def zombie(self, tid: str, data) -> tuple[int, int] | None:
        z = sorted(self.p[tid].zombies)
        return data.draw(st.sampled_from(z)) if z else None

    def check_markers(self, tid: str, markers, commit: bool, strictly_above: bool) -> None:
        p = self.p[tid]
        assert {TopicPartition(k.topic, k.partition) for k in markers} == p.parts
        for k in markers:
            assert (k.transactional_id, k.commit, k.coordinator_epoch) == (tid, commit, 0)
            # no batch of the transaction can be written at or above a TV2/fencing marker's epoch
            assert k.producer_epoch > p.txn_epoch if strictly_above else k.producer_epoch >= p.txn_epoch
        p.markers = list(markers)

    # ------------------------------------------------------------------------------------------- rules

    @initialize(high=st.sets(TIDS), level=st.sampled_from([TV_0, TV_2]))
    def seed(self, high: set[str], level: int) -> None:
        """The cluster's transaction version (it decides how the coordinator's own aborts bump the epoch);
        some ids start with their epochs nearly used up (as if long-lived), to reach rotation and overflow."""
        self.level = level
        self.tv = {"a": TV_0, "b": level}
        self.c = make(self.clock, transaction_max_timeout_ms=TIMEOUT, transaction_version_level=level)
        for n, tid in enumerate(sorted(high)):
            m = TxnMetadata(tid, 1 + n, SHORT_MAX - 3, TIMEOUT, TxnState.EMPTY, prev_producer_id=1 + n,
                            txn_last_update_timestamp=self.clock.now)
            r = rec.Record(self.c.partition_for(tid), *rec.encode(m, 1))
            self.c.replay(r.key, r.value)
            self.take(type("R", (), {"records": [r]})())
            self.p[tid].phase = "empty"
            self.p[tid].live = (1 + n, SHORT_MAX - 3)

    @rule(tid=TIDS, recover=st.booleans())
    def init_producer(self, tid: str, recover: bool) -> None:
        p = self.p[tid]
        expected = p.live if recover and p.live is not None else (-1, -1)
        r = with_ids(self.c.init_producer_id, self.ids, tid, TIMEOUT, *expected)
        self.take(r)
        if p.phase is None or p.phase in IDLE:
            assert r.error is E.NONE and len(r.records) == 1
            p.hand_out((r.producer_id, r.producer_epoch))
            p.phase, p.parts = "empty", set()
        elif p.phase == "ongoing":
            # fenced and aborted; the caller retries
            assert r.error is E.CONCURRENT_TRANSACTIONS and len(r.records) == 1
            self.check_markers(tid, r.markers, commit=False, strictly_above=True)
            p.retire()
            p.phase = "prep-abort"
        else:
            # markers pending; a TV2 producer that overflowed names the id it moves to, which the coordinator
            # takes on only at completion: fenced, as in Kafka
            fenced_ok = recover and self.tv[tid] == TV_2
            assert r.records == [] and (r.error is E.CONCURRENT_TRANSACTIONS
                                        or (fenced_ok and r.error is E.PRODUCER_FENCED))

    @rule(tid=TIDS, parts=PARTS)
    def add_partitions(self, tid: str, parts: list[tuple[str, int]]) -> None:
        p = self.p[tid]
        if p.live is None:
            return
        r = self.c.add_partitions(tid, *p.live, parts, client_transaction_version=self.tv[tid])
        self.take(r)
        codes = set(r.errors.values())
        if p.phase in ("prep-commit", "prep-abort"):
            assert r.records == [] and codes <= {E.CONCURRENT_TRANSACTIONS, E.INVALID_PRODUCER_ID_MAPPING}
            return
        assert codes == {E.NONE}
        new = {TopicPartition(*tp) for tp in parts}
        assert bool(r.records) == (p.phase != "ongoing" or not new <= p.parts)
        if p.phase != "ongoing":
            p.parts, p.started = set(), self.clock.now
        p.phase, p.txn_epoch = "ongoing", p.live[1]
        p.parts |= new

    @rule(tid=TIDS, part=st.sampled_from([("t", 0), ("u", 0)]))
    def verify(self, tid: str, part: tuple[str, int]) -> None:
        p = self.p[tid]
        if p.live is None:
            return
        r = self.c.add_partitions(tid, *p.live, [part], verify_only=True)
        assert r.records == []
        code = r.errors[TopicPartition(*part)]
        if p.phase in ("prep-commit", "prep-abort"):
            assert code in (E.CONCURRENT_TRANSACTIONS, E.INVALID_PRODUCER_ID_MAPPING)
        else:
            in_txn = p.phase == "ongoing" and TopicPartition(*part) in p.parts
            assert code is (E.NONE if in_txn else E.TRANSACTION_ABORTABLE)

    @rule(tid=TIDS, parts=PARTS, data=st.data())
    def zombie_acts(self, tid: str, parts: list[tuple[str, int]], data) -> None:
        z = self.zombie(tid, data)
        if z is None:
            return
        before = snapshot(self.c)
        add = self.c.add_partitions(tid, *z, parts, client_transaction_version=self.tv[tid])
        assert E.NONE not in add.errors.values() and add.records == []
        commit = data.draw(st.booleans())
        end = self.c.end_txn(tid, *z, commit, self.tv[tid])
        # a zombie may at most be told that its own EndTxn already went through (a retry)
        assert end.records == [] and end.markers == []
        assert snapshot(self.c) == before

    @rule(tid=TIDS, commit=st.booleans())
    def end_txn(self, tid: str, commit: bool) -> None:
        p = self.p[tid]
        if p.live is None:
            return
        tv2 = self.tv[tid] == TV_2
        r = with_ids(self.c.end_txn, self.ids, tid, *p.live, commit, self.tv[tid])
        self.take(r)
        phase = p.phase
        if phase == "ongoing":
            assert r.error is E.NONE
            self.check_markers(tid, r.markers, commit, strictly_above=tv2)
            if tv2:
                p.hand_out((r.producer_id, r.producer_epoch))
            p.phase = "prep-commit" if commit else "prep-abort"
        elif phase in ("prep-commit", "prep-abort"):
            # markers pending: whatever the outcome asked (Kafka's pending transition answers first)
            assert r.records == [] and r.error is E.CONCURRENT_TRANSACTIONS
        elif tv2:
            if commit:
                assert (r.error, r.records) == (E.INVALID_TXN_STATE, [])
            else:
                # abort when unsure: the epoch is bumped, nothing to mark
                assert r.error is E.NONE and r.markers == [] and len(r.records) == 2
                p.hand_out((r.producer_id, r.producer_epoch))
                p.phase, p.parts = "abort", set()
        else:
            ok = phase == ("commit" if commit else "abort")
            assert (r.error, r.records) == ((E.NONE if ok else E.INVALID_TXN_STATE), [])

    @rule(tid=TIDS)
    def markers_written(self, tid: str) -> None:
        p = self.p[tid]
        if not p.markers:
            return
        k = p.markers[0]
        r = self.c.complete_transaction(tid, k.producer_id, k.producer_epoch, k.coordinator_epoch)
        self.take(r)
        assert r.error is E.NONE and len(r.records) == 1
        p.phase = "commit" if k.commit else "abort"
        p.markers, p.parts = [], set()

    @rule(ms=st.integers(1, 3 * TIMEOUT))
    def tick(self, ms: int) -> None:
        self.clock.now += ms

    @rule()
    def abort_timed_out(self) -> None:
        due = sorted(tid for tid, p in self.p.items()
                     if p.phase == "ongoing" and p.started + TIMEOUT < self.clock.now)
        r = self.c.abort_timed_out()
        self.take(r)
        assert sorted({k.transactional_id for k in r.markers}) == due
        for tid in due:
            self.check_markers(tid, [k for k in r.markers if k.transactional_id == tid], False, True)
            self.p[tid].retire()
            self.p[tid].phase = "prep-abort"

    @rule()
    def expire(self) -> None:
        due = {tid for tid, p in self.p.items()
               if p.phase in IDLE and p.updated <= self.clock.now - EXPIRATION}
        out = self.c.expire_transactional_ids(expiration_ms=EXPIRATION)
        self.take(type("R", (), {"records": out})())
        assert {rec.decode(r.key, None).transactional_id for r in out} == due
        for tid in due:
            self.p[tid].retire()
            self.p[tid].phase = None

    @rule()
    def restart(self) -> None:
        """Rebuild from the log; transactions left prepared get their markers back."""
        self.c = replayed(self.log, self.clock, transaction_max_timeout_ms=TIMEOUT,
                          transaction_version_level=self.level)
        pending = {(k.transactional_id, k.topic, k.partition, k.producer_epoch, k.commit)
                   for k in self.c.pending_completions().markers}
        assert pending == {(k.transactional_id, k.topic, k.partition, k.producer_epoch, k.commit)
                           for p in self.p.values() for k in p.markers}

    # -------------------------------------------------------------------------------------- invariants

    @invariant()
    def phases_match(self) -> None:
        for tid, p in self.p.items():
            m = self.c.metadata(tid)
            if p.phase is None:
                assert m is None
                continue
            assert m is not None
            want = IDLE.get(p.phase) or {
                "ongoing": {TxnState.ONGOING}, "prep-commit": {TxnState.PREPARE_COMMIT},
                "prep-abort": {TxnState.PREPARE_ABORT}}[p.phase]
            assert m.state in want, (tid, p.phase, m.state)
            if p.phase == "ongoing":
                assert m.topic_partitions == p.parts

    @invariant()
    def replay_rebuilds_the_state(self) -> None:
        assert snapshot(replayed(self.log, transaction_version_level=self.level)) == snapshot(self.c)


TxnMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_txn_coordinator_against_model = TxnMachine.TestCase
