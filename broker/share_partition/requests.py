"""What the share-partition leader's two entries take and answer (Kafka's SharePartitionManager.fetchMessages and
acknowledge): a ShareFetch (its share-session part, its acknowledgements, its fetch budgets), a ShareAcknowledge,
and what each partition answers. The ShareFetch and ShareAcknowledge handlers decode the wire request into these
and encode the answer back; records stay the log reads' bytes throughout.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.share_partition.inflight import AcquiredRange
from protocol.errors import ErrorCode
from protocol.primitives import BytesParts

TopicPartition = tuple[uuid.UUID, int]  # (topic id, partition)


class ShareFetchParams(NamedTuple):  # built per ShareFetch: a tuple builds faster than a frozen dataclass
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # 0: answered at once with nothing; below 0: refused per partition (see delayed_fetch)
    max_records: int  # 0: fetch nothing (Kafka answers at once); below 0: acquire nothing
    strict: bool = False  # record_limit acquire mode (v2): MaxRecords is a hard limit
    session_epoch: int = 0  # the request's ShareSessionEpoch: where the partition order is rotated to


class PartitionAcks(NamedTuple):
    """One partition's acknowledgement batches as (first offset, last offset, acknowledge types), and whether one
    of them is a RENEW (v2)."""

    batches: list[tuple[int, int, list[int]]]
    renew: bool = False


# A partition's acknowledgements, or None when they hold a type the request's version does not know (or a RENEW in
# a request not flagged IsRenewAck): the partition is answered INVALID_REQUEST.
Acknowledgements = PartitionAcks | None


class ShareFetch(NamedTuple):  # one per ShareFetch: a tuple builds faster than a frozen dataclass
    group: str
    member: str
    session_epoch: int
    connection_id: int  # the connection the request came on: a session opened by it lives as long as it
    partitions: Sequence[TopicPartition]  # those the request names, in its order
    forgotten: Sequence[TopicPartition]
    acknowledgements: Mapping[TopicPartition, Acknowledgements]  # the partitions with acknowledgement batches
    params: ShareFetchParams
    renew_only: bool = False  # IsRenewAck (v2): the request only acknowledges, it fetches nothing


@dataclass(slots=True)
class PartitionAnswer:
    """What one partition of a ShareFetch answers."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    ack_error: ErrorCode = ErrorCode.NONE
    ack_message: str | None = None
    records: bytes | memoryview | BytesParts = b""  # whole batches holding the acquired records
    acquired: Sequence[AcquiredRange] = ()


@dataclass(slots=True)
class ShareFetchAnswer:
    """A ShareFetch's answer: a top-level error (nothing else then), or the partitions' answers in response
    order, with the group's record lock duration."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None  # for the log: Kafka's error response carries no message
    lock_duration_ms: int = 0
    partitions: list[tuple[TopicPartition, PartitionAnswer]] = field(default_factory=list)


class ShareAcknowledge(NamedTuple):
    group: str
    member: str
    session_epoch: int
    partitions: Sequence[tuple[TopicPartition, Acknowledgements]]  # in the request's order


@dataclass(slots=True)
class ShareAcknowledgeAnswer:
    """A ShareAcknowledge's answer: a top-level error (nothing else then), or (error, message) for each partition
    of the request, in its order, with the group's record lock duration."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    lock_duration_ms: int = 0
    partitions: list[tuple[ErrorCode, str | None]] = field(default_factory=list)
