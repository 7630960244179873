"""Transaction markers: the COMMIT/ABORT control batches that end a transaction on a partition, sans-IO.

A marker is a RecordBatch v2 written by the partition leader (never by a client) on the transaction coordinator's
WriteTxnMarkers request, laid out as Kafka's `MemoryRecords.withEndTransactionMarker` lays it out:

* batch: attributes transactional + control, no compression, CreateTime; the transaction's producer id and epoch;
  baseSequence -1; one record; base and max timestamp the time of writing;
* the record: attributes 0, timestamp and offset deltas 0, no headers;
* key, Kafka's ControlRecordType key: version int16 (0), type int16 (ABORT 0, COMMIT 1);
* value, Kafka's EndTransactionMarker: version int16 (0), coordinatorEpoch int32.

That is 78 bytes in all (61 header + 17 record). Parsing follows Kafka's leniency: a key or value of a higher
version is read as version 0 (later versions may only add fields); a negative version, or a key or value shorter
than version 0's, is INVALID_RECORD.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

from protocol.records import (
    HEADER_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    NO_SEQUENCE,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    build_batch,
    iter_batch_views,
    iter_records,
    read_header,
)

__all__ = [
    "ControlRecordType",
    "EndTxnMarker",
    "MARKER_BATCH_SIZE",
    "build_end_txn_marker",
    "control_key",
    "end_txn_marker_value",
    "iter_txn_batches",
    "parse_control_key",
    "parse_end_txn_marker_value",
    "read_control_type",
    "read_end_txn_marker",
]


class ControlRecordType(IntEnum):
    """The `type` of a control record key (Kafka's ControlRecordType; 2-6 are KRaft's, listed to be recognised)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
MARKER_BATCH_SIZE = 78


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """What a marker says: how the transaction ended, and the epoch of the coordinator that ended it."""

    commit: bool
    coordinator_epoch: int

    @property
    def control_type(self) -> ControlRecordType:
        return ControlRecordType.COMMIT if self.commit else ControlRecordType.ABORT


# --- key and value -----------------------------------------------------------------------------------------------
def control_key(control_type: ControlRecordType) -> bytes:
    if control_type == ControlRecordType.UNKNOWN:
        raise ValueError("an UNKNOWN control record type cannot be written")
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def parse_control_key(key: bytes | None) -> ControlRecordType:
    """The type named by a control record's key; UNKNOWN for a type this broker does not know."""
    if key is None or len(key) < _KEY.size:
        raise InvalidRecordError(f"control record key has {0 if key is None else len(key)} bytes, "
                                 f"needs at least {_KEY.size}")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"control record key has version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def parse_end_txn_marker_value(control_type: ControlRecordType, value: bytes | None) -> EndTxnMarker:
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(f"control record type {control_type!r} is not a transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise InvalidRecordError(f"end transaction marker value has {0 if value is None else len(value)} bytes, "
                                 f"needs at least {_VALUE.size}")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"end transaction marker has version {version}")
    return EndTxnMarker(control_type == ControlRecordType.COMMIT, coordinator_epoch)


# --- batches -----------------------------------------------------------------------------------------------------
def build_end_txn_marker(*, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                         base_offset: int = 0, timestamp: int | None = None,
                         partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """The 78-byte marker batch ending `producer_id`'s transaction. `timestamp` defaults to now (ms)."""
    if producer_id < 0:
        raise ValueError("a transaction marker needs a producer id")
    marker = EndTxnMarker(commit, coordinator_epoch)
    record = Record(control_key(marker.control_type), end_txn_marker_value(coordinator_epoch))
    return build_batch([record], base_offset, timestamp, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=NO_SEQUENCE, partition_leader_epoch=partition_leader_epoch,
                       transactional=True, control=True)


def read_control_type(batch: Buffer) -> ControlRecordType | None:
    """The control type of the batch starting at byte 0 of `batch` (its first record's key); None for a data
    batch or a control batch without records (the log cleaner empties those, as Kafka's)."""
    first = _first_control_record(batch)
    return None if first is None else parse_control_key(first.key)


def read_end_txn_marker(batch: Buffer) -> EndTxnMarker | None:
    """The marker carried by the batch starting at byte 0 of `batch`; None for a data batch, an empty control batch
    or a control batch of another type. Raises InvalidRecordError / CorruptRecordError for a malformed one."""
    first = _first_control_record(batch)
    if first is None:
        return None
    control_type = parse_control_key(first.key)
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    return parse_end_txn_marker_value(control_type, first.value)


def _first_control_record(batch: Buffer) -> Record | None:
    if len(batch) < HEADER_SIZE:
        raise CorruptRecordError("truncated record batch")
    if not read_header(batch).is_control:
        return None
    return next(iter_records(batch), None)


def iter_txn_batches(buf: Buffer, start: int = 0) -> Iterator[tuple[BatchHeader, EndTxnMarker | None]]:
    """(header, marker) of each whole batch of `buf` from position `start`: what the transaction state needs from a
    scan of the log. Only control batches are decoded (a marker is 78 bytes); data batches give None."""
    for _pos, header, view in iter_batch_views(buf, start):
        yield header, (read_end_txn_marker(view) if header.is_control else None)
