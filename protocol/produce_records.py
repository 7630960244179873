"""The checks Kafka makes of a Produce request's records before they reach a log (sans-IO).

Kafka walks a partition's records with its ByteBufferLogInputStream: a batch is whole when its size prefix says so
(baseOffset + batchLength); bytes after the last whole batch are not a batch (they are ignored, and trimmed before
the append); a batchLength below 14 (the smallest legacy message) or a magic byte outside 0-2 cannot be walked past
and raises CORRUPT_MESSAGE. With that walk:

- `has_transactional_records(partitions)` is Kafka's RequestUtils.hasTransactionalRecords: the first batch of each
  partition, in request order, until one is transactional. Its CORRUPT_MESSAGE (`BatchWalkError`, with Kafka's
  message) fails the whole request, as an exception out of KafkaApis' handler does (ProduceRequest.getErrorResponse).
- `validate_records(version, records)` is ProduceRequest.validateRecords, per partition: exactly one whole batch,
  of magic 2, not zstd before Produce v7. Its answers carry no message and no log start offset.

What follows (the batch's base offset, size, CRC, header fields and records) is `protocol.records`'
`validate_client_batch`, in the log's order.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from protocol.errors import ErrorCode

Buffer = bytes | bytearray | memoryview

LOG_OVERHEAD = 12  # baseOffset + batchLength
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_OVERHEAD_V0 = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest batchLength walked past
MAGIC_V2 = 2
_ATTRIBUTES_AT = 21
_TRANSACTIONAL = 0x10
_COMPRESSION_MASK = 0x07
_ZSTD = 4
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")


class BatchWalkError(Exception):
    """A batch Kafka's record walk cannot pass (CORRUPT_MESSAGE); the message is Kafka's."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class UnknownCodecError(Exception):
    """A codec id Kafka does not know, read where nothing catches the failure (Produce before v7): the whole
    request is answered UNKNOWN_SERVER_ERROR, without a message."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


def next_batch(buf: Buffer, pos: int) -> tuple[int, int] | None:
    """(size, magic) of the whole batch at `pos`, or None when what is left is not a whole batch (Kafka's
    ByteBufferLogInputStream.nextBatch). Raises BatchWalkError as Kafka's nextBatchSize."""
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        return None
    length = _LENGTH.unpack_from(buf, pos + 8)[0]
    if length < RECORD_OVERHEAD_V0:
        raise BatchWalkError(f"Record size {length} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})")
    if remaining < HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = struct.unpack_from(">b", buf, pos + 16)[0]
    if not 0 <= magic <= MAGIC_V2:
        raise BatchWalkError(f"Invalid magic found in record: {magic}")
    size = length + LOG_OVERHEAD
    return None if remaining < size else (size, magic)


def has_transactional_records(partitions: Iterable[Buffer | None]) -> bool:
    """Whether the first batch of one of the partitions' records (in order; None: no records) is transactional,
    as Kafka's RequestUtils.hasTransactionalRecords. Raises BatchWalkError for a first batch it cannot read."""
    for records in partitions:
        if records is None:
            continue
        found = next_batch(records, 0)
        if found is not None and found[1] == MAGIC_V2 and \
                _ATTRIBUTES.unpack_from(records, _ATTRIBUTES_AT)[0] & _TRANSACTIONAL:
            return True
    return False


def validate_records(version: int, records: Buffer | None) -> ErrorCode:
    """ProduceRequest.validateRecords: NONE, or the partition's error (INVALID_RECORD for no whole batch, a magic
    other than 2 or a second whole batch; UNSUPPORTED_COMPRESSION_TYPE for zstd before v7; CORRUPT_MESSAGE for a
    batch the walk cannot pass). Raises UnknownCodecError for codec ids 5-7 before v7."""
    if records is None:
        # Kafka fails null records with a NullPointerException it never answers; an empty payload is refused so
        return ErrorCode.INVALID_RECORD
    try:
        first = next_batch(records, 0)
        if first is None:
            return ErrorCode.INVALID_RECORD
        size, magic = first
        if magic != MAGIC_V2:
            return ErrorCode.INVALID_RECORD
        if version < 7:
            codec = _ATTRIBUTES.unpack_from(records, _ATTRIBUTES_AT)[0] & _COMPRESSION_MASK
            if codec > _ZSTD:
                raise UnknownCodecError(f"Unknown compression type id: {codec}")
            if codec == _ZSTD:
                return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if next_batch(records, size) is not None:
            return ErrorCode.INVALID_RECORD
    except BatchWalkError as err:
        return err.error_code
    return ErrorCode.NONE
