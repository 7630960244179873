"""A share-partition as the share-partition leader keeps it (Kafka's SharePartition: its in-flight records, the
group settings applied to them, its pending state write and parked fetches), what an acquisition from it answers,
and the error a share-partition operation answers with."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from broker.config.group_config import GroupConfig
from broker.share_partition.inflight import AcquiredRange, ShareInFlight
from protocol.errors import ErrorCode
from protocol.primitives import BytesParts

PartitionKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


class ShareError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def offline_error(topic: str, partition: int) -> ShareError:
    """Kafka's message for a partition in an offline log directory (ReplicaManager.getPartitionOrException)."""
    return ShareError(ErrorCode.KAFKA_STORAGE_ERROR, f"Partition {topic}-{partition} is in an offline log directory")


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The group configs the leader applies, read from one object of the group's effective configs (`source`)."""

    source: GroupConfig
    lock_duration_ms: int
    delivery_count_limit: int
    max_in_flight_records: int
    renew_enabled: bool
    read_committed: bool


@dataclass
class SharePartition:
    key: PartitionKey
    topic: str
    inflight: ShareInFlight
    # Writes of one partition go out in order: each waits for the previous (a later delta never lands first).
    last_write: asyncio.Future[ErrorCode] | None = None
    waiters: set[asyncio.Event] = field(default_factory=set)
    # Dropped from the manager (topic deleted, or memory discarded after a failed state write): a fetch that
    # still holds it acquires nothing from it, and changes to it are answered with `failure`.
    dead: bool = False
    failure: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    settings: GroupSettings | None = None  # the group settings last applied to `inflight`
    # The next fetch offset when a share fetch last looked at this share-partition (None: never): one whose
    # next fetch offset moved since (it was served, or records came back) is acquired from after the others
    # (see DelayedShareFetch._order).
    probed_at: int | None = None


@dataclass(slots=True)
class Acquired:
    ranges: list[AcquiredRange]
    # whole batches: a slice of the log read when only new records were acquired, slices of several reads as
    # BytesParts (their concatenation)
    records: bytes | memoryview | BytesParts
