"""Raw Kafka record batches + acquired ranges -> one `pyarrow.RecordBatch` in the source's schema (executor side).

Per batch: framing and CRC-32C are checked, control batches skipped, the payload decompressed (every codec, through
protocol.compression). Records are then decoded column-wise with numpy:

1. the only sequential step finds where each record starts (its length varint): runs of records of one size
   at numpy speed (guessed, then checked), the rest in a tight Python loop;
2. every further field (attributes, timestamp delta, offset delta, key, value, header count, headers) is decoded
   for all records at once, varint by varint, as vectors of positions into one byte array: the records as they
   came (uncompressed batches are not copied) or the decompressed payloads joined;
3. records outside the acquired ranges (a returned batch may hold records of other members or of a split
   acquisition) are dropped before keys, values and headers are gathered into Arrow buffers.

A record whose fields do not end exactly at its length is corrupt (CorruptRecordError).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from protocol import compression
from protocol.records import (
    ATTR_LOG_APPEND_TIME,
    COMPRESSION_MASK,
    COMPRESSION_NONE,
    HEADER_SIZE,
    CorruptRecordError,
    batch_crc,
    iter_batches,
)
from shoal_spark.schema import ARROW_SCHEMA

_HEADERS_TYPE = ARROW_SCHEMA.field("headers").type

_MAX_DECOMPRESSED = 1 << 30
_PAD = 16  # zero bytes after decompressed data (a corrupt length runs into them, not past the end)
Ranges = Sequence[tuple[int, int, int]]  # (first offset, last offset, delivery count)


def _walk(buf: bytes | memoryview, pos: int, count: int, heads: list[int]) -> int:
    """Append the position of each of `count` records' length varint, walking from `pos`; return the position
    after the last record. Unchecked (corrupt lengths may lead anywhere in the buffer, or past it: IndexError):
    the caller checks the chain."""
    append = heads.append
    for _ in range(count):
        append(pos)
        b = buf[pos]
        if b < 0x80:
            pos += 1 + ((b >> 1) ^ -(b & 1))
            continue
        c = buf[pos + 1]
        if c < 0x80:
            v = (b & 0x7F) | (c << 7)
            pos += 2 + ((v >> 1) ^ -(v & 1))
            continue
        v = (b & 0x7F) | ((c & 0x7F) << 7)
        shift = 14
        pos += 2
        while True:
            b = buf[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            if b < 0x80 or shift > 28:
                break
            shift += 7
        pos += (v >> 1) ^ -(v & 1)
    return pos


_SPECULATE_MIN = 64  # records a run of equal sizes must reach before speculation is worth a numpy pass
_SLOW_STEP = 256  # records walked one by one after a failed speculation before trying again (doubles on
# each failure in a row, so records of varied sizes cost little more than the plain walk)


def _record_heads(buf: bytes | memoryview, u: np.ndarray, pos: int, count: int, end: int, out: list[np.ndarray]) -> int:
    """The positions of `count` records' length varints from `pos` (appended to `out` as arrays); returns the
    position after the last record. Unchecked: the caller checks the chain.

    Where each record starts is sequential (each length says where the next one begins), which a per-record
    Python loop (`_walk`) does at ~0.3 us a record. Runs of records of one encoded size (common: fixed-size
    values and keys) are found at numpy speed instead: from the size of the record at `pos`, guess that the
    following ones have the same size and check, for all of them at once, that each guessed position holds
    exactly that length varint; the run ends at the first that does not, and the walk goes on from there."""
    slow_step = _SLOW_STEP
    while count > 0:
        b = buf[pos]
        encoded: tuple[int, ...]
        if b < 0x80 and count >= _SPECULATE_MIN:
            encoded = (b,)
            length = (b >> 1) ^ -(b & 1)
        elif b >= 0x80 and buf[pos + 1] < 0x80 and count >= _SPECULATE_MIN:
            encoded = (b, buf[pos + 1])
            v = (b & 0x7F) | (buf[pos + 1] << 7)
            length = (v >> 1) ^ -(v & 1)
        else:
            encoded = ()
            length = -1
        size = len(encoded) + length
        if encoded and size > 0:
            n = min(count, (end - pos) // size)
            if n > _SPECULATE_MIN:  # a cheap look at the first few before checking all of them
                probe = pos + size * np.arange(_SPECULATE_MIN, dtype=np.int64)
                if not (u[probe] == encoded[0]).all():
                    n = _SPECULATE_MIN
            at = pos + size * np.arange(n, dtype=np.int64)
            same = u[at] == encoded[0]
            if len(encoded) == 2:
                same &= u[at + 1] == encoded[1]
            run = n if same.all() else int(np.argmin(same))
            if run >= _SPECULATE_MIN:
                out.append(at[:run])
                pos += run * size
                count -= run
                slow_step = _SLOW_STEP
                continue
            slow_step = min(slow_step * 2, 1 << 16)
        step: list[int] = []
        start = pos
        pos = _walk(buf, pos, min(count, slow_step), step)
        if not start < pos <= end:  # corrupt lengths: stop here rather than walk the rest of the buffer
            raise IndexError(pos)
        count -= len(step)
        out.append(np.array(step, dtype=np.int64))
    return pos


def _varints(u: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints starting at every position of `pos`: (values, encoded lengths).

    One- and two-byte varints (nearly all of them in records: lengths, deltas, counts) are read for all
    positions at once from two gathers; only the positions whose varint is longer take the general path."""
    b0 = u[pos]
    longer = b0 >= 0x80
    if not longer.any():  # one byte each (counts, small deltas, null lengths): no second gather
        raw = b0.astype(np.int64)
        return (raw >> 1) ^ -(raw & 1), np.ones(len(pos), dtype=np.int64)
    # clip: the byte after a one-byte varint ending the buffer is not used (a truncated longer varint reads its
    # own last byte again until it is too long)
    b1 = u.take(pos + 1, mode="clip")
    raw = (b0 & 0x7F).astype(np.int64)
    raw |= np.where(longer, (b1 & 0x7F).astype(np.int64) << 7, 0)
    size = longer.astype(np.int64) + 1
    rest = np.flatnonzero(longer & (b1 >= 0x80))
    signed = (raw >> 1) ^ -(raw & 1)
    if len(rest):
        signed[rest], size[rest] = _long_varints(u, pos[rest])
    return signed, size


def _long_varints(u: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_varints` for varints of any length (up to 10 bytes), byte by byte."""
    value = np.zeros(len(pos), dtype=np.uint64)
    size = np.zeros(len(pos), dtype=np.int64)
    idx = np.arange(len(pos))
    for i in range(10):
        b = u.take(pos[idx] + i, mode="clip").astype(np.uint64)
        value[idx] |= (b & np.uint64(0x7F)) << np.uint64(7 * i)
        size[idx] += 1
        more = (b & np.uint64(0x80)) != 0
        idx = idx[more]
        if not len(idx):
            break
    else:
        raise CorruptRecordError("varint longer than 10 bytes in a record")
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return signed, size


def _binary(buf: pa.Buffer, start: np.ndarray, length: np.ndarray, typ: pa.DataType) -> pa.Array:
    """A binary/string array of buf[start[i]:start[i]+length[i]] (length -1 = null).

    The segments are in order and do not overlap (fields of consecutive records), so one array over the whole
    buffer alternates gaps and wanted segments without copying, and Arrow's `take` of every second element
    gathers the wanted bytes (a memcpy per value, in C++)."""
    n = len(length)
    if n and (length < 0).all():  # all null (records without keys): nothing to gather
        return pa.nulls(n, typ)
    lens = np.maximum(length, 0)
    wide = buf.size >= 2**31 - 1
    offsets = np.empty(2 * n + 1, dtype=np.int64 if wide else np.int32)
    offsets[0] = 0
    offsets[1::2] = start
    offsets[2::2] = start + lens
    full = pa.Array.from_buffers(pa.large_binary() if wide else pa.binary(), 2 * n,
                                 [None, pa.py_buffer(offsets), buf])
    picked = full.take(pa.array(np.arange(1, 2 * n, 2, dtype=np.int64)))
    if wide:
        picked = picked.cast(pa.binary())
    valid = length >= 0
    nulls = int(n - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    _, value_offsets, data = picked.buffers()
    return pa.Array.from_buffers(typ, n, [bitmap, value_offsets, data], null_count=nulls,
                                 offset=picked.offset)


def _constant_string(text: str, n: int) -> pa.Array:
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _check_batch(buf: bytes | memoryview, pos: int, size: int, crc: int) -> None:
    if batch_crc(buf, pos, size) != crc:
        raise CorruptRecordError(f"record batch at position {pos} fails its CRC-32C check")


def decode(topic: str, partition: int, records: bytes | memoryview, ranges: Ranges) -> pa.RecordBatch:
    """The acquired records of `records` (one partition's batches) as a RecordBatch of ARROW_SCHEMA."""
    firsts = np.array([r[0] for r in ranges], dtype=np.int64)
    lasts = np.array([r[1] for r in ranges], dtype=np.int64)
    counts = np.array([r[2] for r in ranges], dtype=np.int32)
    order = np.argsort(firsts)
    firsts, lasts, counts = firsts[order], lasts[order], counts[order]

    payloads: list[bytes | memoryview] = []
    payload_at: list[int] = []  # where each payload starts in `records` (uncompressed batches)
    batch_of: list[int] = []  # per batch: number of records, to spread batch fields over records
    base_offsets: list[int] = []
    base_timestamps: list[int] = []
    append_times: list[int] = []  # -1 for CreateTime batches
    view = memoryview(records)
    for pos, h in iter_batches(records):
        size = h.batch_length + 12
        if h.is_control or not len(firsts) or h.next_offset <= firsts[0] or h.base_offset > lasts[-1]:
            continue
        i = int(np.searchsorted(firsts, h.base_offset, side="right")) - 1
        if (i < 0 or lasts[i] < h.base_offset) and (i + 1 >= len(firsts) or firsts[i + 1] > h.last_offset):
            continue  # no acquired offset inside this batch
        _check_batch(records, pos, size, h.crc)
        raw = view[pos + HEADER_SIZE:pos + size]
        codec = h.attributes & COMPRESSION_MASK
        payload = raw if codec == COMPRESSION_NONE else bytes(compression.decompress(codec, raw, _MAX_DECOMPRESSED))
        payloads.append(payload)
        payload_at.append(pos + HEADER_SIZE if codec == COMPRESSION_NONE else -1)
        batch_of.append(h.records_count)
        base_offsets.append(h.base_offset)
        base_timestamps.append(h.base_timestamp)
        append_times.append(h.max_timestamp if h.attributes & ATTR_LOG_APPEND_TIME else -1)
    if -1 in payload_at:  # decompressed payloads: one buffer of them all
        buf: bytes | memoryview = b"".join([*payloads, bytes(_PAD)])
        starts = np.cumsum([0] + [len(p) for p in payloads[:-1]]).tolist()
    else:  # only uncompressed batches: read the records where they are (no copy of them)
        buf = view
        starts = payload_at
    u = np.frombuffer(buf, dtype=np.uint8)
    heads: list[np.ndarray] = []
    batch_ends: list[int] = []
    for payload, records_count, pos in zip(payloads, batch_of, starts, strict=True):
        end = pos + len(payload)
        try:
            after = _record_heads(buf, u, pos, records_count, end, heads)
        except IndexError:  # lengths that run far past the data
            after = -1
        if after != end:
            raise CorruptRecordError("records do not fill their batch exactly")
        batch_ends.append(end)
    whole = pa.py_buffer(buf)
    head = np.concatenate(heads) if heads else np.zeros(0, dtype=np.int64)
    length, n0 = _varints(u, head)
    start = head + n0
    stop = start + length
    # The chain: every record ends where the next one's length starts (or at its batch's end).
    following = np.empty_like(head)
    following[:-1] = head[1:]
    last_of_batch = np.cumsum(np.array(batch_of, dtype=np.int64)) - 1
    following[last_of_batch] = batch_ends
    if (length < 0).any() or not np.array_equal(stop, following):
        raise CorruptRecordError("record lengths do not match the batch")
    per_record = np.array(batch_of, dtype=np.int64)
    # attributes (1 byte), timestamp delta, offset delta
    ts_delta, n1 = _varints(u, start + 1)
    off_delta, n2 = _varints(u, start + 1 + n1)
    offsets = np.repeat(np.array(base_offsets, dtype=np.int64), per_record) + off_delta
    # Keep only acquired offsets; their delivery counts come from the ranges.
    r = np.searchsorted(firsts, offsets, side="right") - 1
    keep = (r >= 0) & (offsets <= lasts[np.maximum(r, 0)])
    if not keep.all():
        start, stop, ts_delta, n1, n2, offsets, r = (a[keep] for a in (start, stop, ts_delta, n1, n2, offsets, r))
    delivery = counts[r] if len(r) else np.zeros(0, dtype=np.int32)
    batch_index = np.repeat(np.arange(len(per_record)), per_record)[keep] if len(per_record) else np.zeros(0, int)
    append = np.array(append_times, dtype=np.int64)[batch_index] if len(batch_index) else np.zeros(0, np.int64)
    base_ts = np.array(base_timestamps, dtype=np.int64)[batch_index] if len(batch_index) else np.zeros(0, np.int64)
    log_append = append >= 0
    timestamps_ms = np.where(log_append, append, base_ts + ts_delta)

    p = start + 1 + n1 + n2
    key_len, n = _varints(u, p)
    key_at = p + n
    p = key_at + np.maximum(key_len, 0)
    value_len, n = _varints(u, p)
    value_at = p + n
    p = value_at + np.maximum(value_len, 0)
    header_count, n = _varints(u, p)
    p = p + n
    if (key_len < -1).any() or (value_len < -1).any() or (header_count < 0).any():
        raise CorruptRecordError("negative length in a record")
    headers = _headers(u, whole, p, header_count, stop)
    if not np.array_equal(headers[1], stop):
        raise CorruptRecordError("record fields do not end at the record's length")

    count = len(start)
    arrays = [
        _binary(whole, key_at, key_len, pa.binary()),
        _binary(whole, value_at, value_len, pa.binary()),
        _constant_string(topic, count),
        pa.array(np.full(count, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.array(timestamps_ms * 1000, type=pa.timestamp("us", tz="UTC")),
        pa.array(log_append.astype(np.int32)),
        headers[0],
        pa.array(delivery.astype(np.int32)),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _headers(u: np.ndarray, whole: pa.Buffer, pos: np.ndarray, count: np.ndarray, stop: np.ndarray
             ) -> tuple[pa.Array, np.ndarray]:
    """The headers column and the position after each record's headers."""
    n = len(count)
    list_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(count, out=list_offsets[1:])
    total = int(list_offsets[-1])
    struct_type = ARROW_SCHEMA.field("headers").type.value_type
    if total == 0:
        empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                           fields=list(struct_type))
        return pa.ListArray.from_arrays(pa.array(list_offsets.astype(np.int32)), empty, type=_HEADERS_TYPE), pos
    if (count > (stop - pos)).any():
        raise CorruptRecordError("header count larger than the record")
    # Headers in record order: row j of the flat arrays is header h of record i.
    key_at = np.zeros(total, dtype=np.int64)
    key_len = np.zeros(total, dtype=np.int64)
    value_at = np.zeros(total, dtype=np.int64)
    value_len = np.zeros(total, dtype=np.int64)
    p = pos.copy()
    for h in range(int(count.max())):
        rows = np.nonzero(count > h)[0]
        at = p[rows]
        klen, k = _varints(u, at)
        if (klen < 0).any():
            raise CorruptRecordError("negative header key length")
        kat = at + k
        at = kat + klen
        vlen, k = _varints(u, at)
        if (vlen < -1).any():
            raise CorruptRecordError("negative header value length")
        vat = at + k
        p[rows] = vat + np.maximum(vlen, 0)
        if (p[rows] > stop[rows]).any():
            raise CorruptRecordError("header runs past the record")
        flat = list_offsets[rows] + h
        key_at[flat], key_len[flat], value_at[flat], value_len[flat] = kat, klen, vat, vlen
    keys = _binary(whole, key_at, key_len, pa.string())
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:  # not UTF-8: decode with replacement characters, as the Java client's String does
        raw = _binary(whole, key_at, key_len, pa.binary()).to_pylist()
        keys = pa.array([k.decode("utf-8", "replace") for k in raw], pa.string())
    values = _binary(whole, value_at, value_len, pa.binary())
    structs = pa.StructArray.from_arrays([keys, values], fields=list(struct_type))
    return pa.ListArray.from_arrays(pa.array(list_offsets.astype(np.int32)), structs, type=_HEADERS_TYPE), p
