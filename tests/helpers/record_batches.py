"""Shared helpers for log tests."""

from __future__ import annotations

import cramjam

from protocol import compression as codecs
from protocol import records as rec


def batch(n: int = 1, *, ts: int = 1_000, value_size: int = 10, key: bytes | None = None) -> bytes:
    return rec.build_batch([rec.Record(key, bytes([65 + i % 26]) * value_size) for i in range(n)], timestamp=ts)


def batches_in(data: bytes) -> list[rec.BatchHeader]:
    return [h for _, h in rec.iter_batches(data)]


def damaged_zstd(payload: bytes) -> bytes:
    """`payload` as a zstd frame with one byte changed so that it decodes past the content size it declares
    (zstd's "destination buffer is too small"), found by trying bytes (cramjam is pinned: the same frame every
    run)."""
    frame = codecs.compress(codecs.ZSTD, payload)
    for pos in range(len(frame) - 1, 5, -1):
        for value in (0x00, 0xFF, 0x34, 0xC5):
            damaged = frame[:pos] + bytes([value]) + frame[pos + 1:]
            try:
                cramjam.zstd.decompress(damaged)
            except cramjam.DecompressionError as err:
                if "too small" in str(err):
                    return damaged
    raise AssertionError("no damaged frame found")
