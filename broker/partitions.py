"""The partition layer between handlers and logs: produce validation, idempotence, durability, fetch waits.

Handlers stay thin: they turn wire structures into calls here. Batches are handled as opaque bytes; only the
61-byte batch header is read (producer id, sequence, counts) on the hot path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from broker.cluster.topics import TopicInfo
from broker.log.dir_failure import STORAGE_ERROR_MESSAGE, KafkaStorageError
from broker.producer_state import BatchMetadata, ProducerStateTable
from protocol import records as rec
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

LOG_APPEND_TIME = "LogAppendTime"


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
    def __init__(self, topics, flusher, *, clock=time.time) -> None:
        self._topics = topics  # broker.cluster.manager.TopicManager
        self._flusher = flusher
        self._clock = clock
        self._producers: dict[tuple[str, int], ProducerStateTable] = {}
        self._waiters: dict[tuple[str, int], set[_Waiter]] = {}

    # --- produce ---------------------------------------------------------------------------------------------
    def producer_table(self, topic: str, partition: int) -> ProducerStateTable:
        key = (topic, partition)
        table = self._producers.get(key)
        if table is None:
            table = ProducerStateTable()
            # Rebuild idempotence state from the batch headers already in the log (survives restarts).
            plog = self._topics.log(topic, partition)
            for header in plog.iter_batch_headers():
                if header.producer_id >= 0 and header.base_sequence >= 0:
                    table.record(
                        header.producer_id,
                        header.producer_epoch,
                        BatchMetadata(
                            header.base_sequence,
                            header.base_sequence + header.last_offset_delta,
                            header.base_offset,
                            header.base_offset + header.last_offset_delta,
                            header.max_timestamp,
                        ),
                    )
            self._producers[key] = table
        return table

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
        table = self.producer_table(info.name, partition)
        last_seq = header.base_sequence + header.last_offset_delta
        check = table.check(header.producer_id, header.producer_epoch, header.base_sequence, last_seq)
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
        table.record(
            header.producer_id,
            header.producer_epoch,
            BatchMetadata(header.base_sequence, last_seq, appended.base_offset, appended.last_offset,
                          header.max_timestamp),
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
            await asyncio.wait_for(waiter.event.wait(), timeout_s)
            return True
        except TimeoutError:
            return False
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
