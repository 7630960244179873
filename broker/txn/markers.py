"""Transaction markers: the interface the coordinator writes them through, routing, and Kafka's retry policy.

`TxnMarkerWriter` is what a partition side implements (the ReplicaManager for data partitions, the group
coordinator for `__consumer_offsets`, whose markers settle transactional offset commits): write one control
batch per marker and answer one error per (topic, partition), NONE once the batch is durable.

`TxnPartitionVerifier` is what the produce path calls before appending a transactional batch (KIP-890 part 1):
the coordinator answers, per partition, NONE if it is in the transaction, TRANSACTION_ABORTABLE if not.

`write_until_done` is Kafka's TransactionMarkerChannelManager policy on a single node: retriable errors are
retried with backoff until every marker is written; a partition deleted meanwhile counts as written (Kafka drops
partitions whose topic left the metadata); a fenced coordinator stops sending (another load owns the
transaction now, and resends itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

from protocol.errors import ErrorCode

from .results import TxnMarker

log = structlog.get_logger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

TopicPartitionKey = tuple[str, int]


class TxnMarkerWriter(Protocol):
    async def write_txn_markers(self, markers: Sequence[TxnMarker]) -> dict[TopicPartitionKey, ErrorCode]:
        """Write each marker as a control batch; one error per (topic, partition), NONE once durable."""
        ...


class TxnPartitionVerifier(Protocol):
    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Sequence[TopicPartitionKey], *,
                                add: bool = False) -> dict[TopicPartitionKey, ErrorCode]:
        """Per partition: NONE if it is in the producer's ongoing transaction, else the error to answer the
        produce request with (TRANSACTION_ABORTABLE, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, ...).
        `add`: add the partitions to the transaction instead (TV2: Produce v12, TxnOffsetCommit v5)."""
        ...


class RoutedMarkerWriter:
    """`__consumer_offsets` markers to `offsets_writer`, every other to `data_writer`, concurrently."""

    def __init__(self, data_writer: TxnMarkerWriter, offsets_writer: TxnMarkerWriter) -> None:
        self._data = data_writer
        self._offsets = offsets_writer

    async def write_txn_markers(self, markers: Sequence[TxnMarker]) -> dict[TopicPartitionKey, ErrorCode]:
        offsets = [m for m in markers if m.topic == OFFSETS_TOPIC]
        data = [m for m in markers if m.topic != OFFSETS_TOPIC]
        calls = [w.write_txn_markers(ms) for w, ms in ((self._data, data), (self._offsets, offsets)) if ms]
        out: dict[TopicPartitionKey, ErrorCode] = {}
        for part in await asyncio.gather(*calls):
            out.update(part)
        return out


# Kafka's TransactionMarkerRequestCompletionHandler: retried (the partition's leader is elsewhere or its log is
# momentarily unable to take it).
RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
})
# The marker is refused because its coordinator epoch is stale: stop (Kafka aborts sending for the transaction).
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


class MarkersFenced(Exception):
    """A partition refused a marker as coming from a stale coordinator: the transaction must not be completed."""


async def write_until_done(writer: TxnMarkerWriter, markers: Sequence[TxnMarker], *,
                           partition_exists: Callable[[str, int], bool],
                           still_wanted: Callable[[], bool] = lambda: True,
                           backoff_ms: int = 100, max_backoff_ms: int = 5000) -> bool:
    """Write `markers` (one transaction's) until each is written or its partition is gone. Returns False if
    `still_wanted()` turned False (the transaction was completed or reloaded meanwhile); raises MarkersFenced.
    Errors outside Kafka's lists are retried too (logged): Kafka throws on them and leaves the transaction
    hanging; retrying keeps it pending without ever completing it wrongly."""
    pending = list(markers)
    delay = backoff_ms
    while pending:
        if not still_wanted():
            return False
        try:
            errors = await writer.write_txn_markers(pending)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a writer failure is retried like an error answer
            log.exception("transaction marker write failed", markers=len(pending))
            errors = {}
        retry = []
        for m in pending:
            code = errors.get((m.topic, m.partition), ErrorCode.UNKNOWN_SERVER_ERROR)
            if code is ErrorCode.NONE:
                continue
            if code in FENCED:
                raise MarkersFenced(f"{m.topic}-{m.partition}: {code.name}")
            if not partition_exists(m.topic, m.partition):
                continue  # deleted meanwhile: nothing left to mark
            if code not in RETRIABLE:
                log.warning("unexpected transaction marker error, retrying", topic=m.topic, partition=m.partition,
                            error=code.name, transactional_id=m.transactional_id)
            retry.append(m)
        pending = retry
        if pending:
            await asyncio.sleep(delay / 1000)
            delay = min(delay * 2, max_backoff_ms)
    return True
