"""The partition layer between handlers and logs: produce validation, idempotence, durability, fetch waits.

Handlers stay thin: they turn wire structures into calls here. Batches are handled as opaque bytes; only the
61-byte batch header is read (producer id, sequence, counts) on the hot path.

Transactions (the partition side): beside each partition's ProducerStateTable sits its TxnStateTable, rebuilt by
the same scan (markers read from the control batches). Transactional batches are checked (`check_append`) and
recorded; a batch starting a transaction on a partition is first verified with the transaction coordinator when a
`TxnPartitionVerifier` is injected (KIP-890 part 1; None: no verification). `write_txn_markers` (the
`TxnMarkerWriter` of `broker.txn.markers`) appends COMMIT/ABORT markers, durable before it returns, and indexes
aborted transactions in the segment's `.txnindex`. `last_stable_offset` bounds read_committed fetches.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import structlog

from broker.aio import wait_event
from broker.cluster.topics import TopicInfo
from broker.log import share_reads, timestamps
from broker.log.config import PRODUCER_CODEC
from broker.log.dir_failure import STORAGE_ERROR_MESSAGE, KafkaStorageError
from broker.log.producer_state import (
    APPEND,
    BatchMetadata,
    PartitionState,
    ProducerStateManagerConfig,
    ProducerStateTable,
    scan_partition_state,
    scan_partition_state_in_thread,
)
from broker.log.share_reads import NewBatches, OffsetRange, Span
from broker.log.txn_index import AbortedTxn
from broker.log.txn_state import TxnStateTable
from broker.pacing import Pacer
from protocol import records as rec
from protocol.control_records import build_end_txn_marker
from protocol.errors import ErrorCode
from protocol.primitives import BytesParts

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.log.config import LogConfig
    from broker.log.flusher import Flushable, GroupCommitFlusher
    from broker.log.log_manager import LogManager
    from broker.log.partition_log import PartitionLog
    from broker.txn.markers import TxnPartitionVerifier
    from broker.txn.results import TxnMarker

log = structlog.get_logger(__name__)

# A single node leads every partition from its creation on, so every partition has one leader epoch: the one
# Metadata answers and the log stamps into each batch.
LEADER_EPOCH = 0
MAX_PARALLEL_LOADS = 16  # producer-state loads one request runs at once (each a worker thread's scan)
NO_EPOCH = -1  # Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH / UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET


def current_epoch_error(current_leader_epoch: int) -> ErrorCode:
    """A request's CurrentLeaderEpoch against ours, as Kafka's Partition.checkCurrentLeaderEpoch: -1 is no
    check, an older epoch is FENCED_LEADER_EPOCH (the client's metadata is stale), a newer one
    UNKNOWN_LEADER_EPOCH (ours would be)."""
    if current_leader_epoch in (NO_EPOCH, LEADER_EPOCH):
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < LEADER_EPOCH else ErrorCode.UNKNOWN_LEADER_EPOCH


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: Sequence[tuple[int, str]] = ()  # (batch index, message)


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    aborted_transactions: list[AbortedTxn] | None = None  # read_committed fetches only


@dataclass(slots=True)
class ProducerDescription:
    """One active producer of a partition (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = -1
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


@dataclass(eq=False)  # identity semantics: waiters live in sets
class _Waiter:
    """A parked fetch; woken by an append to any partition it watches."""

    keys: frozenset[tuple[str, int]]
    event: asyncio.Event


def storage_error() -> ProduceResult:
    return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=STORAGE_ERROR_MESSAGE)


# Kafka's ReplicaManager turns the coordinator's retriable verification errors into NOT_ENOUGH_REPLICAS, which
# every client retries without refreshing metadata; PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH and, to
# clients that do not know it (Produce before v11), TRANSACTION_ABORTABLE INVALID_TXN_STATE, as
# AddPartitionsToTxnManager does.
_RETRIABLE_VERIFICATION = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                     ErrorCode.NOT_COORDINATOR})
NOT_IN_TRANSACTION = "Partition was not added to the transaction"


def verification_failure(code: ErrorCode, abortable: bool = False) -> ProduceResult:
    """The produce answer for a partition whose verification returned `code` (not NONE); `abortable`: the
    client knows TRANSACTION_ABORTABLE (Produce v11+)."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ProduceResult(ErrorCode.INVALID_PRODUCER_EPOCH)
    if code == ErrorCode.TRANSACTION_ABORTABLE and abortable:
        return ProduceResult(code)
    if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        return ProduceResult(ErrorCode.INVALID_TXN_STATE, error_message=NOT_IN_TRANSACTION)
    if code in _RETRIABLE_VERIFICATION:
        return ProduceResult(ErrorCode.NOT_ENOUGH_REPLICAS, error_message=(
            f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}"))
    return ProduceResult(code)


@dataclass(frozen=True, slots=True, eq=False)
class VerificationGuard:
    """Proof that a partition was verified to be in a producer's transaction (Kafka's VerificationGuard): a marker
    written for the producer meanwhile removes it, so a verification that raced with the end of the transaction
    cannot start a new one."""

    producer_id: int


class ReplicaManager:
    def __init__(self, topics: TopicManager, flusher: GroupCommitFlusher, *, clock: Callable[[], float] = time.time,
                 producer_config: Callable[[], ProducerStateManagerConfig] = ProducerStateManagerConfig,
                 txn_verifier: TxnPartitionVerifier | None = None, logs: LogManager | None = None) -> None:
        self._topics = topics
        self._logs = logs  # for the log start offset checkpoint DeleteRecords waits for (None: not waited for)
        self._flusher = flusher
        self._clock = clock
        self._producer_config = producer_config  # read at each use: producer.id.expiration.ms is dynamic
        self._producers: dict[tuple[str, int], ProducerStateTable] = {}
        self._txns: dict[tuple[str, int], TxnStateTable] = {}  # loaded with _producers, same keys
        # KIP-890 verification: the coordinator, or None (no verification, as Kafka with
        # transaction.partition.verification.enable=false); set by the composition root (set_txn_verifier)
        self.txn_verifier = txn_verifier
        self._guards: dict[tuple[tuple[str, int], int], VerificationGuard] = {}
        self._loading: dict[tuple[str, int], asyncio.Task[None]] = {}
        # partition -> the turn of the last produce request that waited to append to it (see produce_turn)
        self._turns: dict[tuple[str, int], asyncio.Future[None]] = {}
        self._waiters: dict[tuple[str, int], set[_Waiter]] = {}

    # --- producer state --------------------------------------------------------------------------------------
    def _expiration_ms(self) -> int:
        return self._producer_config().producer_id_expiration_ms

    def _newer_than_ms(self) -> int:
        return int(self._clock() * 1000) - self._expiration_ms()

    def set_txn_verifier(self, verifier: TxnPartitionVerifier | None) -> None:
        """Inject the transaction coordinator's verification (KIP-890 part 1); None turns verification off."""
        self.txn_verifier = verifier

    def producer_table(self, topic: str, partition: int) -> ProducerStateTable:
        """The partition's producer state, rebuilt from its log's batch headers on first use (blocking: the
        produce path loads it beforehand in a worker thread, see produce_turn; this is the fallback)."""
        key = (topic, partition)
        table = self._producers.get(key)
        if table is None:
            self._load_blocking(key)
            table = self._producers[key]
        return table

    def txn_table(self, topic: str, partition: int) -> TxnStateTable:
        """The partition's transactions, loaded with its producer state (blocking fallback as producer_table;
        fetches and ListOffsets load it first with `ensure_loaded`)."""
        key = (topic, partition)
        table = self._txns.get(key)
        if table is None:
            self._load_blocking(key)
            table = self._txns[key]
        return table

    def _load_blocking(self, key: tuple[str, int]) -> None:
        plog = self._topics.log(*key)
        self._install(key, scan_partition_state(plog, newer_than_ms=self._newer_than_ms()), plog)

    def _install(self, key: tuple[str, int], state: PartitionState, plog) -> None:
        now_ms, expiration = int(self._clock() * 1000), self._expiration_ms()
        state.producers.remove_expired(now_ms, expiration)
        state.txns.remove_expired(now_ms, expiration)
        self._producers[key] = state.producers
        self._txns[key] = state.txns
        # .txnindex entries lost with a torn tail (or a rebuilt corrupt index) whose markers are in the log: put
        # them back, in order, as Kafka's recovery rebuilds the txn index of the segments it recovers
        for segment, txn in state.aborted:
            last = segment.txn_index.last_offset
            if segment.closed or (last is not None and last >= txn.last_offset):
                continue
            try:
                plog.append_aborted_txn(txn)
                log.info("aborted transaction re-indexed", topic=key[0], partition=key[1],
                         producer_id=txn.producer_id, marker_offset=txn.last_offset)
            except (OSError, ValueError) as err:
                log.warning("cannot re-index an aborted transaction", topic=key[0], partition=key[1],
                            error=repr(err))

    async def ensure_loaded(self, keys: Iterable[tuple[str, int]]) -> None:
        """Load the producer and transaction state of `keys` (existing partitions) in worker threads if need be
        (before reading an LSO without blocking the loop). Cancel-safe: a shared load goes on."""
        waits: set[asyncio.Task] = set()
        pacer = Pacer()
        for key in keys:
            await pacer.pace()
            if key in self._producers:
                continue
            task = self._loading.get(key)
            if task is None:
                if self._topics.find_log(*key) is None:
                    continue
                if len(waits) >= MAX_PARALLEL_LOADS:
                    # thousands of partitions in one request: their loads start a few at a time, not all in one
                    # loop iteration (a burst of thread hand-offs and completions that holds the loop for seconds)
                    _, waits = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                task = self._loading[key] = asyncio.get_running_loop().create_task(self._load(key))
            waits.add(task)
        if waits:
            await asyncio.wait(waits)

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """The LSO: the first offset of the oldest transaction still open (or decided by a marker not yet below
        the high watermark), else the high watermark."""
        plog = self._topics.log(topic, partition)
        return self.txn_table(topic, partition).last_stable_offset(plog.high_watermark, plog.log_start_offset)

    def unstable_partitions(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, high watermark - LSO, open transactions) of the partitions whose transaction state is
        loaded and that have an open transaction or an LSO below the high watermark (metrics; never loads one)."""
        out = []
        for (topic, partition), txns in self._txns.items():
            open_txns = len(txns.ongoing_txns())
            plog = self._topics.find_log(topic, partition)
            if plog is None:
                continue
            lag = plog.high_watermark - txns.last_stable_offset(plog.high_watermark, plog.log_start_offset)
            if open_txns or lag:
                out.append((topic, partition, lag, open_txns))
        return out

    async def _load(self, key: tuple[str, int]) -> None:
        """Rebuild a partition's producer state in a worker thread up to the log end offset seen now, then the
        few batches appended meanwhile on the loop. Never raises: on failure the state stays unloaded and the
        produce path's blocking fallback reports the error."""
        try:
            plog = self._topics.find_log(*key)
            if plog is None:
                return  # the topic was deleted before its turn came: the request answers UNKNOWN_TOPIC_OR_PARTITION
            end = plog.log_end_offset
            newer_than = self._newer_than_ms()
            started = time.monotonic()
            state = await asyncio.to_thread(scan_partition_state_in_thread, plog, newer_than, end)
            if key in self._producers or self._topics.find_log(*key) is not plog:
                return  # loaded by the fallback meanwhile, or the topic was deleted (and maybe recreated)
            scan_partition_state(plog, newer_than_ms=newer_than, start=end, state=state)
            self._install(key, state, plog)
            log.info("producer state loaded", topic=key[0], partition=key[1], producers=len(state.producers),
                     transactional_producers=len(state.txns), seconds=round(time.monotonic() - started, 3))
        except Exception:  # noqa: BLE001 - logged; the fallback raises it to the request
            log.exception("cannot load producer state", topic=key[0], partition=key[1])
        finally:
            self._loading.pop(key, None)

    def produce_turn(self, keys: Iterable[tuple[str, int]],
                     force: Iterable[tuple[str, int]] = ()) -> ProduceTurn | None:
        """Call on a produce request's arrival, before anything awaits. None: append now. Otherwise the request
        must `await turn.wait()` (its partitions' producer state loads in worker threads), append, then
        `turn.done()`. Requests that wait on a partition append to it in arrival order, so a client's pipelined
        batches keep their sequence order. `force`: partitions to take a turn on even when loaded (a
        transactional produce that may await its verification before appending)."""
        forced = set(force)
        need = [k for k in keys if k not in self._producers or k in self._turns or k in forced]
        if not need:
            return None
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[None] = loop.create_future()
        waits: list[asyncio.Future[None]] = []
        for key in need:
            before = self._turns.get(key)
            if before is not None:
                waits.append(before)  # it also waits for the load, if any
            elif key not in self._producers:
                task = self._loading.get(key)
                if task is None:
                    task = self._loading[key] = loop.create_task(self._load(key))
                waits.append(task)
            self._turns[key] = mine
        return ProduceTurn(self, need, mine, waits)

    def _end_turn(self, keys: list[tuple[str, int]], mine: asyncio.Future[None]) -> None:
        if not mine.done():
            mine.set_result(None)
        for key in keys:
            if self._turns.get(key) is mine:
                del self._turns[key]

    async def expire_producers(self) -> int:
        """One producer.id.expiration.check.interval.ms pass over every partition's producer state."""
        now_ms, expiration = int(self._clock() * 1000), self._expiration_ms()
        removed = 0
        for n, table in enumerate(list(self._producers.values())):
            removed += table.remove_expired(now_ms, expiration)
            if n % 1000 == 999:
                await asyncio.sleep(0)  # thousands of partitions: let requests through
        for n, txns in enumerate(list(self._txns.values())):
            txns.remove_expired(now_ms, expiration)  # never a producer in a transaction
            if n % 1000 == 999:
                await asyncio.sleep(0)  # thousands of partitions: let requests through
        if removed:
            log.info("expired producer ids removed", producers=removed)
        return removed

    # --- produce ---------------------------------------------------------------------------------------------

    def append(self, info: TopicInfo, partition: int, records: bytes | memoryview | None,
               *, allow_internal: bool = False,
               verified: dict[tuple[str, int], VerificationGuard | ProduceResult] | None = None,
               built: rec.BatchHeader | None = None,
               ) -> tuple[ProduceResult, PartitionLog | None]:
        """Validate and append one partition's batch. Returns the result and the log written (for fsync).
        `verified`: what `verify_transactional` answered for the request's partitions. `built`: the header of a
        batch a coordinator built itself (internal topics only), which is not parsed and checked again."""
        if info.internal and not allow_internal:
            return ProduceResult(ErrorCode.INVALID_TOPIC_EXCEPTION), None  # Kafka: no message, no log start offset
        if not 0 <= partition < info.num_partitions:
            return ProduceResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
        plog = self._topics.log(info.name, partition)
        if plog.failures.offline:
            return storage_error(), None
        if not records:
            return ProduceResult(ErrorCode.INVALID_RECORD), None
        log_config = plog.config  # the topic's effective configs, kept current by the topic manager
        max_bytes = log_config.max_message_bytes
        keyless: rec.KeylessRecordError | None = None
        if built is not None and allow_internal:
            header = built
            headers = [built]
            if len(records) > max_bytes:  # a coordinator's record too large for its topic: MESSAGE_TOO_LARGE
                return ProduceResult(ErrorCode.MESSAGE_TOO_LARGE), None
        else:
            # The request's checks (protocol.produce_records) found one whole batch at the start: Kafka's log
            # checks it and every record's framing (decompressing if need be), a compacted topic refusing
            # records without a key (LogValidator.validateKey, answered with the record checks below). Bytes
            # after the batch are dropped, as Kafka's trimInvalidBytes.
            try:
                header = rec.validate_client_batch(records, max_message_bytes=max_bytes, require_keys=(
                    f"{info.name}-{partition}" if log_config.compact else None), from_client=not allow_internal)
            except rec.KeylessRecordError as err:
                keyless, header = err, err.headers[0]
            except rec.RecordError as err:
                log.info("produce refused", topic=info.name, partition=partition, error=err.error_code.name,
                         reason=str(err))
                return ProduceResult(err.error_code, log_start_offset=plog.log_start_offset
                                     if err.with_log_start else -1), None
            if len(records) != header.size:
                records = memoryview(records)[:header.size]
            refused = self._record_errors(records, header, log_config, keyless)
            if refused is not None:
                refused.log_start_offset = plog.log_start_offset  # as Kafka answers a RecordValidationException
                return refused, None
            if header.is_log_append_time and not log_config.log_append_time:
                # Kafka's validator stamps the batch CreateTime again, keeping MaxTimestamp (which its records
                # read as their timestamp)
                records = rec.clear_log_append_time(records)
                header = rec.read_header(records)
            headers = [header]
            if log_config.compression not in (PRODUCER_CODEC, header.attributes & rec.COMPRESSION_MASK):
                # the topic's compression.type: the batch is stored with that codec (Kafka's LogValidator)
                try:
                    records = rec.recompress(records, log_config.compression, log_config.compression_level)
                except rec.RecordError as err:
                    log.info("produce refused", topic=info.name, partition=partition, error=err.error_code.name,
                             reason=str(err))
                    return ProduceResult(err.error_code, log_start_offset=plog.log_start_offset
                                         if err.with_log_start else -1), None
                header = rec.read_header(records)
                headers = [header]
                if len(records) > max_bytes:
                    log.info("produce refused", topic=info.name, partition=partition, reason=(
                        f"the batch size {len(records)} after compression.type exceeds max.message.bytes {max_bytes}"))
                    return ProduceResult(ErrorCode.MESSAGE_TOO_LARGE), None
        idempotent = header.producer_id >= 0 and header.base_sequence >= 0
        # a coordinator's own transactional batch (a transactional offset commit: no sequence) opens a
        # transaction on its partition like a producer's, without the produce path's checks
        coordinator_txn = allow_internal and header.is_transactional and header.producer_id >= 0
        # only idempotent batches need the producer state (coordinators' and plain producers' batches do not)
        table = self.producer_table(info.name, partition) if idempotent else None
        last_seq = header.base_sequence + header.last_offset_delta
        check = table.check(header.producer_id, header.producer_epoch, header.base_sequence, last_seq) \
            if table is not None else APPEND
        if check.error != ErrorCode.NONE:
            return ProduceResult(check.error, log_start_offset=plog.log_start_offset), None
        if check.duplicate_of is not None:
            # A retry of a batch we already have: answer with its original offset, append nothing.
            # Kafka answers the original batch's timestamp as LogAppendTime, whatever the topic's timestamp type
            return ProduceResult(
                base_offset=check.duplicate_of.base_offset, log_append_time=check.duplicate_of.timestamp,
                log_start_offset=plog.log_start_offset,
            ), plog
        txns = self.txn_table(info.name, partition) if idempotent or coordinator_txn else None
        if txns is not None and not coordinator_txn:
            refused = self._check_transactional(info.name, partition, header, txns, verified, plog.log_start_offset)
            if refused is not None:
                return refused, None
        append_time = None
        if log_config.log_append_time:
            append_time = int(self._clock() * 1000)
        try:
            appended = plog.append(records, log_append_time=append_time, headers=headers)  # validated above
        except (OSError, KafkaStorageError) as err:
            # Undone (a full disk) or the directory went offline: nothing of this batch is in the log, and the
            # producer state is untouched, so the producer's retry is accepted once space returns.
            log.warning("produce append failed", topic=info.name, partition=partition, error=repr(err))
            return storage_error(), None
        if table is not None:
            # the batch's timestamp as stored (LogAppendTime patches it): what expiry measures from, as Kafka
            table.record(
                header.producer_id,
                header.producer_epoch,
                BatchMetadata(header.base_sequence, last_seq, appended.base_offset, appended.last_offset,
                              header.max_timestamp if append_time is None else append_time),
            )
        if txns is not None:
            txns.on_append(header._replace(base_offset=appended.base_offset,
                                           max_timestamp=header.max_timestamp if append_time is None else append_time))
            if header.is_transactional:
                self._guards.pop(((info.name, partition), header.producer_id), None)
        self._wake(info.name, partition)
        return ProduceResult(
            base_offset=appended.base_offset,
            log_append_time=append_time if append_time is not None else -1,
            log_start_offset=plog.log_start_offset,
        ), plog

    def _check_transactional(self, topic: str, partition: int, header: rec.BatchHeader, txns: TxnStateTable,
                             verified, log_start_offset: int) -> ProduceResult | None:
        """Kafka's transactional checks of a data batch: a fenced epoch, a plain batch inside an open
        transaction, and (with a verifier) a transaction started on a partition the coordinator did not add.
        The log's refusals carry its log start offset; the coordinator's answer (the verification, refused
        before the log) does not, as in Kafka."""
        code = txns.check_append(header)
        if code != ErrorCode.NONE:
            return ProduceResult(code, log_start_offset=log_start_offset)
        if (self.txn_verifier is None or not header.is_transactional
                or txns.has_ongoing_transaction(header.producer_id, header.producer_epoch)):
            return None
        key = (topic, partition)
        answer = (verified or {}).get(key)
        if isinstance(answer, ProduceResult):
            return replace(answer)  # shared by the request's partitions: a copy of its own
        if answer is None or self._guards.get((key, header.producer_id)) is not answer:
            # not verified, or the transaction ended (a marker) since it was
            return ProduceResult(ErrorCode.INVALID_TXN_STATE, error_message=NOT_IN_TRANSACTION,
                                 log_start_offset=log_start_offset)
        return None

    async def verify_transactional(self, transactional_id: str | None,
                                   batches: Sequence[tuple[tuple[str, int], rec.BatchHeader]], *,
                                   add: bool = False, abortable: bool = False,
                                   ) -> dict[tuple[str, int], VerificationGuard | ProduceResult]:
        """Ask the coordinator about the partitions where a transactional batch would start a transaction (call
        after the request's produce turn: the partitions' state is loaded). A guard per verified partition, the
        produce answer per refused one; partitions needing no verification are left out. `add` (Produce v12,
        KIP-890 part 2): the coordinator adds the partitions to the transaction instead of verifying them;
        `abortable`: the client knows TRANSACTION_ABORTABLE (Produce v11+)."""
        verifier = self.txn_verifier
        if verifier is None or not batches:
            return {}
        out: dict[tuple[str, int], VerificationGuard | ProduceResult] = {}
        ask: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for key, header in batches:
            if not header.is_transactional or header.is_control or header.producer_id < 0:
                continue
            if self._topics.find_log(*key) is None:
                continue
            if self.txn_table(*key).has_ongoing_transaction(header.producer_id, header.producer_epoch):
                # this producer's transaction already has data here at this epoch (Kafka's hasOngoingTransaction:
                # a batch of another epoch is verified, so an epoch the coordinator never gave is fenced)
                continue
            if transactional_id is None:
                out[key] = ProduceResult(ErrorCode.INVALID_TXN_STATE, error_message=NOT_IN_TRANSACTION)
                continue
            ask.setdefault((header.producer_id, header.producer_epoch), []).append(key)
        if transactional_id is None:  # every transactional batch was answered above
            return out
        for (pid, epoch), keys in ask.items():
            guards = {key: VerificationGuard(pid) for key in keys}
            for key, guard in guards.items():
                self._guards[(key, pid)] = guard
            try:
                errors = await (verifier.verify_partitions(transactional_id, pid, epoch, keys, add=True) if add
                                else verifier.verify_partitions(transactional_id, pid, epoch, keys))
            except Exception as err:  # noqa: BLE001 - a failed verification is retriable, as a network error
                log.warning("transaction verification failed", transactional_id=transactional_id, error=repr(err))
                errors = dict.fromkeys(keys, ErrorCode.NETWORK_EXCEPTION)
            for key in keys:
                code = ErrorCode(errors.get(key, ErrorCode.NONE))
                if code == ErrorCode.NONE:
                    out[key] = guards[key]
                else:
                    out[key] = verification_failure(code, abortable)
                    if self._guards.get((key, pid)) is guards[key]:
                        del self._guards[(key, pid)]
        return out

    # --- transaction markers ---------------------------------------------------------------------------------
    async def write_txn_markers(self, markers: Sequence[TxnMarker]) -> dict[tuple[str, int], ErrorCode]:
        """The `TxnMarkerWriter` of broker.txn.markers: error per (topic, partition) (the last marker's when
        several end transactions on one partition)."""
        codes = await self.write_markers(markers)
        return {(m.topic, m.partition): code for m, code in zip(markers, codes, strict=True)}

    async def write_markers(self, markers: Sequence[TxnMarker]) -> list[ErrorCode]:
        """Append each marker (Kafka's checks: TransactionStateTable.check_marker), index aborted transactions,
        wake fetches, then fsync every log written (as acks=all). Error per marker, in order."""
        registry = self._topics.registry
        keys = []
        for m in markers:
            info = registry.get(m.topic)
            if info is not None and 0 <= m.partition < info.num_partitions:
                keys.append((info.name, m.partition))
        await self.ensure_loaded(keys)
        codes: list[ErrorCode] = []
        written: list[tuple[int, PartitionLog]] = []
        for i, m in enumerate(markers):
            code, plog = self.append_marker(m)
            codes.append(code)
            if plog is not None:
                written.append((i, plog))
        failed = await self.not_durable(plog for _i, plog in written)
        for i, plog in written:
            if id(plog) in failed:
                codes[i] = ErrorCode.KAFKA_STORAGE_ERROR
        return codes

    def _record_errors(self, records: bytes | memoryview, header: rec.BatchHeader, log_config: LogConfig,
                       keyless: rec.KeylessRecordError | None) -> ProduceResult | None:
        """Kafka's per-record checks of a client batch (LogValidator.validateRecord): a missing key on a compacted
        topic, then the timestamp; None when every record passes. Any refused timestamp makes the answer
        INVALID_TIMESTAMP, with every record's error."""
        now = int(self._clock() * 1000)
        before, after = log_config.timestamp_before_max_ms, log_config.timestamp_after_max_ms
        out_of_range: list[tuple[int, str]] = []
        if timestamps.may_refuse(header, now, log_config.log_append_time, before, after):
            out_of_range = timestamps.record_errors(records, now, log_config.log_append_time, before, after,
                                            frozenset(keyless.indexes) if keyless is not None else frozenset())
        if out_of_range:
            missing = [(i, keyless.record_message) for i in keyless.indexes] if keyless is not None else []
            return ProduceResult(ErrorCode.INVALID_TIMESTAMP, error_message=timestamps.INVALID_TIMESTAMP_MESSAGE,
                                 record_errors=sorted(missing + out_of_range))
        if keyless is not None:
            return ProduceResult(keyless.error_code, error_message=str(keyless),
                                 record_errors=[(i, keyless.record_message) for i in keyless.indexes])
        return None

    def append_marker(self, m: TxnMarker) -> tuple[ErrorCode, PartitionLog | None]:
        """Append one marker now (not yet durable: the caller makes the returned log durable): Kafka's marker
        checks, the control batch, the aborted-transaction index, the LSO, fetch wake-ups. Used for every
        partition, `__consumer_offsets` included (the group coordinator's markers), so each partition's
        transaction state and index follow its log."""
        info = self._topics.registry.get(m.topic)
        if info is None or not 0 <= m.partition < info.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        key = (info.name, m.partition)
        plog = self._topics.log(*key)
        if plog.failures.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR, None
        try:
            txns = self.txn_table(*key)
        except (OSError, KafkaStorageError) as err:
            log.error("cannot load transaction state", topic=key[0], partition=key[1], error=repr(err))
            return ErrorCode.KAFKA_STORAGE_ERROR, None
        code = txns.check_marker(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                 transaction_version=m.transaction_version)
        if code != ErrorCode.NONE:
            return code, None
        now = int(self._clock() * 1000)
        batch = build_end_txn_marker(producer_id=m.producer_id, producer_epoch=m.producer_epoch, commit=m.commit,
                                     coordinator_epoch=m.coordinator_epoch, timestamp=now)
        try:
            appended = plog.append(batch)
        except (OSError, KafkaStorageError) as err:
            log.warning("transaction marker append failed", topic=key[0], partition=key[1], error=repr(err))
            return ErrorCode.KAFKA_STORAGE_ERROR, None
        aborted = txns.on_marker(m.producer_id, m.producer_epoch, m.commit, appended.base_offset,
                                 m.coordinator_epoch, now)
        txns.on_high_watermark(plog.high_watermark)
        self._guards.pop((key, m.producer_id), None)
        if aborted is not None:
            try:
                plog.append_aborted_txn(aborted)
            except OSError as err:
                # the marker is in the log: without its index entry read_committed readers would see the
                # aborted data, so the directory goes offline (a restart re-indexes it from the log)
                plog.failures.fail(f"txn index append in {plog.directory} failed", err)
                return ErrorCode.KAFKA_STORAGE_ERROR, None
        self._wake(*key)
        return ErrorCode.NONE, plog

    async def make_durable(self, logs: Iterable[Flushable | None]) -> None:
        """Wait until everything appended so far to `logs` is fsynced (group commit shares the fsyncs)."""
        unique = {id(plog): plog for plog in logs if plog is not None}
        if len(unique) == 1:  # a coordinator's write: no gather, no task
            await self._flusher.sync(next(iter(unique.values())))
        elif unique:
            await asyncio.gather(*(self._flusher.sync(plog) for plog in unique.values()))

    async def not_durable(self, logs: Iterable[Flushable | None]) -> set[int]:
        """As make_durable, but returns the ids of the logs whose flush failed instead of raising."""
        unique = {id(plog): plog for plog in logs if plog is not None}
        if not unique:
            return set()
        if len(unique) == 1:  # most produce requests (librdkafka sends one per partition): no gather, no task
            (key, plog), = unique.items()
            try:
                await self._flusher.sync(plog)
            except Exception as err:  # noqa: BLE001 - answered as the partition's storage error
                log.error("produce not durable", error=repr(err))
                return {key}
            return set()
        results = await asyncio.gather(*(self._flusher.sync(plog) for plog in unique.values()),
                                       return_exceptions=True)
        failed = set()
        for key, result in zip(unique, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result  # cancelled: the request is going away
                log.error("produce not durable", error=repr(result))
                failed.add(key)
        return failed

    # --- fetch -----------------------------------------------------------------------------------------------
    def read(self, info: TopicInfo, partition: int, offset: int, max_bytes: int, *, min_one: bool,
             read_committed: bool = False, current_leader_epoch: int = NO_EPOCH,
             follower: bool = False) -> FetchResult:
        """Whole batches from `offset`; read_committed: only below the LSO, with the aborted transactions of the
        range returned. Every answer that reads carries the partition's real LSO (an offset out of range carries no
        offsets, as Kafka's). The request's CurrentLeaderEpoch is checked after the partition is found online and
        before the offset, as Kafka's Partition.fetchRecords."""
        if not 0 <= partition < info.num_partitions:
            return FetchResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        plog = self._topics.log(info.name, partition)
        if plog.failures.offline:
            return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR)
        if (epoch_error := current_epoch_error(current_leader_epoch)) != ErrorCode.NONE:
            return FetchResult(epoch_error)
        if follower:  # a follower's fetch: a single node has no replica but itself (Kafka's followerReplicaOrThrow)
            return FetchResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        hw = plog.high_watermark
        start = plog.log_start_offset
        try:
            lso = self.txn_table(info.name, partition).last_stable_offset(hw, start)
        except (OSError, KafkaStorageError) as err:
            log.error("cannot load transaction state", topic=info.name, partition=partition, error=repr(err))
            return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR)
        if offset < start or offset > hw:
            # Kafka's read result for an error carries no offsets (-1: high watermark, LSO, log start offset)
            return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE)
        data = b""
        aborted: list[AbortedTxn] | None = [] if read_committed else None
        upper = lso if read_committed else hw
        if offset < upper:
            try:
                found = plog.read(offset, max_bytes, min_one_batch=min_one)
                data = found.data
                if read_committed and data:
                    data = self._cut_at(plog, found, data, lso)
                    aborted = plog.collect_aborted_txns(offset, min(lso, plog.fetch_upper_bound(
                        found.segment_base_offset, found.position, len(data))))
            except (OSError, KafkaStorageError) as err:
                log.error("fetch read failed", topic=info.name, partition=partition, error=repr(err))
                return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR)
        return FetchResult(ErrorCode.NONE, hw, lso, start, data, aborted)

    @staticmethod
    def _cut_at(plog, found, data, lso: int):
        """`data` without the batches at or after the LSO (a batch boundary: the first batch of a transaction).
        One index lookup, and only while a transaction is open in the segment read."""
        if lso >= plog.high_watermark:
            return data
        at = plog.batch_position(lso)
        if at is None or at[0] != found.segment_base_offset:
            return data  # the LSO is in a later segment: everything read is below it
        limit = at[1] - found.position
        return data[:limit] if 0 <= limit < len(data) else data

    async def wait_for_append(self, keys: Iterable[tuple[str, int]], timeout_s: float) -> bool:
        """Park until one of `keys` gets an append or the timeout passes. True if woken by data."""
        event = asyncio.Event()
        with self.watching_appends(keys, event):
            return await wait_event(event, timeout_s)

    @contextlib.contextmanager
    def watching_appends(self, keys: Iterable[tuple[str, int]], event: asyncio.Event) -> Iterator[None]:
        """Set `event` on an append to any of `keys` while inside. Registered before the body runs, with no await
        in between: an append between a reader's look at the log and its wait would otherwise find nobody to
        wake, and the reader would sleep, with records there, until the next append or its MaxWaitMs."""
        waiter = _Waiter(frozenset(keys), event)
        for key in waiter.keys:
            self._waiters.setdefault(key, set()).add(waiter)
        try:
            yield
        finally:
            for key in waiter.keys:
                parked = self._waiters.get(key)
                if parked is not None:
                    parked.discard(waiter)
                    if not parked:
                        del self._waiters[key]

    def _wake(self, topic: str, partition: int) -> None:
        parked = self._waiters.get((topic, partition))
        if parked:
            for waiter in parked:
                waiter.event.set()

    # --- share acquisition -----------------------------------------------------------------------------------
    # The share-partition leader reads a partition only through these, as Fetch does through `read`: the log is
    # looked up here, the LSO comes with it, and the reads are those of broker/log/share_reads.py.
    def offline(self, topic: str, partition: int) -> bool:
        """Whether the partition's log directory is offline (its readers answer KAFKA_STORAGE_ERROR)."""
        return self._topics.log(topic, partition).failures.offline

    def log_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset) of the partition."""
        plog = self._topics.log(topic, partition)
        return plog.log_start_offset, plog.log_end_offset

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp` (see PartitionLog.offset_for_timestamp)."""
        return self._topics.log(topic, partition).offset_for_timestamp(timestamp)

    def new_batches(self, topic: str, partition: int, start: int, room: int, max_bytes: int, *, min_one: bool,
                    strict: bool, read_committed: bool) -> NewBatches:
        """The batches a share-partition whose end offset is `start` may acquire next: at most `room` records and
        `max_bytes` (the first batch whatever its size with `min_one`; cut to `room` with `strict`), up to the LSO
        under read_committed (aborted transactions' batches to archive), else up to the log end."""
        plog = self._topics.log(topic, partition)
        if read_committed:
            spans: list[Span] = []
            batches, archived = share_reads.committed_batches(
                plog, start, self.last_stable_offset(topic, partition), room, max_bytes, min_one, strict, spans)
            return NewBatches(batches, archived, None, spans)
        batches, reads = share_reads.new_batches(plog, start, plog.log_end_offset, room, max_bytes, min_one, strict)
        return NewBatches(batches, reads=reads)

    def read_batches(self, topic: str, partition: int, ranges: Sequence[OffsetRange], spans: Sequence[Span] = ()
                     ) -> bytes | memoryview | BytesParts:
        """The whole batches holding the offsets of `ranges`, each once, in offset order (see read_ranges)."""
        return share_reads.read_ranges(self._topics.log(topic, partition), ranges, spans)

    def acquirable_bytes(self, topic: str, partition: int, start: int, enough: int, *, read_committed: bool) -> int:
        """Bytes of the batches from `start` a share-partition may acquire (below the LSO under read_committed,
        aborted transactions' batches left out), counted up to `enough`."""
        plog = self._topics.log(topic, partition)
        end = self.last_stable_offset(topic, partition) if read_committed else plog.log_end_offset
        return share_reads.acquirable_bytes(plog, start, end, enough, read_committed)

    def producer_last_offsets(self, topic: str, partition: int, newer_than_ms: int) -> dict[int, int] | None:
        """Last offset of each producer's last batch (see ProducerStateTable.last_offsets), or None when this
        partition's producer state has not been loaded (the log cleaner then reads it from the batch headers)."""
        table = self._producers.get((topic, partition))
        return None if table is None else table.last_offsets(newer_than_ms)

    def describe_producers(self, topic: str, partition: int) -> list[ProducerDescription]:
        """The partition's active producers (DescribeProducers), from its producer and transaction state."""
        table = self.producer_table(topic, partition)
        txns = self.txn_table(topic, partition)
        out: dict[int, ProducerDescription] = {}
        for pid, entry in table.items():
            last = entry.batches[-1] if entry.batches else None
            out[pid] = ProducerDescription(pid, entry.epoch, entry.last_seq,
                                           last.timestamp if last is not None else -1)
        for e in txns.snapshot():
            d = out.get(e.producer_id)
            if d is None:
                d = out[e.producer_id] = ProducerDescription(e.producer_id, e.epoch, -1, e.last_timestamp)
            else:
                # One entry per producer in Kafka: its last write, a batch or a marker, gives the timestamp (the
                # transaction state sees both), and a marker of a newer epoch (TV2) drops the sequences.
                if e.epoch > d.producer_epoch:
                    d.producer_epoch, d.last_sequence = e.epoch, -1
                d.last_timestamp = e.last_timestamp
            d.coordinator_epoch = e.coordinator_epoch
            d.current_txn_start_offset = e.txn_first_offset if e.in_transaction else -1
        return list(out.values())

    # --- OffsetForLeaderEpoch --------------------------------------------------------------------------------
    def end_offset_for_epoch(self, info: TopicInfo, partition: int, current_leader_epoch: int,
                             leader_epoch: int) -> tuple[ErrorCode, int, int]:
        """(error, epoch, end offset) as Kafka's Partition.lastOffsetForLeaderEpoch with a leader epoch cache
        holding one entry, LEADER_EPOCH from the log start offset: the current epoch ends at the log end offset,
        a later one is unknown (-1, -1), an earlier one ends where LEADER_EPOCH starts. `current_leader_epoch`
        (-1: not given) must be ours: older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH."""
        if not 0 <= partition < info.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_EPOCH, NO_EPOCH
        if (code := current_epoch_error(current_leader_epoch)) != ErrorCode.NONE:
            return code, NO_EPOCH, NO_EPOCH
        plog = self._topics.log(info.name, partition)
        if plog.failures.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR, NO_EPOCH, NO_EPOCH
        if leader_epoch == NO_EPOCH or leader_epoch > LEADER_EPOCH:
            return ErrorCode.NONE, NO_EPOCH, NO_EPOCH
        if leader_epoch == LEADER_EPOCH:
            return ErrorCode.NONE, LEADER_EPOCH, plog.log_end_offset
        return ErrorCode.NONE, leader_epoch, plog.log_start_offset

    # --- DeleteRecords -----------------------------------------------------------------------------------------
    def delete_records(self, info: TopicInfo, partition: int, offset: int) -> tuple[ErrorCode, int]:
        """Move the partition's log start offset up to `offset` (-1: the high watermark), as Kafka's
        ReplicaManager.deleteRecordsOnLocalLog and Partition.deleteRecordsOnLeader. Returns (error, low
        watermark); segments wholly below it are dropped (unlinked off the loop by the LogManager). Call
        `log_start_durable` before answering."""
        if info.internal:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, -1
        if not 0 <= partition < info.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
        plog = self._topics.log(info.name, partition)
        if plog.failures.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR, -1
        if not plog.config.delete:  # a compact-only topic keeps the latest value of every key
            return ErrorCode.POLICY_VIOLATION, -1
        target = plog.high_watermark if offset == -1 else offset
        if target < 0 or target > plog.high_watermark:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        try:
            start = plog.delete_records_before(target)
        except (OSError, KafkaStorageError) as err:
            log.error("delete records failed", topic=info.name, partition=partition, error=repr(err))
            return ErrorCode.KAFKA_STORAGE_ERROR, -1
        self._wake(info.name, partition)  # parked fetches below the new start get OFFSET_OUT_OF_RANGE now
        return ErrorCode.NONE, start

    async def log_start_durable(self) -> bool:
        """Wait until the log start offsets moved so far are checkpointed (False: the write failed)."""
        return True if self._logs is None else await self._logs.log_start_durable()

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._producers if k[0] == topic]:
            del self._producers[key]
            self._txns.pop(key, None)
        for guard in [g for g in self._guards if g[0][0] == topic]:
            del self._guards[guard]


@dataclass(slots=True)
class ProduceTurn:
    """A produce request's place in line for partitions whose producer state is loading (or that earlier
    waiting requests will append to first)."""

    replicas: ReplicaManager
    keys: list[tuple[str, int]]
    mine: asyncio.Future[None]
    waits: list[asyncio.Future[None]]

    async def wait(self) -> None:
        if self.waits:
            await asyncio.wait(self.waits)  # not gather: a cancelled waiter must not cancel a shared load

    def done(self) -> None:
        self.replicas._end_turn(self.keys, self.mine)


def _first_headers(entries: Iterable[tuple[TopicInfo, int, bytes | memoryview | None]],
                   ) -> Iterator[tuple[tuple[str, int], rec.BatchHeader]]:
    """(partition, first batch header) of each (topic, partition, records) of a produce request with the
    partition in range and at least a header's bytes (one header read each)."""
    for info, index, records in entries:
        if 0 <= index < info.num_partitions and records is not None and len(records) >= rec.HEADER_SIZE:
            yield (info.name, index), rec.read_header(records)


def idempotent_keys(entries: Iterable[tuple[TopicInfo, int, bytes | memoryview | None]]) -> list[tuple[str, int]]:
    """Partitions of a produce request (its (topic, partition, records)) whose first batch carries a producer id
    and sequence (cheap: one header read each; the full validation comes later)."""
    return [key for key, header in _first_headers(entries) if header.producer_id >= 0 and header.base_sequence >= 0]


def transactional_batches(entries: Iterable[tuple[TopicInfo, int, bytes | memoryview | None]],
                          ) -> list[tuple[tuple[str, int], rec.BatchHeader]]:
    """(partition, first batch header) of a produce request's transactional batches (one header read each)."""
    return [(key, header) for key, header in _first_headers(entries)
            if header.is_transactional and not header.is_control and header.producer_id >= 0]
