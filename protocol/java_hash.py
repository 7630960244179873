"""Java's String.hashCode and Kafka's Utils.abs, which Kafka uses to choose a coordinator's partition for a key
(a group id, a transactional id, a share-partition key) and which its tools' and SASL's hash-ordered collections
follow: the broker's coordinators, the SASL handshake and the command-line tools all import them from here."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable
from typing import TypeVar, cast

T = TypeVar("T")

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, wrapping as a signed 32-bit int. An ASCII
    string's bytes are its code units; others go through an array of 16-bit units (half the time of indexing
    byte pairs)."""
    if s.isascii():
        units: bytes | array[int] = s.encode()
    else:
        units = array("H", s.encode("utf-16-le", "surrogatepass"))
        if sys.byteorder == "big":
            units.byteswap()
    h = 0
    for c in units:
        h = (31 * h + c) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    # Kafka's Utils.abs: Math.abs(Integer.MIN_VALUE) would stay negative, so it maps to 0.
    return 0 if n == _INT_MIN else abs(n)


def java_hash_order(keys: Iterable[T], hash_code: Callable[[T], int] | None = None,
                    initial_capacity: int = 16) -> list[T]:
    """`keys` (in insertion order, duplicates ignored) in the order a java.util.HashMap or HashSet filled with them
    iterates them: by bucket (the spread hash masked by the table size), each bucket in insertion order. The
    table starts at `initial_capacity` (a power of two: 16 by default, `new HashMap<>(n)` rounds n up) and doubles
    whenever it holds more than three quarters of it. Kafka answers some lists in that order (a streams group's
    missing internal topics and its assignor's member order, a tool's group listing, the SASL mechanisms of a
    handshake), and Shoal answers them in the same order. `hash_code` defaults to String.hashCode."""
    unique = list(dict.fromkeys(keys))
    code = hash_code if hash_code is not None else cast(Callable[[T], int], java_string_hash)
    capacity = initial_capacity
    while len(unique) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: T) -> int:
        h = code(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(unique, key=bucket)  # sorted() is stable: one bucket's keys keep their insertion order


def java_compute_if_absent_order(calls: Iterable[T], hash_code: Callable[[T], int] | None = None,
                                 initial_capacity: int = 16) -> list[T]:
    """The keys of a java.util.HashMap filled by `computeIfAbsent(key, ...)` once per item of `calls` (repeats
    included), in its iteration order. Unlike `put`, which doubles the table right after the insertion that takes
    it past three quarters, computeIfAbsent doubles it at the start of the next call (whether that call inserts or
    not), so the table may end a size smaller than `java_hash_order`'s; and it links a new key at the head of its
    bucket, so keys sharing a bucket come newest first."""
    code = hash_code if hash_code is not None else cast(Callable[[T], int], java_string_hash)
    capacity, threshold = 0, 0
    seen: dict[T, None] = {}
    for key in calls:
        if capacity == 0:
            capacity = initial_capacity
            threshold = capacity * 3 // 4
        elif len(seen) > threshold:
            capacity *= 2
            threshold = capacity * 3 // 4
        seen.setdefault(key)

    def bucket(key: T) -> int:
        h = code(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    # Two keys sharing the final bucket shared every smaller one: their order was set when the newer one was
    # linked in front of the older, and each doubling's split keeps it.
    index = {key: i for i, key in enumerate(seen)}
    return sorted(seen, key=lambda key: (bucket(key), -index[key]))
