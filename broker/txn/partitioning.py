"""Which `__transaction_state` partition holds a transactional id: Kafka's
Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions (FindCoordinator must agree)."""

from __future__ import annotations

from functools import lru_cache

from protocol.java_hash import java_abs, java_string_hash


@lru_cache(maxsize=1 << 16)  # asked on every request; the hash is pure Python
def partition_for(transactional_id: str, num_partitions: int) -> int:
    return java_abs(java_string_hash(transactional_id)) % num_partitions
