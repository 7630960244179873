"""Kafka RecordBatch v2 (magic 2), sans-IO.

Batches stay bytes. The hot path (produce validation, log append, log recovery, fetch) only reads the 61-byte
batch header and checks the CRC-32C; records are decoded only where semantics demand it (internal topics,
timestamp lookups, tools).

Batch header (all big-endian)::

    0  baseOffset            int64    not covered by the CRC (patched by the broker)
    8  batchLength           int32    bytes after this field (total size - 12)
    12 partitionLeaderEpoch  int32    not covered by the CRC (patched by the broker)
    16 magic                 int8     2
    17 crc                   uint32   CRC-32C of attributes..end of batch
    21 attributes            int16    bits 0-2 compression, 3 LogAppendTime, 4 transactional, 5 control,
                                      6 delete horizon
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records

Records (uncompressed, or after decompression): varint length, int8 attributes, varlong timestampDelta, varint
offsetDelta, varint key length (-1 = null) + key, varint value length (-1 = null) + value, varint header count, then
per header: varint key length + UTF-8 key, varint value length (-1 = null) + value. Varints are zigzag-encoded.

Produce (`validate_client_batch`) checks a client's batch in the order of Kafka's log and also proves every
record's framing, as Kafka's LogValidator does by parsing each record: compressed payloads are decompressed
(bounded, `protocol.compression`) and walked (`protocol.record_check`). A framing error is INVALID_RECORD (Kafka's
InvalidRecordException); a payload that does not decompress is UNKNOWN_SERVER_ERROR (Kafka fails it with an
unexpected exception); one that decompresses past `MAX_DECOMPRESSED_BYTES` is MESSAGE_TOO_LARGE.
`validate_batches(..., check_records=True)` makes the same record check on any run of batches (CORRUPT_MESSAGE for
a payload that does not decompress).

As Kafka's DefaultRecord, a negative key, value or header value length is a null (writers use -1). Every decoder
here rejects lengths and counts larger than the bytes left and bytes left over, so a hostile batch cannot make one
loop or allocate without bound.

Compression: `decode_records` and `build_batch` handle every codec (gzip, snappy, lz4, zstd); codec ids 5-7 raise
`UnsupportedCompressionError`.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NamedTuple, overload

from crc32c import crc32c

from protocol import compression as codecs
from protocol.errors import ErrorCode
from protocol.record_check import FramingError, check_records

__all__ = [
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_LOG_APPEND_TIME",
    "ATTR_TRANSACTIONAL",
    "BATCH_BOUNDS",
    "BatchHeader",
    "COMPRESSION_GZIP",
    "COMPRESSION_LZ4",
    "COMPRESSION_NONE",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_ZSTD",
    "CorruptRecordError",
    "HEADER_SIZE",
    "InvalidRecordError",
    "KeylessRecordError",
    "MAX_DECOMPRESSED_BYTES",
    "RecordsTooLargeError",
    "Record",
    "RecordError",
    "UndecodableRecordsError",
    "UnsupportedCompressionError",
    "batch_crc",
    "build_batch",
    "clear_log_append_time",
    "decode_records",
    "iter_batch_views",
    "is_control_at",
    "iter_batches",
    "iter_records",
    "iter_timestamps",
    "recompress",
    "patch_base_offset",
    "patch_base_offset_and_leader_epoch",
    "patch_leader_epoch",
    "patch_log_append_time",
    "read_header",
    "validate_batches",
    "validate_client_batch",
]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
_HEADER_HEAD = struct.Struct(">qiibI")  # HEADER's fields before the CRC-covered part (baseOffset..crc)
_HEADER_TAIL = struct.Struct(">hiqqqhii")  # and the CRC-covered ones (attributes..recordsCount)
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC = 2

# byte positions inside a batch
_BATCH_LENGTH_AT = 8
_LEADER_EPOCH_AT = 12
_MAGIC_AT = 16
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35

COMPRESSION_MASK = 0x07
COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = 0, 1, 2, 3, 4
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

# Upper bound of one batch's decompressed records (Kafka has none; a small batch must not make us allocate
# gigabytes). Producers close batches near batch.size (librdkafka: 1 MB before compression).
MAX_DECOMPRESSED_BYTES = 64 << 20

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_LENGTH_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
# baseOffset, batchLength, (partitionLeaderEpoch, magic, crc skipped), attributes, lastOffsetDelta
BATCH_BOUNDS = struct.Struct(">qi9xhi")

Buffer = bytes | bytearray | memoryview


# --- errors ------------------------------------------------------------------------------------------------------
class RecordError(Exception):
    """Base class; `error_code` is the Kafka error a produce response should carry, `with_log_start` whether Kafka
    answers it with the partition's log start offset (errors its log raises unexpectedly) or -1 (the errors its
    ReplicaManager expects: corrupt or too large records)."""

    # Class attributes (ClassVar), as the subclasses set them: a mypyc-compiled build (setup.py) would otherwise
    # make them instance attributes that a subclass's own __init__ leaves unset
    error_code: ClassVar[ErrorCode] = ErrorCode.CORRUPT_MESSAGE
    with_log_start: ClassVar[bool] = False


class CorruptRecordError(RecordError):
    """Bad CRC, impossible batchLength, truncated batch → CORRUPT_MESSAGE."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(RecordError):
    """Well-formed bytes with unacceptable content (magic, counts, control batch from a client) → INVALID_RECORD."""

    error_code = ErrorCode.INVALID_RECORD
    with_log_start = True


class RecordsTooLargeError(RecordError):
    """A compressed batch whose records decompress past MAX_DECOMPRESSED_BYTES → MESSAGE_TOO_LARGE."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class KeylessRecordError(InvalidRecordError):
    """Records without a key sent to a compacted topic (Kafka's LogValidator.validateKey) → INVALID_RECORD, with
    the batch index of every such record (Produce's RecordErrors)."""

    def __init__(self, indexes: list[int], where: str, headers: list[BatchHeader] | None = None) -> None:
        self.indexes = indexes
        self.headers = headers or []  # the payload's batches (otherwise valid): later checks go on with them
        self.record_message = f"Compacted topic cannot accept message without key in topic partition {where}"
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{self.record_message}')" for i in indexes[:3])
        super().__init__(f"One or more records have been rejected due to {len(indexes)} record errors in total, "
                         f"and only showing the first three errors at most: [{shown}]")


class UnsupportedCompressionError(RecordError):
    """Records of a batch compressed with a codec this module cannot decode."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class UndecodableRecordsError(RecordError):
    """A client batch Kafka's broker fails to read with an unexpected exception: a compression codec id it does
    not know, a payload that does not decompress (or an LZ4 frame its reader refuses). Kafka answers such a
    produce UNKNOWN_SERVER_ERROR, with the log start offset."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR
    with_log_start = True


# --- header view -------------------------------------------------------------------------------------------------
class BatchHeader(NamedTuple):
    """The 61-byte header of one batch (a snapshot: patching the buffer later does not change it)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including baseOffset and batchLength."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)


_make_header = BatchHeader._make
_unpack_header = HEADER.unpack_from


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos` (no checks beyond there being 61 bytes)."""
    return _make_header(_unpack_header(buf, pos))


def is_control_at(buf: Buffer, pos: int) -> bool:
    """Whether the batch at `pos` is a control batch (the flag is in the low byte of the big-endian attributes)."""
    return bool(buf[pos + _ATTRIBUTES_AT + 1] & ATTR_CONTROL)


def batch_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of the CRC-covered part (attributes..end) of the batch at `pos` of total `size`."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    return crc32c(mv[pos + _ATTRIBUTES_AT:pos + size])


# --- iteration ---------------------------------------------------------------------------------------------------
def iter_batches(buf: Buffer, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield `(position, header)` for each complete batch; stop quietly at a partial trailing batch.

    No CRC check. Raises CorruptRecordError for a batchLength that cannot be right (iteration could not advance).
    """
    end = len(buf)
    pos = start
    while pos + HEADER_SIZE <= end:
        header = _make_header(_unpack_header(buf, pos))
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch at position {pos} has batchLength {header.batch_length}")
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > end:
            return
        yield pos, header
        pos += size


def iter_batch_views(buf: Buffer, start: int = 0) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Like iter_batches, also yielding a memoryview of each whole batch."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    for pos, header in iter_batches(mv, start):
        yield pos, header, mv[pos:pos + header.batch_length + LOG_OVERHEAD]


def validate_batches(buf: Buffer, *, allow_control: bool = False, check_records: bool = False,
                     require_keys: str | None = None) -> list[BatchHeader]:
    """Check every batch of a produce payload: framing, magic, CRC-32C, counts. The buffer must hold whole batches.

    `check_records` (client produce): also check the framing of every record, decompressing compressed payloads.
    `require_keys` (with `check_records`; a compacted topic, named `topic-partition` in the message): records
    without a key raise KeylessRecordError once the whole payload is otherwise valid.
    Raises CorruptRecordError (CORRUPT_MESSAGE), InvalidRecordError (INVALID_RECORD) or RecordsTooLargeError
    (MESSAGE_TOO_LARGE). Control batches are refused unless `allow_control` (only the broker writes them).
    """
    keyless: list[int] | None = [] if require_keys is not None and check_records else None
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    data: bytes | bytearray | None = None  # the bytes the record check slices (a copy only for memoryviews)
    end = len(mv)
    pos = 0
    headers: list[BatchHeader] = []
    while pos < end:
        if pos + HEADER_SIZE > end:
            if pos + _MAGIC_AT < end and mv[pos + _MAGIC_AT] != MAGIC:
                raise InvalidRecordError(f"unsupported record batch magic {mv[pos + _MAGIC_AT]}")
            raise CorruptRecordError(f"truncated record batch at position {pos}: {end - pos} bytes left")
        header = _make_header(_unpack_header(mv, pos))
        if header.magic != MAGIC:
            raise InvalidRecordError(f"unsupported record batch magic {header.magic} (only magic 2 is accepted)")
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch at position {pos} has invalid batchLength {header.batch_length}")
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > end:
            raise CorruptRecordError(
                f"truncated record batch at position {pos}: batch size {size}, {end - pos} bytes left")
        if crc32c(mv[pos + _ATTRIBUTES_AT:pos + size]) != header.crc:
            raise CorruptRecordError(f"record batch at position {pos} fails its CRC-32C check")
        if header.records_count <= 0:
            raise InvalidRecordError(f"record batch at position {pos} has recordsCount {header.records_count}")
        if header.last_offset_delta != header.records_count - 1:
            raise InvalidRecordError(
                f"record batch at position {pos} has lastOffsetDelta {header.last_offset_delta} "
                f"but {header.records_count} records")
        compression = header.attributes & COMPRESSION_MASK
        if compression > COMPRESSION_ZSTD:
            raise InvalidRecordError(f"record batch at position {pos} has unknown compression codec {compression}")
        if compression == COMPRESSION_NONE and size - HEADER_SIZE < 7 * header.records_count:
            # every uncompressed record takes at least 7 bytes (length, attrs, ts, offset, key, value, headers)
            raise InvalidRecordError(f"record batch at position {pos} is too short for {header.records_count} records")
        if header.attributes & ATTR_CONTROL and not allow_control:
            raise InvalidRecordError("clients may not write control batches")
        if check_records:
            if compression == COMPRESSION_NONE:
                if data is None:
                    data = buf if isinstance(buf, bytes | bytearray) else bytes(mv)
                _check_framing(data, pos + HEADER_SIZE, pos + size, header.records_count, pos, keyless)
            else:
                payload, n = _decompress(mv[pos + HEADER_SIZE:pos + size], compression, scratch=True)
                _check_framing(payload, 0, n, header.records_count, pos, keyless)
        headers.append(header)
        pos += size
    if keyless:
        raise KeylessRecordError(keyless, require_keys or "", headers)
    return headers


def validate_client_batch(buf: Buffer, *, max_message_bytes: int, require_keys: str | None = None,
                          from_client: bool = True) -> BatchHeader:
    """The batch at the start of a client's produce payload, checked as Kafka's log checks it (the request's own
    checks, `protocol.produce_records.validate_records`, found one whole batch of magic 2 there; bytes after it
    are not looked at). In Kafka's order (UnifiedLog.analyzeAndValidateRecords, then LogValidator): baseOffset 0
    (InvalidRecordError), the batch size against `max_message_bytes` (RecordsTooLargeError), the CRC-32C
    (CorruptRecordError), a codec id Kafka knows (UndecodableRecordsError), the header's offsets and counts, no
    control batch from a client, a sequence with a producer id (InvalidRecordError), then every record's framing
    (InvalidRecordError) after decompressing (a payload that does not decompress: UndecodableRecordsError; past
    MAX_DECOMPRESSED_BYTES: RecordsTooLargeError). `require_keys` (a compacted topic, named `topic-partition` in
    the message): records without a key raise KeylessRecordError, once the rest is valid. Without `from_client`
    (a coordinator's batch) the checks Kafka makes of clients' batches only (base offset, producer id without
    sequence) are not made."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    base_offset, batch_length = _LENGTH_PREFIX.unpack_from(mv, 0)
    size = batch_length + LOG_OVERHEAD
    if base_offset != 0 and from_client:
        raise InvalidRecordError(f"The baseOffset of the record batch should be 0, but it is {base_offset}")
    if size > max_message_bytes:
        raise RecordsTooLargeError(f"The record batch size {size} exceeds max.message.bytes {max_message_bytes}")
    if size < HEADER_SIZE or crc32c(mv[_ATTRIBUTES_AT:size]) != _U32.unpack_from(mv, _CRC_AT)[0]:
        raise CorruptRecordError("Record is corrupt (its CRC-32C does not match)")
    header = _make_header(_unpack_header(mv, 0))
    compression = header.attributes & COMPRESSION_MASK
    if compression > COMPRESSION_ZSTD:
        raise UndecodableRecordsError(f"Unknown compression type id: {compression}")
    count = header.records_count
    if header.last_offset_delta + 1 <= 0 or count <= 0 or header.last_offset_delta + 1 != count:
        raise InvalidRecordError(f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of "
                                 f"records {count}")
    if header.attributes & ATTR_CONTROL:  # markers are written by the replica manager, never through here
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0 and from_client:
        raise InvalidRecordError(f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                                 f"{header.producer_id}")
    keyless: list[int] | None = [] if require_keys is not None else None
    if compression == COMPRESSION_NONE:
        if size - HEADER_SIZE < 7 * count:  # every record takes at least 7 bytes
            raise InvalidRecordError(f"The batch is too short for {count} records")
        data = buf if isinstance(buf, bytes | bytearray) else bytes(mv[:size])
        _check_framing(data, HEADER_SIZE, size, count, 0, keyless)
    else:
        try:
            if compression == COMPRESSION_LZ4:
                codecs.check_lz4_frame(mv[HEADER_SIZE:size])  # what Kafka's Java reader refuses
            payload, n = codecs.decompress_scratch(compression, mv[HEADER_SIZE:size], MAX_DECOMPRESSED_BYTES)
        except codecs.DecompressedTooLargeError as err:
            raise RecordsTooLargeError(f"{codecs.NAMES[compression]} records: {err}") from None
        except codecs.CompressionError as err:
            raise UndecodableRecordsError(f"bad {codecs.NAMES[compression]} payload: {err}") from None
        _check_framing(payload, 0, n, count, 0, keyless)
    if keyless:
        raise KeylessRecordError(keyless, require_keys or "", [header])
    return header


def clear_log_append_time(batch: Buffer) -> bytes:
    """A copy of one batch without its LogAppendTime flag (CRC recomputed): what Kafka's log stores of a client
    batch flagged LogAppendTime on a CreateTime topic (its records read MaxTimestamp, which stays)."""
    out = bytearray(batch)
    _I16.pack_into(out, _ATTRIBUTES_AT, _I16.unpack_from(out, _ATTRIBUTES_AT)[0] & ~ATTR_LOG_APPEND_TIME)
    _U32.pack_into(out, _CRC_AT, batch_crc(out, 0, len(out)))
    return bytes(out)


def _check_framing(data: bytes | bytearray, start: int, end: int, count: int, pos: int,
                   keyless: list[int] | None = None) -> None:
    try:
        check_records(data, start, end, count, keyless)
    except FramingError as err:
        raise InvalidRecordError(f"record batch at position {pos}: {err}") from None


@overload
def _decompress(raw: Buffer, compression: int, *, scratch: Literal[False] = False) -> bytearray: ...
@overload
def _decompress(raw: Buffer, compression: int, *, scratch: Literal[True]) -> tuple[bytearray, int]: ...
def _decompress(raw: Buffer, compression: int, *, scratch: bool = False) -> bytearray | tuple[bytearray, int]:
    """The decompressed payload: a buffer of its own, or (scratch buffer, length) for a check made at once."""
    try:
        if scratch:
            return codecs.decompress_scratch(compression, raw, MAX_DECOMPRESSED_BYTES)
        return codecs.decompress(compression, raw, MAX_DECOMPRESSED_BYTES)
    except codecs.DecompressedTooLargeError as err:
        raise RecordsTooLargeError(f"{codecs.NAMES[compression]} records: {err}") from None
    except codecs.CompressionError as err:
        raise CorruptRecordError(f"bad {codecs.NAMES.get(compression, compression)} payload: {err}") from None


# --- patching ----------------------------------------------------------------------------------------------------
def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Set baseOffset of the batch at `pos` (outside the CRC)."""
    _I64.pack_into(buf, pos, base_offset)


def patch_base_offset_and_leader_epoch(buf: bytearray | memoryview, pos: int, base_offset: int, batch_length: int,
                                       epoch: int) -> None:
    """patch_base_offset and patch_leader_epoch in one write (`batch_length` is written back as it is)."""
    _OFFSET_LENGTH_EPOCH.pack_into(buf, pos, base_offset, batch_length, epoch)


def patch_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Set partitionLeaderEpoch of the batch at `pos` (outside the CRC)."""
    _I32.pack_into(buf, pos + _LEADER_EPOCH_AT, epoch)


def patch_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Mark the batch at `pos` LogAppendTime with maxTimestamp = `timestamp`, and recompute its CRC."""
    attributes = _I16.unpack_from(buf, pos + _ATTRIBUTES_AT)[0] | ATTR_LOG_APPEND_TIME
    _I16.pack_into(buf, pos + _ATTRIBUTES_AT, attributes)
    _I64.pack_into(buf, pos + _MAX_TIMESTAMP_AT, timestamp)
    size = _I32.unpack_from(buf, pos + _BATCH_LENGTH_AT)[0] + LOG_OVERHEAD
    _U32.pack_into(buf, pos + _CRC_AT, batch_crc(buf, pos, size))


# --- varints -----------------------------------------------------------------------------------------------------
def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)  # zigzag (works for int32 and int64 values)
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise CorruptRecordError("truncated varint in record") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long in record")
    return (result >> 1) ^ -(result & 1), pos


# --- records -----------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Record:
    """One record. `timestamp` None in build_batch means the batch timestamp; `offset` is filled by decoding."""

    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None
    offset: int = -1
    attributes: int = 0


def _encode_record(out: bytearray, record: Record, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray()
    body.append(record.attributes & 0xFF)
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    for blob in (record.key, record.value):
        if blob is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(blob))
            body += blob
    _write_varint(body, len(record.headers))
    for hkey, hvalue in record.headers:
        raw = hkey.encode()
        _write_varint(body, len(raw))
        body += raw
        if hvalue is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(hvalue))
            body += hvalue
    _write_varint(out, len(body))
    out += body


def build_batch(
    records: list[Record],
    base_offset: int = 0,
    timestamp: int | None = None,
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
    compression: int = COMPRESSION_NONE,
    compression_level: int | None = None,
) -> bytes:
    """Encode `records` as one v2 batch (any codec, at `compression_level` if given; snappy with Java's xerial
    framing). `timestamp` defaults to now (ms)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    stamps = [timestamp if r.timestamp is None else r.timestamp for r in records]
    base_ts = stamps[0]
    max_ts = max(stamps)
    body = bytearray()
    for i, (record, ts) in enumerate(zip(records, stamps, strict=True)):
        _encode_record(body, record, i, ts - base_ts)
    if compression == COMPRESSION_NONE:
        payload = bytes(body)
    elif compression in codecs.NAMES:
        payload = codecs.compress(compression, body, level=compression_level)
    else:
        raise UnsupportedCompressionError(f"cannot build batches with compression codec {compression}")
    attributes = compression
    if log_append_time:
        attributes |= ATTR_LOG_APPEND_TIME
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    batch = bytearray(HEADER_SIZE + len(payload))
    HEADER.pack_into(batch, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), partition_leader_epoch,
                     MAGIC, 0, attributes, len(records) - 1, base_ts, max_ts, producer_id, producer_epoch,
                     base_sequence, len(records))
    batch[HEADER_SIZE:] = payload
    _U32.pack_into(batch, _CRC_AT, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    _write_varint(out, value)
    return bytes(out)


_SMALL_VARINTS = tuple(_varint_bytes(n) for n in range(-1, 1024))  # zigzag varints of -1..1023, precomputed


def _varint(value: int) -> bytes:
    return _SMALL_VARINTS[value + 1] if -1 <= value < 1023 else _varint_bytes(value)


def build_keyed_batch(records: Sequence[tuple[bytes, bytes | None]], timestamp: int | None = None, *,
                      producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                      transactional: bool = False) -> tuple[bytes, BatchHeader]:
    """A coordinator's batch: uncompressed (key, value-or-tombstone) records without headers, all at `timestamp`
    (now by default), and its header. The same bytes as build_batch, built without Record objects and returned
    with the header, so that the broker appending its own batch need not parse it back (hot: every share-state
    write and offset commit)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    parts: list[bytes] = []
    for i, (key, value) in enumerate(records):
        # attributes 0 and timestamp delta 0, offset delta i, key, value (-1: a tombstone), no headers
        delta, key_len = _varint(i), _varint(len(key))
        if value is None:
            value_len, value = _SMALL_VARINTS[0], b""
        else:
            value_len = _varint(len(value))
        size = 3 + len(delta) + len(key_len) + len(key) + len(value_len) + len(value)
        parts += (_varint(size), b"\x00\x00", delta, key_len, key, value_len, value, b"\x00")
    payload = b"".join(parts)
    count = len(records)
    fields = [0, HEADER_SIZE - LOG_OVERHEAD + len(payload), NO_PARTITION_LEADER_EPOCH, MAGIC, 0,
              ATTR_TRANSACTIONAL if transactional else 0, count - 1, timestamp, timestamp, producer_id,
              producer_epoch, NO_SEQUENCE, count]
    # the CRC covers attributes..end: the header's tail, then the records (crc32c continues a CRC)
    tail = _HEADER_TAIL.pack(*fields[5:])
    fields[4] = crc32c(payload, crc32c(tail))
    return b"".join((_HEADER_HEAD.pack(*fields[:5]), tail, payload)), _make_header(fields)


def _records_payload(batch: Buffer, header: BatchHeader) -> Buffer:
    mv = batch if isinstance(batch, memoryview) else memoryview(batch)
    raw = mv[HEADER_SIZE:header.batch_length + LOG_OVERHEAD]
    compression = header.attributes & COMPRESSION_MASK
    if compression == COMPRESSION_NONE:
        return raw
    if compression not in codecs.NAMES:
        raise UnsupportedCompressionError(f"cannot decode records compressed with codec {compression}")
    return _decompress(raw, compression)


def _length(payload: Buffer, pos: int, end: int, what: str, nullable: bool = True) -> tuple[int, int]:
    """A length varint followed by that many bytes inside [pos, end): (length, position after the varint)."""
    n, pos = _read_varint(payload, pos)
    if (n < 0 and not nullable) or pos + max(n, 0) > end:
        raise CorruptRecordError(f"record {what} length {n} is invalid or runs past the record")
    return n, pos


def iter_records(batch: Buffer) -> Iterator[Record]:
    """Decode the records of one batch (starting at byte 0 of `batch`), any codec.

    Raises CorruptRecordError for anything that is not exactly recordsCount well-formed records: negative lengths
    other than -1, lengths or counts past the bytes left, fields not ending at the record's end, bytes left over.
    """
    if len(batch) < HEADER_SIZE:
        raise CorruptRecordError("truncated record batch")
    header = _make_header(_unpack_header(batch, 0))
    if header.magic != MAGIC:
        raise InvalidRecordError(f"unsupported record batch magic {header.magic}")
    if header.batch_length < MIN_BATCH_LENGTH or header.batch_length + LOG_OVERHEAD > len(batch):
        raise CorruptRecordError("truncated record batch")
    payload = _records_payload(batch, header)
    append_time = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else None
    pos = 0
    end = len(payload)
    count = header.records_count
    if count < 0 or count > end // 7:  # a record takes at least 7 bytes
        raise CorruptRecordError(f"{count} records cannot fit in {end} bytes")
    for _ in range(count):
        length, pos = _read_varint(payload, pos)
        stop = pos + length
        if length < 6 or stop > end:
            raise CorruptRecordError("record length runs past the batch")
        attributes = payload[pos]
        ts_delta, p = _read_varint(payload, pos + 1)
        offset_delta, p = _read_varint(payload, p)
        key_len, p = _length(payload, p, stop, "key")
        key = None
        if key_len >= 0:
            key = bytes(payload[p:p + key_len])
            p += key_len
        value_len, p = _length(payload, p, stop, "value")
        value = None
        if value_len >= 0:
            value = bytes(payload[p:p + value_len])
            p += value_len
        count_h, p = _read_varint(payload, p)
        if count_h < 0 or count_h > stop - p:
            raise CorruptRecordError(f"record header count {count_h} is negative or larger than the bytes left")
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(count_h):
            hk_len, p = _length(payload, p, stop, "header key", nullable=False)
            hkey = bytes(payload[p:p + hk_len]).decode("utf-8", "replace")
            p += hk_len
            hv_len, p = _length(payload, p, stop, "header value")
            hvalue = None
            if hv_len >= 0:
                hvalue = bytes(payload[p:p + hv_len])
                p += hv_len
            headers.append((hkey, hvalue))
        if p != stop:
            raise CorruptRecordError("record fields do not end at the record length")
        ts = append_time if append_time is not None else header.base_timestamp + ts_delta
        yield Record(key, value, headers, ts, header.base_offset + offset_delta, attributes)
        pos = stop
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the batch's {count} records")


def iter_timestamps(batch: Buffer) -> Iterator[tuple[int, int]]:
    """(timestamp, offset) of each record of one batch (any codec), as iter_records reads them (a batch flagged
    LogAppendTime stamps every record with its MaxTimestamp), without decoding keys, values or headers."""
    header = read_header(batch)
    payload = _records_payload(batch, header)
    if not isinstance(payload, bytes | bytearray):
        payload = bytes(payload)  # indexing bytes is several times faster than indexing a memoryview
    append_time = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else None
    base_ts, base_offset = header.base_timestamp, header.base_offset
    pos, end = 0, len(payload)
    for _ in range(header.records_count):
        length, p = _read_varint(payload, pos)
        stop = p + length
        if length < 6 or stop > end:
            raise CorruptRecordError("record length runs past the batch")
        b = payload[p + 1]
        if b < 0x80:  # the usual one-byte timestamp delta, inline
            ts_delta, p = (b >> 1) ^ -(b & 1), p + 2
        else:
            ts_delta, p = _read_varint(payload, p + 1)
        b = payload[p]
        offset_delta = (b >> 1) ^ -(b & 1) if b < 0x80 else _read_varint(payload, p)[0]
        yield (base_ts + ts_delta if append_time is None else append_time), base_offset + offset_delta
        pos = stop


def recompress(batch: Buffer, compression: int, level: int | None = None) -> bytes:
    """One batch with its records compressed by another codec (`level` as in compression.compress), as Kafka's
    LogValidator rebuilds a client batch for a topic's compression.type: the records' bytes are kept (those of a
    client batch are what Kafka's rebuild writes again), the header changes only in codec, length and CRC."""
    header = read_header(batch)
    payload = _records_payload(batch, header)
    body = payload if compression == COMPRESSION_NONE else codecs.compress(compression, payload, level=level)
    out = bytearray(HEADER_SIZE + len(body))
    out[:HEADER_SIZE] = memoryview(batch)[:HEADER_SIZE]
    out[HEADER_SIZE:] = body
    _I32.pack_into(out, _BATCH_LENGTH_AT, len(out) - LOG_OVERHEAD)
    _I16.pack_into(out, _ATTRIBUTES_AT, (header.attributes & ~COMPRESSION_MASK) | compression)
    _U32.pack_into(out, _CRC_AT, batch_crc(out, 0, len(out)))
    return bytes(out)


def decode_records(batch: Buffer) -> list[Record]:
    """All records of one batch (see iter_records)."""
    return list(iter_records(batch))
