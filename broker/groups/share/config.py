"""Broker-level share-group settings (Kafka's names and defaults).

There is no cap on the number of share groups: Kafka removed `group.share.max.groups` (KAFKA-19156) and keeps
share groups, empty or not, until they are deleted (KAFKA-19016).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    # group.share.initialize.retry.interval.ms: an Initializing partition older than this is asked for again.
    initialize_retry_interval_ms: int = 30_000

    _NAMES = {
        "group.share.session.timeout.ms": "session_timeout_ms",
        "group.share.heartbeat.interval.ms": "heartbeat_interval_ms",
        "group.share.max.size": "max_size",
        "group.share.initialize.retry.interval.ms": "initialize_retry_interval_ms",
    }

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("group.share.heartbeat.interval.ms must be smaller than group.share.session.timeout.ms")
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "max_size", "initialize_retry_interval_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> ShareGroupConfig:
        """Pick the group.share.* keys this component understands out of a broker properties mapping."""
        kwargs = {attr: int(str(props[key])) for key, attr in cls._NAMES.items() if key in props}
        return cls(**kwargs)
