"""The partition layer between handlers and logs: produce validation, idempotence, durability, fetch waits.

Handlers stay thin: they turn wire structures into calls here. Batches are handled as opaque bytes; only the
61-byte batch header is read (producer id, sequence, counts) on the hot path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from broker.aio import wait_event
from broker.cluster.topics import TopicInfo
from broker.log.dir_failure import STORAGE_ERROR_MESSAGE, KafkaStorageError
from broker.log.producer_state import (
    APPEND,
    BatchMetadata,
    ProducerStateTable,
    scan_producers,
    scan_producers_in_thread,
)
from protocol import records as rec
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.log.flusher import GroupCommitFlusher

log = structlog.get_logger(__name__)

LOG_APPEND_TIME = "LogAppendTime"
DEFAULT_PRODUCER_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)  # (batch index, message)


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclass(eq=False)  # identity semantics: waiters live in sets
class _Waiter:
    """A parked fetch; woken by an append to any partition it watches."""

    keys: frozenset[tuple[str, int]]
    event: asyncio.Event = field(default_factory=asyncio.Event)


def storage_error() -> ProduceResult:
    return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=STORAGE_ERROR_MESSAGE)


class ReplicaManager:
    def __init__(self, topics: TopicManager, flusher: GroupCommitFlusher, *, clock: Callable[[], float] = time.time,
                 producer_expiration_ms: Callable[[], int] = lambda: DEFAULT_PRODUCER_EXPIRATION_MS) -> None:
        self._topics = topics
        self._flusher = flusher
        self._clock = clock
        self._expiration_ms = producer_expiration_ms  # producer.id.expiration.ms (dynamic)
        self._producers: dict[tuple[str, int], ProducerStateTable] = {}
        self._loading: dict[tuple[str, int], asyncio.Task[None]] = {}
        # partition -> the turn of the last produce request that waited to append to it (see produce_turn)
        self._turns: dict[tuple[str, int], asyncio.Future[None]] = {}
        self._waiters: dict[tuple[str, int], set[_Waiter]] = {}

    # --- producer state --------------------------------------------------------------------------------------
    def _newer_than_ms(self) -> int:
        return int(self._clock() * 1000) - int(self._expiration_ms())

    def producer_table(self, topic: str, partition: int) -> ProducerStateTable:
        """The partition's producer state, rebuilt from its log's batch headers on first use (blocking: the
        produce path loads it beforehand in a worker thread, see produce_turn; this is the fallback)."""
        key = (topic, partition)
        table = self._producers.get(key)
        if table is None:
            table = ProducerStateTable()
            scan_producers(self._topics.log(topic, partition), table, newer_than_ms=self._newer_than_ms())
            self._install(key, table)
        return table

    def _install(self, key: tuple[str, int], table: ProducerStateTable) -> None:
        table.remove_expired(int(self._clock() * 1000), int(self._expiration_ms()))
        self._producers[key] = table

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
            table = await asyncio.to_thread(scan_producers_in_thread, plog, newer_than, end)
            if key in self._producers or self._topics.find_log(*key) is not plog:
                return  # loaded by the fallback meanwhile, or the topic was deleted (and maybe recreated)
            scan_producers(plog, table, newer_than_ms=newer_than, start=end)
            self._install(key, table)
            log.info("producer state loaded", topic=key[0], partition=key[1], producers=len(table),
                     seconds=round(time.monotonic() - started, 3))
        except Exception:  # noqa: BLE001 - logged; the fallback raises it to the request
            log.exception("cannot load producer state", topic=key[0], partition=key[1])
        finally:
            self._loading.pop(key, None)

    def produce_turn(self, keys: Iterable[tuple[str, int]]) -> ProduceTurn | None:
        """Call on a produce request's arrival, before anything awaits. None: append now. Otherwise the request
        must `await turn.wait()` (its partitions' producer state loads in worker threads), append, then
        `turn.done()`. Requests that wait on a partition append to it in arrival order, so a client's pipelined
        batches keep their sequence order."""
        need = [k for k in keys if k not in self._producers or k in self._turns]
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
        now_ms, expiration = int(self._clock() * 1000), int(self._expiration_ms())
        removed = 0
        for n, table in enumerate(list(self._producers.values())):
            removed += table.remove_expired(now_ms, expiration)
            if n % 1000 == 999:
                await asyncio.sleep(0)  # thousands of partitions: let requests through
        if removed:
            log.info("expired producer ids removed", producers=removed)
        return removed

    # --- produce ---------------------------------------------------------------------------------------------

    def append(self, info: TopicInfo, partition: int, records: bytes | memoryview | None,
               *, allow_internal: bool = False) -> tuple[ProduceResult, object | None]:
        """Validate and append one partition's batch. Returns the result and the log written (for fsync)."""
        if info.internal and not allow_internal:
            return ProduceResult(ErrorCode.INVALID_TOPIC_EXCEPTION, error_message="Cannot append to internal topic"), None
        if not 0 <= partition < info.num_partitions:
            return ProduceResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
        plog = self._topics.log(info.name, partition)
        if plog.failures.offline:
            return storage_error(), None
        if not records:
            return ProduceResult(ErrorCode.INVALID_RECORD, error_message="Produce request has no record batch"), None
        max_bytes = self._topics.int_config(info, "max.message.bytes")
        # A compacted topic refuses records without a key (Kafka's LogValidator.validateKey).
        require_keys = f"{info.name}-{partition}" if plog.config.compact else None
        try:
            # every record's framing too (decompressing if need be), as Kafka's LogValidator parses each record
            headers = rec.validate_batches(records, check_records=True, require_keys=require_keys)
        except rec.KeylessRecordError as err:
            return ProduceResult(err.error_code, error_message=str(err),
                                 record_errors=[(i, err.record_message) for i in err.indexes]), None
        except rec.RecordError as err:
            return ProduceResult(err.error_code, error_message=str(err)), None
        if len(headers) != 1:
            # Produce v3+ carries exactly one batch per partition.
            return ProduceResult(ErrorCode.INVALID_RECORD,
                                 error_message="Produce requests must contain exactly one record batch"), None
        header = headers[0]
        if len(records) > max_bytes:
            return ProduceResult(
                ErrorCode.MESSAGE_TOO_LARGE,
                error_message=f"The batch size {len(records)} exceeds max.message.bytes {max_bytes}",
            ), None
        if header.is_control:
            return ProduceResult(ErrorCode.INVALID_RECORD, error_message="Clients may not write control batches"), None
        idempotent = header.producer_id >= 0 and header.base_sequence >= 0
        # only idempotent batches need the producer state (coordinators' and plain producers' batches do not)
        table = self.producer_table(info.name, partition) if idempotent else None
        last_seq = header.base_sequence + header.last_offset_delta
        check = table.check(header.producer_id, header.producer_epoch, header.base_sequence, last_seq) \
            if table is not None else APPEND
        if check.error != ErrorCode.NONE:
            return ProduceResult(check.error, log_start_offset=plog.log_start_offset), None
        if check.duplicate_of is not None:
            # A retry of a batch we already have: answer with its original offset, append nothing.
            return ProduceResult(
                base_offset=check.duplicate_of.base_offset, log_start_offset=plog.log_start_offset
            ), plog
        append_time = None
        if self._topics.str_config(info, "message.timestamp.type") == LOG_APPEND_TIME:
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
        self._wake(info.name, partition)
        return ProduceResult(
            base_offset=appended.base_offset,
            log_append_time=append_time if append_time is not None else -1,
            log_start_offset=plog.log_start_offset,
        ), plog

    async def make_durable(self, logs: Iterable[object]) -> None:
        """Wait until everything appended so far to `logs` is fsynced (group commit shares the fsyncs)."""
        unique = {id(plog): plog for plog in logs if plog is not None}
        if unique:
            await asyncio.gather(*(self._flusher.sync(plog) for plog in unique.values()))

    async def not_durable(self, logs: Iterable[object]) -> set[int]:
        """As make_durable, but returns the ids of the logs whose flush failed instead of raising."""
        unique = {id(plog): plog for plog in logs if plog is not None}
        if not unique:
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
    def read(self, info: TopicInfo, partition: int, offset: int, max_bytes: int, *, min_one: bool) -> FetchResult:
        if not 0 <= partition < info.num_partitions:
            return FetchResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        plog = self._topics.log(info.name, partition)
        if plog.failures.offline:
            return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR)
        hw = plog.high_watermark
        start = plog.log_start_offset
        if offset < start or offset > hw:
            return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, hw, hw, start)
        data = b""
        if offset < hw:
            try:
                data = plog.read(offset, max_bytes, min_one_batch=min_one).data
            except (OSError, KafkaStorageError) as err:
                log.error("fetch read failed", topic=info.name, partition=partition, error=repr(err))
                return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR)
        return FetchResult(ErrorCode.NONE, hw, hw, start, data)

    async def wait_for_append(self, keys: Iterable[tuple[str, int]], timeout_s: float) -> bool:
        """Park until one of `keys` gets an append or the timeout passes. True if woken by data."""
        waiter = _Waiter(frozenset(keys))
        for key in waiter.keys:
            self._waiters.setdefault(key, set()).add(waiter)
        try:
            return await wait_event(waiter.event, timeout_s)
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

    def producer_last_offsets(self, topic: str, partition: int, newer_than_ms: int) -> dict[int, int] | None:
        """Last offset of each producer's last batch (see ProducerStateTable.last_offsets), or None when this
        partition's producer state has not been loaded (the log cleaner then reads it from the batch headers)."""
        table = self._producers.get((topic, partition))
        return None if table is None else table.last_offsets(newer_than_ms)

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._producers if k[0] == topic]:
            del self._producers[key]


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


def idempotent_keys(topic_data, registry) -> list[tuple[str, int]]:
    """Partitions of a produce request whose first batch carries a producer id and sequence (cheap: one header
    read each; the full validation comes later)."""
    keys = []
    for topic in topic_data:
        name = topic.get("name")
        info = registry.get(name) if name is not None else registry.by_id(topic.get("topic_id"))
        if info is None:
            continue
        for part in topic.partition_data:
            records = part.records
            if 0 <= part.index < info.num_partitions and records is not None and len(records) >= rec.HEADER_SIZE:
                header = rec.read_header(records)
                if header.producer_id >= 0 and header.base_sequence >= 0:
                    keys.append((info.name, part.index))
    return keys
