"""Log settings as plain values. Parsing of properties lives in broker.config; this only maps names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

GIB = 1 << 30
DAY_MS = 24 * 3600 * 1000

# Kafka topic config name -> LogConfig field
TOPIC_NAMES = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = GIB
    segment_ms: int = 7 * DAY_MS
    retention_ms: int = 7 * DAY_MS  # -1: no time limit
    retention_bytes: int = -1  # -1: no size limit
    index_interval_bytes: int = 4096

    @classmethod
    def from_topic_config(cls, values: Mapping[str, object], base: LogConfig | None = None) -> LogConfig:
        """Take the log settings out of effective topic configs (Kafka names, text or int values)."""
        base = base or cls()
        changes = {attr: int(values[name]) for name, attr in TOPIC_NAMES.items()  # type: ignore[arg-type]
                   if values.get(name) is not None}
        policy = values.get("cleanup.policy")
        if policy is not None and "delete" not in str(policy).split(","):
            # A compact-only topic (the internal topics) is never trimmed by time or size.
            changes.update(retention_ms=-1, retention_bytes=-1)
        return replace(base, **changes)

    @classmethod
    def coerce(cls, value: LogConfig | Mapping[str, object] | None, base: LogConfig | None = None) -> LogConfig:
        if value is None:
            return base or cls()
        if isinstance(value, LogConfig):
            return value
        return cls.from_topic_config(value, base)

