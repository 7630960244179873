"""Ordered, tiling index of in-flight record ranges ("pieces") for one share-partition.

A piece is a run of consecutive offsets that share one state, owner, delivery count and lock deadline.
Pieces are kept in a chunked sorted list (a list of short sorted lists) keyed by first offset, so finding
the piece holding an offset is O(log n) and inserting or removing one moves at most one chunk plus the
short chunk index, never the whole in-flight window (a flat list would memmove every entry on a split).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(eq=False, slots=True)
class Piece:
    first: int
    last: int
    state: int
    count: int = 0
    owner: str | None = None
    deadline: int = 0
    # Bumped on every state/deadline change: heap entries carrying an older version are stale.
    version: int = 0
    alive: bool = True

    @property
    def size(self) -> int:
        return self.last - self.first + 1


class PieceIndex:
    """Pieces sorted by first offset, in chunks of at most 2 * LOAD."""

    LOAD = 256

    def __init__(self) -> None:
        self._keys: list[list[int]] = []
        self._vals: list[list[Piece]] = []
        self._heads: list[int] = []  # first key of each chunk
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def clear(self) -> None:
        self._keys, self._vals, self._heads, self._len = [], [], [], 0

    def first(self) -> Piece | None:
        return self._vals[0][0] if self._len else None

    def last(self) -> Piece | None:
        return self._vals[-1][-1] if self._len else None

    def _locate(self, offset: int) -> tuple[int, int]:
        """(chunk, index) of the piece with the greatest first <= offset; (-1, -1) if none."""
        ci = bisect_right(self._heads, offset) - 1
        if ci < 0:
            return -1, -1
        return ci, bisect_right(self._keys[ci], offset) - 1

    def floor(self, offset: int) -> Piece | None:
        ci, i = self._locate(offset)
        return None if ci < 0 else self._vals[ci][i]

    def iter_from(self, offset: int) -> Iterator[Piece]:
        """Pieces in order, starting with the one holding `offset` (or the first one after it).

        Not safe across mutation: callers collect what they need before changing the index.
        """
        ci, i = self._locate(offset)
        if ci < 0:
            ci, i = 0, 0
        vals = self._vals
        while ci < len(vals):
            chunk = vals[ci]
            while i < len(chunk):
                yield chunk[i]
                i += 1
            ci, i = ci + 1, 0

    def __iter__(self) -> Iterator[Piece]:
        for chunk in self._vals:
            yield from chunk

    def insert(self, piece: Piece) -> None:
        key = piece.first
        if not self._len:
            self._keys, self._vals, self._heads = [[key]], [[piece]], [key]
            self._len = 1
            return
        ci = max(bisect_right(self._heads, key) - 1, 0)
        keys, vals = self._keys[ci], self._vals[ci]
        i = bisect_right(keys, key)
        keys.insert(i, key)
        vals.insert(i, piece)
        self._heads[ci] = keys[0]
        self._len += 1
        if len(keys) > 2 * self.LOAD:
            # Split the chunk in two: the chunk index is short (n / LOAD), so this insert is cheap.
            half = len(keys) // 2
            self._keys.insert(ci + 1, keys[half:])
            self._vals.insert(ci + 1, vals[half:])
            del keys[half:], vals[half:]
            self._heads.insert(ci + 1, self._keys[ci + 1][0])

    def remove(self, piece: Piece) -> None:
        ci, i = self._locate(piece.first)
        if ci < 0 or self._vals[ci][i] is not piece:
            raise KeyError(piece.first)
        self._delete(ci, i)

    def pop_first(self) -> Piece:
        piece = self._vals[0][0]
        self._delete(0, 0)
        return piece

    def _delete(self, ci: int, i: int) -> None:
        keys, vals = self._keys[ci], self._vals[ci]
        del keys[i], vals[i]
        self._len -= 1
        if keys:
            self._heads[ci] = keys[0]
        else:
            del self._keys[ci], self._vals[ci], self._heads[ci]

    def check(self) -> None:
        """Internal consistency (tests only)."""
        flat = [k for chunk in self._keys for k in chunk]
        assert flat == sorted(flat) and len(flat) == self._len
        assert self._heads == [c[0] for c in self._keys]
        assert all(p.first == k for kc, vc in zip(self._keys, self._vals, strict=True)
                   for k, p in zip(kc, vc, strict=True))


__all__ = ["Piece", "PieceIndex"]
