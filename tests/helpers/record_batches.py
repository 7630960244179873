"""Shared helpers for log tests."""

from __future__ import annotations

from protocol import records as rec


def batch(n: int = 1, *, ts: int = 1_000, value_size: int = 10, key: bytes | None = None) -> bytes:
    return rec.build_batch([rec.Record(key, bytes([65 + i % 26]) * value_size) for i in range(n)], timestamp=ts)


def batches_in(data: bytes) -> list[rec.BatchHeader]:
    return [h for _, h in rec.iter_batches(data)]
