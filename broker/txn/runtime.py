"""The transaction coordinator at run time: component `transaction_coordinator`.

Hosts the sans-IO TransactionCoordinator on the coordinator runtime (broker.coordinator: its shard is
broker.txn.shard) over `__transaction_state`, with the producer id allocator and a TxnMarkerWriter:

- start: every partition is loaded by replay; transactions the log left in PrepareCommit/PrepareAbort get their
  markers resent and are completed, so nothing hangs after kill -9;
- each operation's records are written by the runtime in the loop step of the coordinator call (log order is
  memory order) and answered once durable; an answer without records waits for its partition's pending
  appends (the state it shows may still be in flight);
- EndTxn (TV1, as Kafka) answers once PrepareCommit/PrepareAbort is durable; the markers are then written in
  the background (retried as Kafka until written) and CompleteCommit/CompleteAbort is logged;
- an append that fails leaves memory ahead of the log: the runtime reloads the partition from the log (whose
  prepared transactions are then resent) and the request is answered COORDINATOR_NOT_AVAILABLE, so the client
  retries;
- timers: timed-out transactions are aborted every `transaction.abort.timed.out.transaction.cleanup.interval.ms`,
  idle transactional ids expired every `transaction.remove.expired.transaction.cleanup.interval.ms`.

It also implements TxnPartitionVerifier (KIP-890 part 1) for the produce path.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.coordinator.periodic import PeriodicTask
from broker.coordinator.runtime import (
    Appended,
    CoordinatorRuntime,
    CoordinatorTopic,
    CoordinatorWriteError,
    KeyValue,
    LoadSummary,
    WriteOutcome,
)
from broker.features import finalized_transaction_version
from broker.linear_regex import RegexError, RegexWorker
from protocol.errors import ErrorCode

from .config import TransactionCoordinatorConfig
from .coordinator import TransactionCoordinator
from .markers import MarkersFenced, TopicPartitionKey, TxnMarkerWriter, write_until_done
from .metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition
from .records import Record
from .results import ListTransactionsResult, TransactionDescription, TxnMarker, TxnResult
from .shard import TransactionCoordinatorShard
from .state import TV_0, TV_2

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.config import BrokerConfig

log = structlog.get_logger(__name__)

# How long AddPartitionsToTxn/AddOffsetsToTxn wait for the previous transaction of their id to complete
# before answering CONCURRENT_TRANSACTIONS (see TransactionCoordinatorRuntime._after_completion).
COMPLETION_WAIT_S = 0.05
TOPIC = "__transaction_state"
# Answer of an operation whose records could not be made durable (Kafka maps append failures of the
# transaction log to COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR: both make the client look up and retry).
NOT_DURABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE


class ProducerIdSource(Protocol):
    async def allocate(self) -> int: ...


Spawn = Callable[[Coroutine[Any, Any, Any], str], Any]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _log_not_durable(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("transaction state not durable", exc_info=fut.exception())


class TransactionCoordinatorRuntime:
    def __init__(self, *, log: CoordinatorTopic, producer_ids: ProducerIdSource, markers: TxnMarkerWriter,
                 config: TransactionCoordinatorConfig, spawn: Spawn, regex_worker: RegexWorker,
                 partition_exists: Callable[[str, int], bool],
                 offsets_partition: Callable[[str], int],
                 clock: Callable[[], int] = wall_clock_ms, marker_backoff_ms: int = 100) -> None:
        """`partition_exists(topic, partition)`: the metadata check of AddPartitionsToTxn and of marker retries.
        `config.partition_verification_enable`: the produce path verifies transactional batches with this
        coordinator (KIP-890 part 1).
        `offsets_partition(group_id)`: the group's `__consumer_offsets` partition (AddOffsetsToTxn).
        `spawn(coro, name)`: run a background task for the life of the broker (cancelled on stop).
        `regex_worker`: compiles and matches ListTransactions' transactional id pattern, away from the loop."""
        self._regex_worker = regex_worker
        self._producer_ids = producer_ids
        self._markers = markers
        self._spawn = spawn
        self.partition_exists = partition_exists
        self._offsets_partition = offsets_partition
        self._clock = clock
        self._abort_interval_s = config.abort_timed_out_interval_ms / 1000
        self._expire_interval_s = config.remove_expired_interval_ms / 1000
        self._marker_backoff_ms = marker_backoff_ms
        self._produce_verified = config.partition_verification_enable
        self.coordinator = TransactionCoordinator(config, clock=clock, partition_exists=partition_exists)
        self.runtime: CoordinatorRuntime[TxnResult] = CoordinatorRuntime(
            log=log, shard=TransactionCoordinatorShard(self.coordinator), spawn=spawn, name="transaction state",
            on_reloaded=self._reloaded)
        # (transactional id, producer id, epoch, coordinator epoch) -> the task writing its markers
        self._completing: dict[tuple[str, int, int, int], asyncio.Future[None]] = {}
        # ... and a future done once that transaction is complete in memory with its record appended (its
        # durability is awaited by whatever answers next on that partition), or its completion abandoned
        self._settled: dict[tuple[str, int, int, int], asyncio.Future[None]] = {}
        self.loaded = False
        self._stop = asyncio.Event()

    # --- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        started = time.monotonic()
        total = 0
        for p in range(self.coordinator.config.num_partitions):
            summary = self.runtime.load([p])
            total += summary.records
            result = summary.result
            if result.markers:
                # Kafka logs the transactions it completes after a load; operators (and tests) see a crash between
                # EndTxn and the markers being finished here.
                log.info("completing prepared transactions after load", partition=p,
                         transactional_ids=sorted({m.transactional_id for m in result.markers}))
            await self._apply_background(result, "transactions completed at load")
        self.loaded = True
        log.info("transaction coordinator loaded", partitions=self.coordinator.config.num_partitions,
                 records=total, transactional_ids=len(self.coordinator.transactional_ids()),
                 seconds=round(time.monotonic() - started, 3))
        for name, work, interval_s in (("txn-abort-timed-out", self.abort_timed_out, self._abort_interval_s),
                                       ("txn-expire-ids", self.expire_transactional_ids, self._expire_interval_s)):
            self.runtime.schedule(PeriodicTask(
                name, work, every_s=interval_s, failure_event="transaction coordinator periodic task failed",
                failure_fields={"task": work.__name__}))

    async def close(self) -> None:
        self._stop.set()
        await self.runtime.close()
        tasks = [t for t in self._completing.values() if not t.done()]
        for t in tasks:
            t.cancel()
        # stopping: the log resends their markers on the next start
        await asyncio.gather(*tasks, return_exceptions=True)

    def set_transaction_version(self, level: int) -> None:
        """The finalized transaction.version changed (UpdateFeatures, or the journaled level at start): the log
        value version and the version of the aborts the coordinator starts itself follow it."""
        config = self.coordinator.config
        if config.transaction_version_level != level:
            self.coordinator.config = replace(config, transaction_version_level=level)

    # --- durability --------------------------------------------------------------------------------------------
    async def _commit(self, records: Iterable[Record], transactional_ids: Iterable[str] = ()) -> ErrorCode:
        """Make `records` durable, after the earlier appends of the ids' partitions. NONE or the error to answer.
        On a failed append the runtime reloads the partition from the log (memory was ahead of it)."""
        return await self._durable(self._append(records, transactional_ids))

    async def _durable(self, appended: list[Appended] | None) -> ErrorCode:
        if appended is None or await self.runtime.commit(appended) is not WriteOutcome.COMMITTED:
            return NOT_DURABLE
        return ErrorCode.NONE

    def _append(self, records: Iterable[Record], transactional_ids: Iterable[str] = ()) -> list[Appended] | None:
        """Append `records` now (one batch per partition), done when they, and the earlier appends of the ids'
        partitions, are durable. None when a partition cannot take them (reloaded if need be)."""
        by_partition: dict[int, list[KeyValue]] = {}
        for r in records:
            by_partition.setdefault(r.partition, []).append((r.key, r.value))
        wait_for = {self.coordinator.partition_for(t) for t in transactional_ids if t}
        try:
            return self.runtime.append_all(by_partition, wait_for)
        except CoordinatorWriteError:
            return None

    def _reloaded(self, summary: LoadSummary[TxnResult]) -> None:
        """The runtime rebuilt partitions from the log: resend the markers of the transactions left prepared."""
        for partition in summary.partitions:
            log.warning("reloading transaction state partition after a failed append", partition=partition)
        self._spawn(self._apply_background(summary.result, "transactions completed after reload"), "txn-reload")

    async def _apply_background(self, result: TxnResult, what: str) -> None:
        """Records and markers of a coordinator-started operation (load, timeout abort): durable, then markers."""
        if result.records and await self._commit(result.records) is not ErrorCode.NONE:
            return  # the partition was reloaded: its prepared transactions are resent from there
        if result.records:
            log.info(what, records=len(result.records))
        self._send_markers(result.markers)

    # --- markers -----------------------------------------------------------------------------------------------
    def _send_markers(self, markers: Sequence[TxnMarker]) -> None:
        by_txn: dict[tuple[str, int, int, int], list[TxnMarker]] = {}
        for m in markers:
            by_txn.setdefault((m.transactional_id, m.producer_id, m.producer_epoch, m.coordinator_epoch),
                              []).append(m)
        for key, ms in by_txn.items():
            running = self._completing.get(key)
            if running is not None and not running.done():
                continue
            settled = self._settled[key] = asyncio.get_running_loop().create_future()
            task = asyncio.ensure_future(self._complete(key, ms, settled))
            self._completing[key] = task
            task.add_done_callback(functools.partial(self._completion_done, key))

    def _completion_done(self, key: tuple[str, int, int, int], task: asyncio.Future[None]) -> None:
        if self._completing.get(key) is task:
            del self._completing[key]
            settled = self._settled.pop(key)
            if not settled.done():
                settled.set_result(None)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction completion failed", transactional_id=key[0], exc_info=task.exception())

    def _still_prepared(self, tid: str, producer_id: int, epoch: int) -> bool:
        m = self.coordinator.metadata(tid)
        return (m is not None and m.state.is_prepare and m.producer_id == producer_id
                and m.producer_epoch == epoch)

    async def _complete(self, key: tuple[str, int, int, int], markers: list[TxnMarker],
                        settled: asyncio.Future[None]) -> None:
        tid, producer_id, epoch, coordinator_epoch = key
        try:
            written = await write_until_done(
                self._markers, markers, partition_exists=self.partition_exists,
                still_wanted=lambda: not self._stop.is_set() and self._still_prepared(tid, producer_id, epoch),
                backoff_ms=self._marker_backoff_ms)
        except MarkersFenced as e:
            log.warning("transaction markers fenced; not completing", transactional_id=tid, reason=str(e))
            return
        if not written:
            return
        result = self.coordinator.complete_transaction(tid, producer_id, epoch, coordinator_epoch)
        if result.error is not ErrorCode.NONE:
            log.info("transaction completion skipped", transactional_id=tid, error=result.error.name)
            return
        appended = self._append(result.records)
        settled.set_result(None)  # complete in memory and appended: the id's next transaction may go on
        await self._durable(appended)

    async def wait_completions(self) -> None:
        """Wait until no marker task is running (tests, orderly stop)."""
        while self._completing:
            await asyncio.gather(*list(self._completing.values()), return_exceptions=True)

    # --- operations --------------------------------------------------------------------------------------------
    def _abort_timed_out_with_new_id(self, tid: str, new_pid: int | None) -> TxnResult:
        return self.coordinator.abort_timed_out_transaction(tid, new_producer_id=new_pid)

    async def _with_producer_id(self, op: Callable[[int | None], TxnResult]) -> TxnResult:
        new_pid: int | None = None
        while True:
            result = op(new_pid)
            if not result.need_producer_id:
                return result
            new_pid = await self._producer_ids.allocate()

    async def _finish(self, tid: str, result: TxnResult) -> TxnResult:
        """Make the result's records durable, then start its markers; the answer is the result (or NOT_DURABLE)."""
        code = await self._commit(result.records, [tid])
        if code is not ErrorCode.NONE:
            return TxnResult(code)
        self._send_markers(result.markers)
        return result

    async def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                               producer_id: int = NO_PRODUCER_ID,
                               producer_epoch: int = NO_PRODUCER_EPOCH) -> TxnResult:
        result = await self._with_producer_id(lambda new_pid: self.coordinator.init_producer_id(
            transactional_id, transaction_timeout_ms, producer_id, producer_epoch, new_producer_id=new_pid))
        return await self._finish(transactional_id, result)

    async def _after_completion(self, transactional_id: str) -> None:
        """Wait (at most COMPLETION_WAIT_S) for the markers of `transactional_id`'s previous transaction.

        A producer starts its next transaction as soon as EndTxn is answered, while the markers are still being
        written: Kafka answers that AddPartitionsToTxn/AddOffsetsToTxn CONCURRENT_TRANSACTIONS at once, and the
        clients retry after 20 ms (librdkafka's and the Java producer's fixed backoff), which costs more than
        the completion itself here (markers and their fsyncs: a few ms). Holding the request briefly instead
        answers it as soon as the previous transaction is complete; past the bound, Kafka's answer."""
        running = [f for key, f in self._settled.items() if key[0] == transactional_id and not f.done()]
        if running:
            await asyncio.wait(running, timeout=COMPLETION_WAIT_S)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Sequence[TopicPartitionKey], *, verify_only: bool = False,
                             client_transaction_version: int = TV_0,
                             from_producer: bool = False) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn for one transaction. `from_producer`: a producer's own request (v0-3), which is
        answered once its record is appended when the produce path verifies partitions (see below)."""
        if not verify_only:
            await self._after_completion(transactional_id)
        result = self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                                 verify_only=verify_only,
                                                 client_transaction_version=client_transaction_version)
        if from_producer and self._produce_verified and result.records:
            # The partitions' first transactional batch is verified before it is appended, and a verification
            # answers only once the earlier appends of the id's partition are durable: the data can never be
            # durable before the record adding its partition, so the producer need not wait for that fsync here
            # (it overlaps with the producer's next steps). If the record is lost, the produce is refused.
            appended = self._append(result.records, [transactional_id])
            if appended is None:
                return dict.fromkeys(result.errors, NOT_DURABLE)
            for a in appended:
                a.durable.add_done_callback(_log_not_durable)
            return result.errors
        code = await self._commit(result.records, [transactional_id])
        if code is not ErrorCode.NONE:
            return dict.fromkeys(result.errors, code)
        return result.errors

    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Sequence[TopicPartitionKey], *,
                                add: bool = False) -> dict[TopicPartitionKey, ErrorCode]:
        """TxnPartitionVerifier: verify only (KIP-890 part 1), or with `add` add them to the transaction as a TV2
        client's AddPartitionsToTxn would (Produce v12, TxnOffsetCommit v5: Kafka's `addPartition` operation)."""
        errors = await self.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                           verify_only=not add,
                                           client_transaction_version=TV_2 if add else TV_0)
        return {(tp.topic, tp.partition): code for tp, code in errors.items()}

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> ErrorCode:
        offsets = ("__consumer_offsets", self._offsets_partition(group_id))
        await self._after_completion(transactional_id)
        result = self.coordinator.add_offsets(transactional_id, producer_id, producer_epoch, offsets)
        return (await self._finish(transactional_id, result)).error

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                      client_transaction_version: int = TV_0) -> TxnResult:
        result = await self._with_producer_id(lambda new_pid: self.coordinator.end_txn(
            transactional_id, producer_id, producer_epoch, commit, client_transaction_version,
            new_producer_id=new_pid))
        return await self._finish(transactional_id, result)

    async def describe_transactions(self, transactional_ids: Sequence[str]) -> list[TransactionDescription]:
        await self._commit((), transactional_ids)
        return self.coordinator.describe_transactions(transactional_ids)

    async def list_transactions(self, state_filters: Sequence[str] = (), producer_id_filters: Sequence[int] = (),
                                duration_filter_ms: int = -1, transactional_id_pattern: str | None = None
                                ) -> ListTransactionsResult:
        """ListTransactions; a non-empty `transactional_id_pattern` (v2, KIP-1152) keeps the ids it matches
        whole, in RE2 syntax by the regex worker (broker.linear_regex); raises RegexError if it is invalid and
        RegexUnavailable if the worker failed."""
        result = self.coordinator.list_transactions(state_filters, producer_id_filters, duration_filter_ms)
        if transactional_id_pattern:
            pattern = transactional_id_pattern
            answer = (await self._regex_worker.match([pattern], [pattern],
                                                     [t.transactional_id for t in result.transactions]))[pattern]
            if isinstance(answer, RegexError):
                raise answer
            kept = set(answer)
            result.transactions = [t for t in result.transactions if t.transactional_id in kept]
        return result

    # --- background --------------------------------------------------------------------------------------------
    async def abort_timed_out(self) -> int:
        """Abort transactions open longer than their timeout (their producer is fenced). Returns how many."""
        result = self.coordinator.abort_timed_out()
        count = len({r.key for r in result.records})
        if count:
            log.info("aborting timed-out transactions", count=count)
        await self._apply_background(result, "timed-out transactions aborted")
        # those whose abort takes their producer id's last epoch (TV2) move to a new id: one at a time
        for tid in self.coordinator.timed_out():
            result = await self._with_producer_id(
                functools.partial(self._abort_timed_out_with_new_id, tid))
            count += bool(result.records)
            await self._apply_background(result, "timed-out transaction aborted")
        return count

    async def expire_transactional_ids(self) -> int:
        """Tombstone ids idle for transactional.id.expiration.ms. Returns how many."""
        records = self.coordinator.expire_transactional_ids()
        if records:
            await self._commit(records)
            log.info("transactional ids expired", count=len(records))
        return len(records)


def build(config: BrokerConfig, topics: TopicManager, producer_ids: ProducerIdSource, log: CoordinatorTopic,
          markers: TxnMarkerWriter, spawn: Spawn, regex_worker: RegexWorker) -> TransactionCoordinatorRuntime:
    """The runtime as the broker configures it (`__transaction_state` must exist: its partition count is the
    log's, whatever transaction.state.log.num.partitions says now, as Kafka)."""
    from broker.groups.runtime import group_partition  # noqa: PLC0415 - the groups package is heavy

    def partition_exists(topic: str, partition: int) -> bool:
        info = topics.registry.get(topic)
        return info is not None and 0 <= partition < info.num_partitions

    def offsets_partition(group_id: str) -> int:
        info = topics.registry.get("__consumer_offsets")
        return group_partition(group_id, info.num_partitions if info is not None else 1)

    settings = TransactionCoordinatorConfig.from_config(config)
    return TransactionCoordinatorRuntime(
        log=log, producer_ids=producer_ids, markers=markers, spawn=spawn, regex_worker=regex_worker,
        config=replace(
            settings, num_partitions=log.num_partitions or settings.num_partitions,
            # The finalized transaction.version (broker.features, advertised in ApiVersions): it picks the log
            # value version and the version of the aborts the coordinator starts itself, as Kafka.
            transaction_version_level=finalized_transaction_version(config)),
        partition_exists=partition_exists, offsets_partition=offsets_partition)
