"""Broker-level share-group settings (Kafka's names and defaults).

There is no cap on the number of share groups: Kafka removed `group.share.max.groups` (KAFKA-19156) and keeps
share groups, empty or not, until they are deleted (KAFKA-19016).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.components import ComponentConfig, setting


@dataclass(frozen=True)
class ShareGroupConfig(ComponentConfig):
    session_timeout_ms: int = setting("group.share.session.timeout.ms")
    heartbeat_interval_ms: int = setting("group.share.heartbeat.interval.ms")
    max_size: int = setting("group.share.max.size")
    # An Initializing partition older than this is asked for again.
    initialize_retry_interval_ms: int = setting("group.share.initialize.retry.interval.ms")
    # The target assignment is recomputed at most once per interval (0: on every heartbeat that needs it).
    assignment_interval_ms: int = setting("group.share.assignment.interval.ms")

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("group.share.heartbeat.interval.ms must be smaller than group.share.session.timeout.ms")
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "max_size", "initialize_retry_interval_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.assignment_interval_ms < 0:
            raise ValueError("assignment_interval_ms must not be negative")
