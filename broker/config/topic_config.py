"""Topic-level configs: Kafka's names, types, validation and the broker settings they default to.

A topic's effective value is its own override if set, else the broker's value for the synonym key (static or
dynamic), else Kafka's default. DescribeConfigs reports which of these it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from broker.config.broker_defs import default_text
from broker.config.definitions import (
    DEFAULT_CONFIG,
    INT_MAX,
    LONG_MAX,
    TOPIC_CONFIG,
    ConfigDef,
    ConfigDescription,
    fraction,
    in_values,
    int_range,
)


def _list_of(*choices: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        items = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in items if v not in choices]
        if bad or not items:
            raise ValueError(f"values must be among {', '.join(choices)}")

    return check


def _ratio(value: str) -> None:
    fraction(float(value))


def _bool(value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise ValueError("value must be true or false")


def _topic(name: str, type: str, synonym: str | None, check: Callable[[str], None], *, default: str | None = None,
           internal: bool = False) -> ConfigDef:
    """A topic config; its default is its broker synonym's unless given (a synonym Shoal does not define, or
    one whose default differs from the topic's as in Kafka)."""
    if default is None and synonym is not None:
        default = default_text(synonym)
    return ConfigDef(name, type, default, check, synonym=synonym, internal=internal)


_DEFS = [
    _topic("cleanup.policy", "list", "log.cleanup.policy", _list_of("delete", "compact")),
    _topic("compression.type", "string", "compression.type",
           in_values("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _topic("compression.gzip.level", "int", "compression.gzip.level", int_range(-1, 9), default="-1"),
    _topic("compression.lz4.level", "int", "compression.lz4.level", int_range(1, 17), default="9"),
    _topic("compression.zstd.level", "int", "compression.zstd.level", int_range(-131072, 22), default="3"),
    _topic("delete.retention.ms", "long", "log.cleaner.delete.retention.ms", int_range(0, LONG_MAX)),
    # KIP-1191: a topic is a share group's dead-letter queue only if its owner allows it.
    _topic("errors.deadletterqueue.group.enable", "bool", None, _bool, default="false"),
    # accepted and reported, with no effect: a dropped segment's files are unlinked without this delay
    _topic("file.delete.delay.ms", "long", "log.segment.delete.delay.ms", int_range(0, LONG_MAX), default="60000"),
    _topic("flush.messages", "long", "log.flush.interval.messages", int_range(1, LONG_MAX)),
    # Kafka's flush.ms defaults to "never"; the broker's log.flush.interval.ms is Shoal's group-commit interval.
    _topic("flush.ms", "long", "log.flush.interval.ms", int_range(0, LONG_MAX), default=str(LONG_MAX)),
    _topic("index.interval.bytes", "int", "log.index.interval.bytes", int_range(0, INT_MAX)),
    _topic("max.compaction.lag.ms", "long", "log.cleaner.max.compaction.lag.ms", int_range(1, LONG_MAX)),
    _topic("max.message.bytes", "int", "message.max.bytes", int_range(0, INT_MAX)),
    _topic("message.timestamp.after.max.ms", "long", "log.message.timestamp.after.max.ms", int_range(0, LONG_MAX),
           default="3600000"),
    _topic("message.timestamp.before.max.ms", "long", "log.message.timestamp.before.max.ms",
           int_range(0, LONG_MAX), default=str(LONG_MAX)),
    _topic("message.timestamp.type", "string", "log.message.timestamp.type", in_values("CreateTime", "LogAppendTime")),
    _topic("min.cleanable.dirty.ratio", "double", "log.cleaner.min.cleanable.ratio", _ratio),
    _topic("min.compaction.lag.ms", "long", "log.cleaner.min.compaction.lag.ms", int_range(0, LONG_MAX)),
    _topic("min.insync.replicas", "int", "min.insync.replicas", int_range(1, INT_MAX)),
    _topic("preallocate", "bool", "log.preallocate", _bool),
    _topic("retention.bytes", "long", "log.retention.bytes", int_range(-1, LONG_MAX)),
    _topic("retention.ms", "long", "log.retention.ms", int_range(-1, LONG_MAX)),
    # KIP-1030 (Kafka 4.0): segments of at least 1 MiB; smaller ones only through internal.segment.bytes (tests)
    _topic("segment.bytes", "int", "log.segment.bytes", int_range(1024 * 1024, INT_MAX)),
    _topic("internal.segment.bytes", "int", None, int_range(0, INT_MAX), internal=True),
    _topic("segment.index.bytes", "int", "log.index.size.max.bytes", int_range(4, INT_MAX)),
    # Kafka's log.roll.jitter.ms is unset by default (log.roll.jitter.hours, 0, applies).
    _topic("segment.jitter.ms", "long", "log.roll.jitter.ms", int_range(0, LONG_MAX)),
    _topic("segment.ms", "long", "log.roll.ms", int_range(1, LONG_MAX)),
    _topic("unclean.leader.election.enable", "bool", "unclean.leader.election.enable", _bool),
]
TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}
DESCRIBED_CONFIGS = sorted(d.name for d in _DEFS if not d.internal)


def validate(name: str, value: str) -> str:
    """Return the value to store for a topic override, or raise ValueError with Kafka-like wording."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise ValueError(f"Unknown topic config name: {name}")
    return definition.validate(value)


def validate_values(values: Mapping[str, str]) -> None:
    """Checks across configs, on a topic's effective values (overrides over broker settings over defaults), as
    Kafka's LogConfig.validateValues; ValueError with Kafka's message (answered INVALID_CONFIG)."""
    min_lag = int(values["min.compaction.lag.ms"])
    max_lag = int(values["max.compaction.lag.ms"])
    if min_lag > max_lag:
        raise ValueError(f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                         f"max.compaction.lag.ms ({max_lag})")


BrokerLookup = Callable[[str], tuple[str | None, int]]
"""broker key -> (value as string or None when unset, ConfigSource)."""


def effective(name: str, overrides: dict[str, str], broker_value: BrokerLookup) -> ConfigDescription:
    definition = TOPIC_CONFIGS[name]
    synonyms: list[tuple[str, str | None, int]] = []
    if name in overrides:
        synonyms.append((name, overrides[name], TOPIC_CONFIG))
    if definition.synonym is not None:
        value, source = broker_value(definition.synonym)
        if value is not None and source != DEFAULT_CONFIG:
            synonyms.append((definition.synonym, value, source))
    synonyms.append((name, definition.default, DEFAULT_CONFIG))
    _, value, source = synonyms[0]
    return ConfigDescription(name, value, source, config_type=definition.type_code, synonyms=tuple(synonyms),
                             documentation=definition.doc or None)


def effective_value(name: str, overrides: dict[str, str], broker_value: BrokerLookup) -> str:
    return effective(name, overrides, broker_value).value or ""
