"""Log settings as plain values. Parsing of properties lives in broker.config; this only maps names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from broker.config.components import ComponentConfig, setting
from broker.config.topic_config import TOPIC_CONFIGS
from protocol import compression as codecs


def _default(name: str) -> int:
    # The topic config's default (itself its broker synonym's), declared once in broker.config.
    return int(TOPIC_CONFIGS[name].default)


_POLICY = {p.strip() for p in TOPIC_CONFIGS["cleanup.policy"].default.split(",")}

# Kafka topic config name -> LogConfig field (integers)
TOPIC_NAMES = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.before.max.ms": "timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "timestamp_after_max_ms",
    "compression.gzip.level": "gzip_level",
    "compression.lz4.level": "lz4_level",
    "compression.zstd.level": "zstd_level",
}
# compression.type -> the codec batches are stored with; "producer" (absent here): each batch's own
COMPRESSION_CODECS = {"uncompressed": codecs.NONE, "gzip": codecs.GZIP, "snappy": codecs.SNAPPY, "lz4": codecs.LZ4,
                      "zstd": codecs.ZSTD}
PRODUCER_CODEC = -1


def _int(value: object) -> int:
    """A topic config's int value, given as text or a number."""
    number: int = int(value)  # type: ignore[call-overload]
    return number


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")  # each segment rolls up to this much before segment.ms
    retention_ms: int = _default("retention.ms")  # -1: no time limit
    retention_bytes: int = _default("retention.bytes")  # -1: no size limit
    index_interval_bytes: int = _default("index.interval.bytes")
    # cleanup.policy: "delete" trims by retention, "compact" keeps the latest record per key (the log cleaner)
    compact: bool = "compact" in _POLICY
    delete: bool = "delete" in _POLICY
    segment_index_bytes: int = _default("segment.index.bytes")  # the cleaner groups segments up to this much index
    min_cleanable_ratio: float = float(TOPIC_CONFIGS["min.cleanable.dirty.ratio"].default)
    delete_retention_ms: int = _default("delete.retention.ms")  # how long cleaned tombstones stay readable
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    max_message_bytes: int = _default("max.message.bytes")
    # message.timestamp.type LogAppendTime: the broker stamps appended batches with its clock
    log_append_time: bool = TOPIC_CONFIGS["message.timestamp.type"].default == "LogAppendTime"
    # how far a CreateTime record may lie before / after the broker's clock (Kafka's LogValidator)
    timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    # compression.type as a codec (PRODUCER_CODEC: batches keep the producer's), and the levels of the codecs
    compression: int = COMPRESSION_CODECS.get(TOPIC_CONFIGS["compression.type"].default, PRODUCER_CODEC)
    gzip_level: int = _default("compression.gzip.level")
    lz4_level: int = _default("compression.lz4.level")
    zstd_level: int = _default("compression.zstd.level")

    @property
    def compression_level(self) -> int | None:
        """The level compression.type's codec compresses at (None for a codec without levels)."""
        return {codecs.GZIP: self.gzip_level, codecs.LZ4: self.lz4_level, codecs.ZSTD: self.zstd_level}.get(
            self.compression)

    @property
    def max_segment_ms(self) -> int:
        """How long a segment may stay active: segment.ms, or max.compaction.lag.ms if smaller on a compacted log
        (as Kafka's LogConfig.maxSegmentMs), so its records become cleanable in time."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @classmethod
    def from_topic_config(cls, values: Mapping[str, object], base: LogConfig | None = None) -> LogConfig:
        """Take the log settings out of effective topic configs (Kafka names, text or int values)."""
        base = base or cls()
        changes: dict[str, object] = {attr: _int(values[name])
                                      for name, attr in TOPIC_NAMES.items() if values.get(name) is not None}
        internal = values.get("internal.segment.bytes")
        if internal not in (None, "") and _int(internal) > 0:
            # Kafka's test-only override (any int is accepted, as Kafka does; only a positive size is used)
            changes["segment_bytes"] = _int(internal)
        ratio = values.get("min.cleanable.dirty.ratio")
        if ratio is not None:
            changes["min_cleanable_ratio"] = float(ratio)  # type: ignore[arg-type]
        compression = values.get("compression.type")
        if compression is not None:
            changes["compression"] = COMPRESSION_CODECS.get(str(compression), PRODUCER_CODEC)
        timestamp_type = values.get("message.timestamp.type")
        if timestamp_type is not None:
            changes["log_append_time"] = str(timestamp_type) == "LogAppendTime"
        policy = values.get("cleanup.policy")
        if policy is not None:
            policies = {p.strip() for p in str(policy).split(",")}
            changes.update(compact="compact" in policies, delete="delete" in policies)
            if "delete" not in policies:
                # A compact-only topic (the internal topics) is never trimmed by time or size.
                changes.update(retention_ms=-1, retention_bytes=-1)
        return replace(base, **changes)  # type: ignore[arg-type]

    @classmethod
    def coerce(cls, value: LogConfig | Mapping[str, object] | None, base: LogConfig | None = None) -> LogConfig:
        if value is None:
            return base or cls()
        if isinstance(value, LogConfig):
            return value
        return cls.from_topic_config(value, base)


@dataclass(frozen=True)
class LogManagerConfig(ComponentConfig):
    """The broker-wide log settings read outside a log's own LogConfig."""

    retention_check_interval_ms: int = setting("log.retention.check.interval.ms")
    # the group-commit interval of the flusher (0: flush as soon as the previous flush finishes)
    flush_interval_ms: int = setting("log.flush.interval.ms")
