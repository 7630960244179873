"""Transaction coordinator settings (Kafka's names and defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from .state import TV_2


@dataclass(frozen=True)
class TransactionCoordinatorConfig:
    transaction_max_timeout_ms: int = 15 * 60 * 1000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms
    num_partitions: int = 50  # transaction.state.log.num.partitions
    # The finalized transaction.version feature level: picks the log value version and the version used for
    # aborts the coordinator starts itself (fencing, timeouts), as Kafka does.
    transaction_version_level: int = TV_2
