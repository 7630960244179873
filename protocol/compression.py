"""Kafka's record-batch codecs (attributes bits 0-2): gzip, snappy, lz4 and zstd, through `cramjam`.

What the clients write, and so what `decompress` reads:
- gzip: a gzip stream (several members are read as one stream).
- snappy: Java clients (xerial `SnappyOutputStream`) write the xerial framing: the 16-byte header
  `\\x82SNAPPY\\x00` + int32 version + int32 compatible version, then blocks of int32 big-endian length + raw
  snappy. librdkafka writes the same framing or a single raw snappy block; both are read.
- lz4: the LZ4 frame format (magic v2 batches have the correct header checksum). Kafka's Java reader
  (Lz4BlockInputStream) refuses a frame whose blocks are linked (LZ4's default), whose version is not 1 or whose
  reserved bits are set: `check_lz4_frame` tells such a frame (a produce refuses it, as Kafka), `compress` writes
  independent blocks as the Java client and librdkafka do, and `decompress` reads both (batches stored before).
- zstd: zstd frames.

Decompression is bounded: output beyond `limit` bytes raises `DecompressedTooLargeError`, so a small batch cannot
make the broker allocate gigabytes. Any unreadable payload raises `CompressionError`.
"""

from __future__ import annotations

import struct
import threading
import types

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
_XERIAL_BLOCK = 32 * 1024  # what xerial's SnappyOutputStream uses by default
_I32 = struct.Struct(">i")

_FIRST_GUESS = 256 * 1024
_GROWTH = 4
# Scratch buffers kept for `decompress_scratch` up to this size (fresh large buffers cost page faults: for a 1 MB
# batch, allocating the output took longer than lz4 decompressing into it).
_KEEP_SCRATCH = 8 << 20
_local = threading.local()

Buffer = bytes | bytearray | memoryview

_STREAM = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}


class CompressionError(Exception):
    """The compressed payload cannot be decoded."""


class DecompressedTooLargeError(CompressionError):
    """The payload decompresses to more than the allowed number of bytes."""


_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def check_lz4_frame(data: Buffer) -> None:
    """Raise CompressionError for an LZ4 frame descriptor Kafka's Java reader refuses (its FLG and BD checks):
    a wrong magic, version other than 1, reserved bits set, linked (dependent) blocks, or a block size id
    outside 4-7. Checksums and the blocks are left to the decompressor."""
    head = bytes(memoryview(data)[:6])
    if len(head) < 6 or head[:4] != _LZ4_MAGIC:
        raise CompressionError("lz4: stream unsupported (invalid magic bytes)")
    flg, bd = head[4], head[5]
    if flg & 0x03:
        raise CompressionError("lz4: reserved bits must be 0")
    if not flg & 0x20:
        raise CompressionError("lz4: dependent block stream is unsupported")
    if flg >> 6 != 1:
        raise CompressionError(f"lz4: version {flg >> 6} is unsupported")
    if bd & 0x8F or not 4 <= (bd >> 4) & 0x07 <= 7:
        raise CompressionError("lz4: invalid block descriptor")


def _too_small(err: Exception) -> bool:
    # cramjam's words for "the output buffer is full" (the payload itself may be fine)
    text = str(err)
    return "failed to write whole buffer" in text or "Destination buffer is too small" in text


def _decompress_stream(module: types.ModuleType, data: Buffer, limit: int, out: bytearray) -> int:
    """Decompress into `out` (grown as needed, at most to `limit`); returns the byte count."""
    if len(out) < _FIRST_GUESS:
        out.extend(bytes(min(limit, max(_FIRST_GUESS, _GROWTH * len(data))) - len(out)))
    declared = _zstd_content_size(data) if module is cramjam.zstd else None
    while True:
        try:
            n: int = module.decompress_into(data, out if len(out) <= limit else memoryview(out)[:limit])
            return n
        except cramjam.DecompressionError as err:
            if not _too_small(err):
                raise CompressionError(str(err)) from None
            if declared is not None and min(len(out), limit) >= declared:
                # zstd's "destination too small" for a frame holding more than it declares: corrupt data, not a
                # large one (growing the buffer to the limit would only cost memory)
                raise CompressionError(f"zstd: the frame decodes past its declared size {declared}") from None
            if len(out) >= limit:
                raise DecompressedTooLargeError(f"decompressed records exceed {limit} bytes") from None
            out.extend(bytes(min(limit, len(out) * _GROWTH) - len(out)))


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_FCS_BYTES = (0, 2, 4, 8)
_DID_BYTES = (0, 1, 2, 4)


def _zstd_content_size(data: Buffer) -> int | None:
    """The content size a payload of one zstd frame declares (its Frame_Content_Size), or None when the frame
    does not declare it or the payload is not exactly one frame (its blocks walked by their headers)."""
    mv = memoryview(data)
    if len(mv) < 6 or bytes(mv[:4]) != _ZSTD_MAGIC:
        return None
    fhd = mv[4]
    single = fhd >> 5 & 1
    pos = 5 + (0 if single else 1) + _DID_BYTES[fhd & 3]
    fcs_bytes = _FCS_BYTES[fhd >> 6] or (1 if single else 0)
    if not fcs_bytes or pos + fcs_bytes > len(mv):
        return None
    size = int.from_bytes(mv[pos:pos + fcs_bytes], "little") + (256 if fcs_bytes == 2 else 0)
    pos += fcs_bytes
    while pos + 3 <= len(mv):  # blocks: 3-byte headers (last flag, type, size); an RLE block holds one byte
        header = int.from_bytes(mv[pos:pos + 3], "little")
        pos += 3 + (1 if (header >> 1) & 3 == 1 else header >> 3)
        if header & 1:
            pos += 4 if fhd & 0x04 else 0  # content checksum
            return size if pos == len(mv) else None
    return None


def _snappy_raw(data: Buffer, out: bytearray, at: int, limit: int) -> int:
    """Decompress one raw snappy block into `out` at `at`; returns the position after it."""
    try:
        n = cramjam.snappy.decompress_raw_len(data)
    except cramjam.DecompressionError as err:
        raise CompressionError(f"snappy: {err}") from None
    if at + n > limit:
        raise DecompressedTooLargeError(f"decompressed records exceed {limit} bytes")
    if len(out) < at + n:
        out.extend(bytes(at + n - len(out)))
    try:
        written = cramjam.snappy.decompress_raw_into(data, memoryview(out)[at:at + n])
    except cramjam.DecompressionError as err:
        raise CompressionError(f"snappy: {err}") from None
    if written != n:
        raise CompressionError("snappy: block shorter than its declared length")
    return at + n


def _decompress_snappy(data: Buffer, limit: int, out: bytearray) -> int:
    mv = memoryview(data)
    if bytes(mv[:8]) != XERIAL_MAGIC:
        return _snappy_raw(mv, out, 0, limit)
    if len(mv) < _XERIAL_HEADER.size:
        raise CompressionError("snappy: truncated xerial header")
    pos = _XERIAL_HEADER.size
    at = 0
    while pos < len(mv):
        if pos + 4 > len(mv):
            raise CompressionError("snappy: truncated xerial block length")
        size = _I32.unpack_from(mv, pos)[0]
        pos += 4
        if size < 0 or pos + size > len(mv):
            raise CompressionError(f"snappy: xerial block of {size} bytes runs past the payload")
        at = _snappy_raw(mv[pos:pos + size], out, at, limit)
        pos += size
    return at


def decompress_into(codec: int, data: Buffer, limit: int, out: bytearray) -> int:
    """Decompress a batch payload into `out` (grown as needed, never past `limit` bytes of output); returns how
    many bytes of `out` hold the result."""
    if codec == SNAPPY:
        return _decompress_snappy(data, limit, out)
    module = _STREAM.get(codec)
    if module is None:
        raise CompressionError(f"unknown compression codec {codec}")
    return _decompress_stream(module, data, limit, out)


def decompress(codec: int, data: Buffer, limit: int) -> bytearray:
    """The decompressed bytes of a batch payload (at most `limit` of them), in a buffer of their own."""
    out = bytearray()
    n = decompress_into(codec, data, limit, out)
    del out[n:]
    return out


def decompress_scratch(codec: int, data: Buffer, limit: int) -> tuple[bytearray, int]:
    """Like `decompress`, into this thread's reusable scratch buffer: (buffer, length). The contents are valid
    until the next call in the same thread, so use them at once (validation), never across a yield."""
    out = getattr(_local, "scratch", None)
    if out is None:
        out = _local.scratch = bytearray()
    try:
        return out, decompress_into(codec, data, limit, out)
    finally:
        if len(out) > _KEEP_SCRATCH:
            _local.scratch = bytearray()


def compress(codec: int, data: Buffer, *, xerial: bool = True, level: int | None = None) -> bytes:
    """Compress a batch payload as the Java client does (snappy: xerial framing unless `xerial` is False).
    `level`: gzip, lz4 or zstd's level as Kafka's compression.<codec>.level gives it (gzip's -1 is zlib's
    default, 6); None leaves the library's default."""
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=6 if level is None or level < 0 else level))
    if codec == LZ4:
        # independent 64 KB blocks and no content checksum, as Kafka's Lz4BlockOutputStream: its reader refuses
        # linked blocks, which are the LZ4 frame default
        compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        compressor.compress(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data) if level is None else cramjam.zstd.compress(data, level=level))
    if codec == SNAPPY:
        if not xerial:
            return bytes(cramjam.snappy.compress_raw(data))
        mv = memoryview(data)
        parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
        for pos in range(0, len(mv), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(mv[pos:pos + _XERIAL_BLOCK]))
            parts.append(_I32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    raise CompressionError(f"cannot compress with codec {codec}")
