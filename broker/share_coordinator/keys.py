"""SharePartitionKey and the choice of `__share_group_state` partition, exactly as Kafka makes it.

Kafka (ShareCoordinatorService.partitionFor) hashes the coordinator key string "group:topicId:partition" with
Java's String.hashCode and takes Utils.abs(hash) % share.coordinator.state.topic.num.partitions. The topic id is
printed the way Kafka's Uuid.toString prints it (URL-safe base64 of the 16 bytes, no padding), not the dashed
form. FindCoordinator (key type SHARE) sends that same string, so both sides must agree byte for byte.
"""

from __future__ import annotations

import base64
import sys
from array import array
from functools import lru_cache
from typing import NamedTuple
from uuid import UUID

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


def kafka_uuid_str(u: UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


class SharePartitionKey(NamedTuple):
    group_id: str
    topic_id: UUID
    partition: int

    def coordinator_key(self) -> str:
        """The FindCoordinator key of this share-partition: "group:topicId:partition"."""
        return f"{self.group_id}:{kafka_uuid_str(self.topic_id)}:{self.partition}"


def partition_for_coordinator_key(key: str, num_partitions: int) -> int:
    """The `__share_group_state` partition for a FindCoordinator share key string."""
    return java_abs(java_string_hash(key)) % num_partitions


@lru_cache(maxsize=1 << 16)  # called several times per operation; the hash is pure Python
def partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    """The `__share_group_state` partition that holds the records of `key`."""
    return partition_for_coordinator_key(key.coordinator_key(), num_partitions)
