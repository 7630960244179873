"""SharePartitionKey and the choice of `__share_group_state` partition, exactly as Kafka makes it.

Kafka (ShareCoordinatorService.partitionFor) hashes the coordinator key string "group:topicId:partition" with
Java's String.hashCode and takes Utils.abs(hash) % share.coordinator.state.topic.num.partitions. The topic id is
printed the way Kafka's Uuid.toString prints it (URL-safe base64 of the 16 bytes, no padding), not the dashed
form. FindCoordinator (key type SHARE) sends that same string, so both sides must agree byte for byte.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import NamedTuple
from uuid import UUID

from protocol.java_hash import java_abs, java_string_hash


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
