"""Transaction coordinator settings (Kafka's names; defaults from the broker's config table)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.components import ComponentConfig, setting


@dataclass(frozen=True)
class TransactionCoordinatorConfig(ComponentConfig):
    transaction_max_timeout_ms: int = setting("transaction.max.timeout.ms")
    transactional_id_expiration_ms: int = setting("transactional.id.expiration.ms")
    # The broker takes the partition count of __transaction_state as it is (as Kafka: the log is the truth).
    num_partitions: int = setting("transaction.state.log.num.partitions")
    # The finalized transaction.version feature level: picks the log value version and the version used for
    # aborts the coordinator starts itself (fencing, timeouts), as Kafka does. The broker sets the finalized
    # level (broker.features), which may differ from the configured one.
    transaction_version_level: int = setting("transaction.version")
    abort_timed_out_interval_ms: int = setting("transaction.abort.timed.out.transaction.cleanup.interval.ms")
    remove_expired_interval_ms: int = setting("transaction.remove.expired.transaction.cleanup.interval.ms")
    # The produce path verifies transactional batches with the coordinator (KIP-890 part 1).
    partition_verification_enable: bool = setting("transaction.partition.verification.enable")
