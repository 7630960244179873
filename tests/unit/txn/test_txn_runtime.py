"""TransactionCoordinatorRuntime with an in-memory `__transaction_state`, a fake marker writer and a fake clock:
durability before answers, markers after the prepare record, completion, restart (prepared transactions are
completed, nothing hangs), timeout aborts, expiry, failed appends, marker retries and routing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from broker.coordinator.coordinator_log import AppendFailed
from broker.linear_regex import RegexError, RegexWorker
from broker.txn import TransactionCoordinatorConfig, TxnMarker, TxnState
from broker.txn.markers import MarkersFenced, RoutedMarkerWriter, write_until_done
from broker.txn.runtime import TransactionCoordinatorRuntime
from protocol.errors import ErrorCode
from tests.helpers.waiting import async_assert_stays, async_wait_until
from tests.unit.txn.txn_helpers import Clock

E = ErrorCode
PARTITIONS = 4
TOPICS = {"t": 2, "__consumer_offsets": 4}


class MemoryLog:
    """`__transaction_state` in memory (the CoordinatorTopic the runtime is given): appends are durable at once,
or when released while `hold` is set; `fail_next` refuses the next append."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
        self.fail_next = False
        self.hold = False
        self._held: list[asyncio.Future] = []

    @property
    def num_partitions(self) -> int:
        return PARTITIONS

    def replay(self, partition: int, apply: Callable[..., Any], on_marker: Callable[..., Any] | None = None) -> int:
        for offset, (key, value) in enumerate(self.partitions[partition]):
            apply(offset, -1, -1, key, value)
        return len(self.partitions[partition])

    def end_offset(self, partition: int) -> int:
        return len(self.partitions[partition])

    def append_at(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                  producer_epoch: int = -1) -> tuple[int, asyncio.Future]:
        """Appended at once; durable at once, or when released (`hold`). Without records: the partition's
        barrier, held in the same way."""
        if self.fail_next and records:
            self.fail_next = False
            raise AppendFailed("refused")
        base = len(self.partitions[partition]) if records else -1
        self.partitions[partition] += records
        fut = asyncio.get_running_loop().create_future()
        if self.hold:
            self._held.append(fut)
        else:
            fut.set_result(None)
        return base, fut

    @property
    def held(self) -> int:
        """How many appends (or barriers) wait to be released."""
        return len(self._held)

    def release(self) -> None:
        for fut in self._held:
            fut.set_result(None)
        self._held.clear()

    def offline(self, partition: int) -> bool:
        return False

    def count(self) -> int:
        return sum(len(v) for v in self.partitions.values())


class FakeWriter:
    def __init__(self) -> None:
        self.calls: list[list[TxnMarker]] = []
        self.answers: list[ErrorCode] = []  # errors to answer for the next calls (then NONE)
        self.gate: asyncio.Event | None = None

    async def write_txn_markers(self, markers: Sequence[TxnMarker]) -> dict[tuple[str, int], ErrorCode]:
        if self.gate is not None:
            await self.gate.wait()
        self.calls.append(list(markers))
        code = self.answers.pop(0) if self.answers else E.NONE
        return {(m.topic, m.partition): code for m in markers}


class Ids:
    def __init__(self) -> None:
        self.next = 1000

    async def allocate(self) -> int:
        self.next += 1
        return self.next - 1


class Harness:
    def __init__(self, log: MemoryLog | None = None, writer: FakeWriter | None = None,
                 clock: Clock | None = None, ids: Ids | None = None, produce_verified: bool = False,
                 **config: int) -> None:
        self.log = log or MemoryLog()
        self.writer = writer or FakeWriter()
        self.clock = clock or Clock()
        self.ids = ids or Ids()
        self.tasks: list[asyncio.Task] = []
        self.topics = dict(TOPICS)
        self.regex_worker = RegexWorker()  # its process starts only if a test lists with a pattern
        self.rt = TransactionCoordinatorRuntime(
            log=self.log, producer_ids=self.ids, markers=self.writer, regex_worker=self.regex_worker,
            config=TransactionCoordinatorConfig(
                num_partitions=PARTITIONS, transaction_version_level=0,
                abort_timed_out_interval_ms=3_600_000, remove_expired_interval_ms=3_600_000,
                partition_verification_enable=produce_verified, **config),
            spawn=self.spawn, clock=self.clock,
            partition_exists=lambda t, p: 0 <= p < self.topics.get(t, 0),
            offsets_partition=lambda g: len(g) % 4, marker_backoff_ms=1)

    def spawn(self, coro, name: str) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.tasks.append(task)
        return task

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.rt.close()
        await self.regex_worker.close()

    def state(self, tid: str) -> TxnState:
        return self.rt.coordinator.metadata(tid).state


def run(coro) -> None:
    asyncio.run(coro)


async def begin(h: Harness, tid: str, partitions=(("t", 0), ("t", 1))) -> tuple[int, int]:
    r = await h.rt.init_producer_id(tid, 60_000)
    assert r.error is E.NONE
    errors = await h.rt.add_partitions(tid, r.producer_id, r.producer_epoch, list(partitions))
    assert set(errors.values()) == {E.NONE}
    return r.producer_id, r.producer_epoch


def test_commit_answers_after_prepare_then_writes_markers_and_completes() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.rt.start()
        pid, epoch = await begin(h, "a")
        assert await h.rt.add_offsets("a", pid, epoch, "grp") is E.NONE
        h.writer.gate = asyncio.Event()
        r = await h.rt.end_txn("a", pid, epoch, commit=True)
        assert r.error is E.NONE and h.state("a") is TxnState.PREPARE_COMMIT  # answered before any marker
        assert (await h.rt.end_txn("a", pid, epoch, commit=True)).error is E.CONCURRENT_TRANSACTIONS
        h.writer.gate.set()
        await h.rt.wait_completions()
        assert h.state("a") is TxnState.COMPLETE_COMMIT
        (markers,) = h.writer.calls
        assert sorted((m.topic, m.partition) for m in markers) == [("__consumer_offsets", 3), ("t", 0), ("t", 1)]
        assert all(m.commit and m.producer_id == pid and m.producer_epoch == epoch for m in markers)
        assert (await h.rt.end_txn("a", pid, epoch, commit=True)).error is E.NONE  # retry of a completed commit
        await h.stop()

    run(scenario())


def test_answers_wait_for_durability() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.rt.start()
        h.log.hold = True
        task = asyncio.ensure_future(h.rt.init_producer_id("a", 60_000))
        await async_wait_until(lambda: h.log.held, what="the producer id's record appended")
        await async_assert_stays(lambda: not task.done(), 0.05, "InitProducerId unanswered before the fsync")
        # a read of the same id waits for the pending append too
        describe = asyncio.ensure_future(h.rt.describe_transactions(["a"]))
        await async_assert_stays(lambda: not describe.done(), 0.05, "DescribeTransactions unanswered")
        h.log.release()
        assert (await task).error is E.NONE
        assert (await describe)[0].state == "Empty"
        await h.stop()

    run(scenario())


def test_restart_completes_prepared_transactions() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        h = Harness(log)
        await h.rt.start()
        pid, epoch = await begin(h, "a")
        pid_b, epoch_b = await begin(h, "b", [("t", 1)])
        h.writer.gate = asyncio.Event()  # markers never get written before the "kill -9"
        assert (await h.rt.end_txn("a", pid, epoch, commit=True)).error is E.NONE
        assert (await h.rt.end_txn("b", pid_b, epoch_b, commit=False)).error is E.NONE
        await h.stop()

        again = Harness(log)
        await again.rt.start()
        await again.rt.wait_completions()
        assert again.state("a") is TxnState.COMPLETE_COMMIT and again.state("b") is TxnState.COMPLETE_ABORT
        written = {(m.transactional_id, m.topic, m.partition, m.commit) for c in again.writer.calls for m in c}
        assert written == {("a", "t", 0, True), ("a", "t", 1, True), ("b", "t", 1, False)}
        await again.stop()
        # and the completions are in the log: a third start has nothing to send
        third = Harness(log)
        await third.rt.start()
        await third.rt.wait_completions()
        assert third.writer.calls == [] and third.state("a") is TxnState.COMPLETE_COMMIT
        await third.stop()

    run(scenario())


def test_timed_out_transaction_is_aborted_and_its_producer_fenced() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.rt.start()
        pid, epoch = await begin(h, "slow")
        r = await h.rt.init_producer_id("quick", 60_000)
        h.clock.now += 60_001
        assert await h.rt.abort_timed_out() == 1
        await h.rt.wait_completions()
        assert h.state("slow") is TxnState.COMPLETE_ABORT and h.state("quick") is TxnState.EMPTY
        assert all(not m.commit and m.producer_epoch == epoch + 1 for m in h.writer.calls[0])
        errors = await h.rt.add_partitions("slow", pid, epoch, [("t", 0)])
        assert errors == {("t", 0): E.PRODUCER_FENCED}
        assert (await h.rt.end_txn("slow", pid, epoch, commit=True)).error is E.PRODUCER_FENCED
        assert r.error is E.NONE
        await h.stop()

    run(scenario())


def test_periodic_abort_runs_in_the_background() -> None:
    async def scenario() -> None:
        h = Harness()
        h.rt._abort_interval_s = 0.01
        await h.rt.start()
        await begin(h, "slow")
        h.clock.now += 60_001
        for _ in range(200):
            await asyncio.sleep(0.005)
            if h.state("slow") is TxnState.COMPLETE_ABORT:
                break
        assert h.state("slow") is TxnState.COMPLETE_ABORT
        await h.stop()

    run(scenario())


def test_idle_ids_expire_and_the_tombstones_are_durable() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        h = Harness(log, transactional_id_expiration_ms=1000)
        await h.rt.start()
        first = await h.rt.init_producer_id("idle", 60_000)
        await begin(h, "busy")
        h.clock.now += 1001
        assert await h.rt.expire_transactional_ids() == 1  # an ongoing transaction never expires
        assert h.rt.coordinator.metadata("idle") is None
        await h.stop()
        again = Harness(log, ids=h.ids)
        await again.rt.start()
        assert again.rt.coordinator.metadata("idle") is None and again.state("busy") is TxnState.ONGOING
        r = await again.rt.init_producer_id("idle", 60_000)
        assert r.producer_id != first.producer_id and r.producer_epoch == 0
        await again.stop()

    run(scenario())


def test_a_failed_append_answers_an_error_and_keeps_the_logged_state() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        h = Harness(log)
        await h.rt.start()
        pid, epoch = await begin(h, "a", [("t", 0)])
        before = log.count()
        log.fail_next = True
        errors = await h.rt.add_partitions("a", pid, epoch, [("t", 1)])
        assert errors == {("t", 1): E.COORDINATOR_NOT_AVAILABLE}
        m = h.rt.coordinator.metadata("a")
        assert m.state is TxnState.ONGOING and {tp.partition for tp in m.topic_partitions} == {0}  # reloaded
        assert log.count() == before
        log.fail_next = True
        assert (await h.rt.end_txn("a", pid, epoch, commit=False)).error is E.COORDINATOR_NOT_AVAILABLE
        assert h.state("a") is TxnState.ONGOING
        assert (await h.rt.end_txn("a", pid, epoch, commit=False)).error is E.NONE
        await h.rt.wait_completions()
        assert h.state("a") is TxnState.COMPLETE_ABORT
        await h.stop()

    run(scenario())


def test_marker_errors_are_retried_and_deleted_partitions_count_as_written() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.rt.start()
        pid, epoch = await begin(h, "a")
        h.writer.answers = [E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR]
        assert (await h.rt.end_txn("a", pid, epoch, commit=True)).error is E.NONE
        await h.rt.wait_completions()
        assert len(h.writer.calls) == 3 and h.state("a") is TxnState.COMPLETE_COMMIT

        pid, epoch = await begin(h, "b")
        h.writer.calls.clear()
        h.writer.answers = [E.UNKNOWN_TOPIC_OR_PARTITION] * 100
        assert (await h.rt.end_txn("b", pid, epoch, commit=False)).error is E.NONE
        await async_wait_until(lambda: len(h.writer.calls) >= 2, what="the markers retried")
        assert h.state("b") is TxnState.PREPARE_ABORT  # retrying
        del h.topics["t"]  # the topic is deleted: nothing left to mark
        await h.rt.wait_completions()
        assert h.state("b") is TxnState.COMPLETE_ABORT
        await h.stop()

    run(scenario())


def test_verify_partitions() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.rt.start()
        pid, epoch = await begin(h, "a", [("t", 0)])
        assert await h.rt.verify_partitions("a", pid, epoch, [("t", 0), ("t", 1)]) == {
            ("t", 0): E.NONE, ("t", 1): E.TRANSACTION_ABORTABLE}
        assert await h.rt.verify_partitions("a", pid, epoch + 1, [("t", 0)]) == {("t", 0): E.PRODUCER_FENCED}
        assert {tp.partition for tp in h.rt.coordinator.metadata("a").topic_partitions} == {0}  # nothing added
        await h.stop()

    run(scenario())


@pytest.mark.parametrize("produce_verified", [True, False])
def test_a_producers_add_partitions_is_answered_before_its_fsync_only_when_produce_verifies(
        produce_verified: bool) -> None:
    """With the produce path verifying partitions, a producer's AddPartitionsToTxn is answered once appended, and
    the verification of its first batch waits until the record is durable; without verification the answer
    itself waits."""
    async def scenario() -> None:
        h = Harness(produce_verified=produce_verified)
        await h.rt.start()
        r = await h.rt.init_producer_id("a", 60_000)
        h.log.hold = True
        add = asyncio.ensure_future(h.rt.add_partitions("a", r.producer_id, r.producer_epoch, [("t", 0)],
                                                        from_producer=True))
        await async_wait_until(lambda: h.log.held, what="the partition's record appended")
        if produce_verified:
            await async_wait_until(add.done, what="AddPartitionsToTxn answered once appended")
        else:
            await async_assert_stays(lambda: not add.done(), 0.05, "AddPartitionsToTxn unanswered before the fsync")
        verify = asyncio.ensure_future(h.rt.verify_partitions("a", r.producer_id, r.producer_epoch, [("t", 0)]))
        # the record adding the partition is not durable yet
        await async_assert_stays(lambda: not verify.done(), 0.05, "the verification waiting for the fsync")
        h.log.release()
        assert set((await add).values()) == {E.NONE}
        assert await verify == {("t", 0): E.NONE}
        await h.stop()

    run(scenario())


def test_list_transactions_pattern() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.rt.start()
        for tid in ("app-1", "app-2", "other"):
            await h.rt.init_producer_id(tid, 60_000)
        r = await h.rt.list_transactions(transactional_id_pattern="app-.")
        assert sorted(t.transactional_id for t in r.transactions) == ["app-1", "app-2"]
        assert len((await h.rt.list_transactions(transactional_id_pattern="")).transactions) == 3
        with pytest.raises(RegexError, match="missing"):
            await h.rt.list_transactions(transactional_id_pattern="(")
        # RE2's syntax: lookaround is refused, \z accepted; a backtracking pathology is linear.
        with pytest.raises(RegexError):
            await h.rt.list_transactions(transactional_id_pattern="(?=app)app-1")
        assert [t.transactional_id for t in (await h.rt.list_transactions(
            transactional_id_pattern=r"app-1\z")).transactions] == ["app-1"]
        assert (await h.rt.list_transactions(transactional_id_pattern="app(.*.*)*X")).transactions == []
        await h.stop()

    run(scenario())


def _marker(topic: str, partition: int) -> TxnMarker:
    return TxnMarker("a", topic, partition, 1, 0, True, 0, 0)


def test_routed_writer_and_fenced_markers() -> None:
    async def scenario() -> None:
        data, offsets = FakeWriter(), FakeWriter()
        routed = RoutedMarkerWriter(data, offsets)
        result = await routed.write_txn_markers([_marker("t", 0), _marker("__consumer_offsets", 2)])
        assert result == {("t", 0): E.NONE, ("__consumer_offsets", 2): E.NONE}
        assert [[m.topic for m in c] for c in data.calls] == [["t"]]
        assert [[m.topic for m in c] for c in offsets.calls] == [["__consumer_offsets"]]
        data.answers = [E.TRANSACTION_COORDINATOR_FENCED]
        with pytest.raises(MarkersFenced):
            await write_until_done(data, [_marker("t", 0)], partition_exists=lambda t, p: True, backoff_ms=1)

    run(scenario())


def test_the_next_transaction_waits_briefly_for_the_previous_ones_markers() -> None:
    """AddPartitionsToTxn right after EndTxn: answered once the previous transaction is complete when that takes
    less than COMPLETION_WAIT_S (instead of CONCURRENT_TRANSACTIONS and the client's 20 ms retry), and
    CONCURRENT_TRANSACTIONS, as Kafka, when the markers take longer."""
    async def scenario() -> None:
        h = Harness()
        await h.rt.start()
        pid, epoch = await begin(h, "a")
        h.writer.gate = asyncio.Event()
        assert (await h.rt.end_txn("a", pid, epoch, commit=True)).error is E.NONE
        asyncio.get_running_loop().call_later(0.01, h.writer.gate.set)  # markers written 10 ms later
        errors = await h.rt.add_partitions("a", pid, epoch, [("t", 0)])
        assert set(errors.values()) == {E.NONE} and h.state("a") is TxnState.ONGOING

        h.writer.gate = asyncio.Event()  # the next markers are stuck
        assert (await h.rt.end_txn("a", pid, epoch, commit=False)).error is E.NONE
        errors = await h.rt.add_partitions("a", pid, epoch, [("t", 1)])
        assert set(errors.values()) == {E.CONCURRENT_TRANSACTIONS} and h.state("a") is TxnState.PREPARE_ABORT
        h.writer.gate.set()
        await h.rt.wait_completions()
        await h.stop()

    run(scenario())
