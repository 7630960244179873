"""The coordinator runtime (Kafka's CoordinatorRuntime): one way to load, write, reload and time a coordinator.

It hosts one shard (`broker.coordinator.shard.CoordinatorShard`: the group, the share or the transaction
coordinator) over the partitions of its internal topic, read and written through a `CoordinatorLoader` and a
`PartitionWriter` (a `CoordinatorTopic`: `broker.coordinator.coordinator_log.CoordinatorLog` is both):

- loading: `load(partitions)` replays each partition's records, transaction markers included, into the shard in
  offset order; the partitions are LOADING, then ACTIVE.
- writing: an operation's records are appended in the loop step of the operation that produced them, one batch
  per partition, so the log's order is memory's; `commit` waits until they are durable (fsynced, or written when
  the log defers its fsync), and an answer without records waits for its partitions' earlier appends (a
  barrier), since the state it shows may still be on its way to the disk. The sans-IO coordinators apply a
  record as they build it, through the same replay a load uses (`replay=False`); records a shard has not
  applied are replayed into it once their append succeeded (`replay=True`: write, then apply), so a refused
  write applies nothing.
- reloading: a refused append, or a log that no longer ends where this runtime last wrote (truncated, or
  written by someone else), means memory may not match the log: the shard's `reload_scope` is rebuilt from the
  log and the write answered REFUSED. With the log directory offline nothing can be read back: the partitions
  are FAILED (the broker is stopping; a restart replays what is on disk).
- timers: `schedule(PeriodicTask)` runs the coordinator's periodic work until `close()`.

Kafka replays an operation's records into timeline data structures before appending them and reverts them to
the last committed offset when a write fails; Shoal has no timeline structures, so it rebuilds from the log.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

import structlog

from protocol.errors import ErrorCode

from .coordinator_log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, AppendFailed, MarkerApply, RecordApply
from .periodic import PeriodicTask
from .shard import CoordinatorShard

log = structlog.get_logger(__name__)

KeyValue = tuple[bytes, bytes | None]
Spawn = Callable[[Coroutine[Any, Any, Any], str], object]
LoadResultT = TypeVar("LoadResultT")


class CoordinatorLoader(Protocol):
    """Reads an internal topic's partitions back (Kafka's CoordinatorLoader)."""

    @property
    def num_partitions(self) -> int: ...

    def replay(self, partition: int, apply: RecordApply, on_marker: MarkerApply | None = None) -> int: ...

    def end_offset(self, partition: int) -> int: ...


class PartitionWriter(Protocol):
    """Appends to an internal topic's partitions and makes them durable (Kafka's PartitionWriter)."""

    def append_at(self, partition: int, records: Sequence[KeyValue], *, producer_id: int = NO_PRODUCER_ID,
                  producer_epoch: int = NO_PRODUCER_EPOCH) -> tuple[int, asyncio.Future[None]]: ...

    def append_marker(self, partition: int, *, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int) -> tuple[ErrorCode, asyncio.Future[None] | None]: ...

    def barrier_future(self, partition: int) -> asyncio.Future[None]: ...

    async def barrier(self, partitions: Iterable[int]) -> None: ...

    def offline(self, partition: int) -> bool: ...


class CoordinatorTopic(CoordinatorLoader, PartitionWriter, Protocol):
    """Both sides of one internal topic."""


class CoordinatorState(Enum):
    """A partition's state in the runtime (Kafka's CoordinatorState)."""

    INITIAL = "initial"
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"  # its log directory is offline: nothing is read, written or answered from it
    CLOSED = "closed"


class WriteOutcome(Enum):
    COMMITTED = "committed"
    OFFLINE = "offline"  # a partition's log directory is offline (its partitions are FAILED)
    REFUSED = "refused"  # the log refused the append, or no longer matched memory: reloaded from the log
    NOT_DURABLE = "not durable"  # appended, but the wait for durability failed


class CoordinatorWriteError(Exception):
    """An append did not happen as the shard's memory assumes; `outcome` says what became of it."""

    def __init__(self, outcome: WriteOutcome, partition: int) -> None:
        super().__init__(f"partition {partition}: {outcome.value}")
        self.outcome = outcome
        self.partition = partition


@dataclass(frozen=True)
class LoadSummary(Generic[LoadResultT]):
    """A load: its partitions, how many records were replayed, how long it took and what it left to do."""

    partitions: tuple[int, ...]
    records: int
    seconds: float
    result: LoadResultT


@dataclass(frozen=True)
class Appended:
    """Records appended to `partition` from `base_offset`; `durable` is done once they are as durable as an
    answer needs."""

    partition: int
    base_offset: int
    durable: asyncio.Future[None]


class CoordinatorRuntime(Generic[LoadResultT]):
    def __init__(self, *, log: CoordinatorTopic, shard: CoordinatorShard[LoadResultT], spawn: Spawn, name: str,
                 on_reloaded: Callable[[LoadSummary[LoadResultT]], object] | None = None,
                 on_failed: Callable[[Collection[int]], object] | None = None) -> None:
        """`name` says what the records are in log lines ("transaction state": "transaction state not
        durable"). `on_reloaded(summary)` runs after partitions were rebuilt from the log (their load's result
        is the caller's to act on); `on_failed(partitions)` when partitions went FAILED. `spawn(coro, name)`
        runs the timers for the life of the broker."""
        self._log = log
        self._shard = shard
        self._spawn = spawn
        self._name = name
        self._on_reloaded = on_reloaded
        self._on_failed = on_failed
        self._states: dict[int, CoordinatorState] = {}
        self._next_offset: dict[int, int] = {}  # partition -> where the log ends after what this runtime wrote
        self._timers: list[PeriodicTask] = []

    @property
    def num_partitions(self) -> int:
        return self._log.num_partitions

    def state(self, partition: int) -> CoordinatorState:
        return self._states.get(partition, CoordinatorState.INITIAL)

    @property
    def active(self) -> bool:
        """Every partition loaded and none failed or closed."""
        return all(self.state(p) is CoordinatorState.ACTIVE for p in range(self._log.num_partitions))

    # --- loading -----------------------------------------------------------------------------------------------
    def load(self, partitions: Iterable[int]) -> LoadSummary[LoadResultT]:
        """Rebuild `partitions` from their logs (on the loop, as the coordinators always have: their replay is
        the shard's code, which runs on the loop). The shard completes the load even if the replay raises."""
        started = time.monotonic()
        wanted = tuple(partitions)
        for p in wanted:
            self._states[p] = CoordinatorState.LOADING
        shard = self._shard
        shard.load_begin(wanted)
        count = 0
        try:
            for p in wanted:
                count += self._log.replay(p, functools.partial(shard.replay, p), self._marker_replayer(p))
                self._next_offset[p] = self._log.end_offset(p)
        except BaseException:
            for p in wanted:
                self._states[p] = CoordinatorState.FAILED
            shard.load_complete(wanted)
            raise
        result = shard.load_complete(wanted)
        for p in wanted:
            self._states[p] = CoordinatorState.ACTIVE
        return LoadSummary(wanted, count, time.monotonic() - started, result)

    def _marker_replayer(self, partition: int) -> MarkerApply:
        replay = self._shard.replay_end_transaction_marker

        def apply(producer_id: int, producer_epoch: int, commit: bool, _coordinator_epoch: int) -> None:
            replay(partition, producer_id, producer_epoch, commit)

        return apply

    def reload(self, partition: int) -> LoadSummary[LoadResultT] | None:
        """Memory may no longer match `partition`'s log: rebuild the shard's reload scope from the logs, unless
        a log directory is offline (then the partitions are FAILED and None is returned)."""
        scope = tuple(self._shard.reload_scope(partition))
        offline = [p for p in scope if self._log.offline(p)]
        if offline:
            self._fail(offline)
            return None
        summary = self.load(scope)
        if self._on_reloaded is not None:
            self._on_reloaded(summary)
        return summary

    def _fail(self, partitions: Iterable[int]) -> None:
        failed = [p for p in partitions if self._states.get(p) is not CoordinatorState.FAILED]
        for p in failed:
            self._states[p] = CoordinatorState.FAILED
        if failed and self._on_failed is not None:
            self._on_failed(failed)

    def _check_online(self, partitions: Iterable[int]) -> None:
        offline = [p for p in partitions if self._log.offline(p)]
        if offline:
            self._fail(offline)
            raise CoordinatorWriteError(WriteOutcome.OFFLINE, offline[0])

    # --- writing -----------------------------------------------------------------------------------------------
    def append(self, partition: int, records: Sequence[KeyValue], *, producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = NO_PRODUCER_EPOCH, replay: bool = False) -> Appended:
        """Append `records` to `partition` now, as one batch (transactional with a producer id); without records,
        the barrier of the partition's earlier appends. `replay`: the shard has not applied them yet: it
        replays them once they are appended. Raises CoordinatorWriteError (after reloading, or failing, the
        partitions) if the log did not take them as memory expects."""
        try:
            base, durable = self._log.append_at(partition, records, producer_id=producer_id,
                                                producer_epoch=producer_epoch)
        except AppendFailed:
            self._refused(partition)
            raise CoordinatorWriteError(WriteOutcome.REFUSED, partition) from None
        if not records:
            return Appended(partition, base, durable)
        expected = self._next_offset.get(partition)
        self._next_offset[partition] = base + len(records)
        if replay:
            apply = self._shard.replay
            for i, (key, value) in enumerate(records):
                apply(partition, base + i, producer_id, producer_epoch, key, value)
        if expected is not None and base != expected:
            self._out_of_sync(partition, expected, base)
        return Appended(partition, base, durable)

    def _refused(self, partition: int) -> None:
        if self._log.offline(partition):
            self._fail([partition])
        else:
            self.reload(partition)

    def _out_of_sync(self, partition: int, expected: int, found: int) -> None:
        """The log does not end where this runtime left it: it was truncated or written by someone else."""
        log.error("coordinator state out of sync with its log: reloading", coordinator=self._name,
                  partition=partition, expected_offset=expected, offset=found)
        self.reload(partition)
        raise CoordinatorWriteError(WriteOutcome.REFUSED, partition)

    def append_all(self, records: Mapping[int, Sequence[KeyValue]], wait_for: Iterable[int] = (), *,
                   replay: bool = False,
                   on_appended: Callable[[Appended, Sequence[KeyValue]], object] | None = None) -> list[Appended]:
        """`append` the records of each partition, in partition order, and a barrier for each partition of
        `wait_for` without records. No partition is written if one is offline. `on_appended(appended,
        records)` follows each append."""
        partitions = set(records).union(wait_for)
        self._check_online(partitions)
        out = []
        for p in sorted(partitions):
            batch = records.get(p, ())
            appended = self.append(p, batch, replay=replay)
            if on_appended is not None:
                on_appended(appended, batch)
            out.append(appended)
        return out

    async def commit(self, appended: Iterable[Appended]) -> WriteOutcome:
        """Wait until the appends are durable: COMMITTED, or NOT_DURABLE (logged) if a wait failed."""
        appended = list(appended)
        pending = [a for a in appended if not _succeeded(a.durable)]
        if not pending:
            return WriteOutcome.COMMITTED  # written with a deferred fsync: nothing to wait in
        try:
            for a in pending:
                await a.durable
        except Exception:  # noqa: BLE001 - a failed fsync is answered, never raised into the caller
            log.exception(f"{self._name} not durable")
            offline = [a.partition for a in appended if self._log.offline(a.partition)]
            if offline:
                self._fail(offline)
            return WriteOutcome.NOT_DURABLE
        return WriteOutcome.COMMITTED

    async def write(self, records: Mapping[int, Sequence[KeyValue]], wait_for: Iterable[int] = (), *,
                    replay: bool = False,
                    on_appended: Callable[[Appended, Sequence[KeyValue]], object] | None = None) -> WriteOutcome:
        """`append_all`, then `commit`: COMMITTED once every record is durable and the earlier appends of the
        `wait_for` partitions too."""
        try:
            appended = self.append_all(records, wait_for, replay=replay, on_appended=on_appended)
        except CoordinatorWriteError as e:
            return e.outcome
        return await self.commit(appended)

    def append_end_transaction_marker(self, partition: int, *, producer_id: int, producer_epoch: int,
                                      commit: bool, coordinator_epoch: int) -> tuple[ErrorCode, Appended | None]:
        """Append the COMMIT/ABORT marker ending `producer_id`'s transaction on `partition` and replay it into
        the shard: NONE and the append, or the error of a marker the partition refused (the shard is then left
        as it was). Raises CoordinatorWriteError as `append` does."""
        expected = self._next_offset.get(partition)
        if expected is not None and (found := self._log.end_offset(partition)) != expected:
            self._out_of_sync(partition, expected, found)
        try:
            code, durable = self._log.append_marker(partition, producer_id=producer_id,
                                                    producer_epoch=producer_epoch, commit=commit,
                                                    coordinator_epoch=coordinator_epoch)
        except AppendFailed:
            self._refused(partition)
            raise CoordinatorWriteError(WriteOutcome.REFUSED, partition) from None
        if durable is None:
            return code, None
        end = self._log.end_offset(partition)
        self._next_offset[partition] = end
        self._shard.replay_end_transaction_marker(partition, producer_id, producer_epoch, commit)
        return code, Appended(partition, end - 1, durable)

    def barrier_future(self, partition: int) -> asyncio.Future[None]:
        """Done once what was appended to `partition` is as durable as an append's answer."""
        return self._log.barrier_future(partition)

    async def barrier(self, partitions: Iterable[int]) -> None:
        """Wait until everything appended so far to `partitions` is fsynced (a deferred fsync is done now)."""
        await self._log.barrier(partitions)

    # --- timers ------------------------------------------------------------------------------------------------
    def schedule(self, task: PeriodicTask) -> PeriodicTask:
        """Run `task` (spawned under its name) until `close()`."""
        self._timers.append(task)
        self._spawn(task.run(), task.name)
        return task

    async def close(self) -> None:
        """Stop the timers; the partitions are CLOSED."""
        for task in self._timers:
            task.stop()
        self._timers.clear()
        for p in self._states:
            self._states[p] = CoordinatorState.CLOSED


def _succeeded(fut: asyncio.Future[None]) -> bool:
    return fut.done() and not fut.cancelled() and fut.exception() is None
