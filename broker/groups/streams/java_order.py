"""The iteration order of Java's HashMap/HashSet over string keys.

Kafka builds some of the text and lists it answers by iterating a `java.util.HashMap` (the missing internal
topics of a streams group, the subtopologies of an assignment): to answer the same, Shoal walks the keys in the
order such a map would. A HashMap holds its keys in buckets indexed by the spread String.hashCode masked by the
table size (16, doubled whenever the map holds more than three quarters of it), each bucket in insertion order.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.share_coordinator.keys import java_string_hash


def _bucket(text: str, capacity: int) -> int:
    h = java_string_hash(text) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def hash_order(keys: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """`keys` (in insertion order, duplicates ignored) as a HashMap iterates them: a default one, or one made with
    `new HashMap<>(n)` (`initial_capacity` = its table size, the power of two at or above n)."""
    unique = list(dict.fromkeys(keys))
    capacity = initial_capacity
    while len(unique) > int(capacity * 0.75):
        capacity *= 2
    # sorted() is stable: keys of one bucket keep their insertion order.
    return sorted(unique, key=lambda k: _bucket(k, capacity))
