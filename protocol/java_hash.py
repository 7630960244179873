"""Java's String.hashCode and Kafka's Utils.abs, which Kafka uses to choose a coordinator's partition for a key
(a group id, a transactional id, a share-partition key) and which its tools' and SASL's hash-ordered collections
follow: the broker's coordinators, the SASL handshake and the command-line tools all import them from here."""

from __future__ import annotations

import sys
from array import array

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
