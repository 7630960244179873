"""Topic-level configs: Kafka's names, types, validation and the broker settings they default to.

A topic's effective value is its own override if set, else the broker's value for the synonym key (static or
dynamic), else Kafka's default. DescribeConfigs reports which of these it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.config.definitions import (
    BOOLEAN,
    DEFAULT_CONFIG,
    DOUBLE,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    GROUP_CONFIG,
    INT,
    INT_MAX,
    LIST,
    LONG,
    LONG_MAX,
    STATIC_BROKER_CONFIG,
    STRING,
    TOPIC_CONFIG,
)

__all__ = ["DEFAULT_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "GROUP_CONFIG",
           "STATIC_BROKER_CONFIG", "TOPIC_CONFIG"]


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: int
    default: str | None
    broker_key: str | None
    check: Callable[[str], None] | None = None
    doc: str = ""
    internal: bool = False  # Kafka's defineInternal: settable, never listed by DescribeConfigs


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False
    is_sensitive: bool = False
    config_type: int = 0
    synonyms: tuple[tuple[str, str | None, int], ...] = ()
    documentation: str | None = None


def int_range(lo: int, hi: int) -> Callable[[str], None]:
    """Kafka's ConfigDef.Range (atLeast / between) with its messages."""
    def check(value: str) -> None:
        number = int(value)
        if number < lo:
            raise ValueError(f"Value must be at least {lo}")
        if number > hi:
            raise ValueError(f"Value must be no more than {hi}")

    return check


# Kafka parses INT and LONG configs as Java ints and longs: anything else is "Not a number of type ...".
_NUMBER_BOUNDS = {INT: ("INT", -(2**31), INT_MAX), LONG: ("LONG", -(2**63), LONG_MAX)}


def _parse_number(kind: int, value: str) -> None:
    name, lo, hi = _NUMBER_BOUNDS[kind]
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"Not a number of type {name}") from None
    if not lo <= number <= hi:
        raise ValueError(f"Not a number of type {name}")


def one_of(*choices: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in choices:
            raise ValueError(f"value must be one of {', '.join(choices)}")

    return check


def _list_of(*choices: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        items = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in items if v not in choices]
        if bad or not items:
            raise ValueError(f"values must be among {', '.join(choices)}")

    return check


def _ratio(value: str) -> None:
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError("value must be between 0 and 1")


def _bool(value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise ValueError("value must be true or false")


_DEFS = [
    TopicConfigDef("cleanup.policy", LIST, "delete", "log.cleanup.policy", _list_of("delete", "compact")),
    TopicConfigDef("compression.type", STRING, "producer", "compression.type",
                   one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    TopicConfigDef("compression.gzip.level", INT, "-1", "compression.gzip.level", int_range(-1, 9)),
    TopicConfigDef("compression.lz4.level", INT, "9", "compression.lz4.level", int_range(1, 17)),
    TopicConfigDef("compression.zstd.level", INT, "3", "compression.zstd.level", int_range(-131072, 22)),
    TopicConfigDef("delete.retention.ms", LONG, "86400000", "log.cleaner.delete.retention.ms",
                   int_range(0, LONG_MAX)),
    # KIP-1191: a topic is a share group's dead-letter queue only if its owner allows it.
    TopicConfigDef("errors.deadletterqueue.group.enable", BOOLEAN, "false", None, _bool),
    TopicConfigDef("file.delete.delay.ms", LONG, "60000", "log.segment.delete.delay.ms", int_range(0, LONG_MAX)),
    TopicConfigDef("flush.messages", LONG, str(LONG_MAX), "log.flush.interval.messages", int_range(1, LONG_MAX)),
    TopicConfigDef("flush.ms", LONG, str(LONG_MAX), "log.flush.interval.ms", int_range(0, LONG_MAX)),
    TopicConfigDef("index.interval.bytes", INT, "4096", "log.index.interval.bytes", int_range(0, INT_MAX)),
    TopicConfigDef("max.compaction.lag.ms", LONG, str(LONG_MAX), "log.cleaner.max.compaction.lag.ms",
                   int_range(1, LONG_MAX)),
    TopicConfigDef("max.message.bytes", INT, "1048588", "message.max.bytes", int_range(0, INT_MAX)),
    TopicConfigDef("message.timestamp.after.max.ms", LONG, "3600000", "log.message.timestamp.after.max.ms",
                   int_range(0, LONG_MAX)),
    TopicConfigDef("message.timestamp.before.max.ms", LONG, str(LONG_MAX), "log.message.timestamp.before.max.ms",
                   int_range(0, LONG_MAX)),
    TopicConfigDef("message.timestamp.type", STRING, "CreateTime", "log.message.timestamp.type",
                   one_of("CreateTime", "LogAppendTime")),
    TopicConfigDef("min.cleanable.dirty.ratio", DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio", _ratio),
    TopicConfigDef("min.compaction.lag.ms", LONG, "0", "log.cleaner.min.compaction.lag.ms", int_range(0, LONG_MAX)),
    TopicConfigDef("min.insync.replicas", INT, "1", "min.insync.replicas", int_range(1, INT_MAX)),
    TopicConfigDef("preallocate", BOOLEAN, "false", "log.preallocate", _bool),
    TopicConfigDef("retention.bytes", LONG, "-1", "log.retention.bytes", int_range(-1, LONG_MAX)),
    TopicConfigDef("retention.ms", LONG, "604800000", "log.retention.ms", int_range(-1, LONG_MAX)),
    # KIP-1030 (Kafka 4.0): segments of at least 1 MiB; smaller ones only through internal.segment.bytes (tests)
    TopicConfigDef("segment.bytes", INT, "1073741824", "log.segment.bytes", int_range(1024 * 1024, INT_MAX)),
    TopicConfigDef("internal.segment.bytes", INT, None, None, int_range(0, INT_MAX), internal=True),
    TopicConfigDef("segment.index.bytes", INT, "10485760", "log.index.size.max.bytes", int_range(4, INT_MAX)),
    TopicConfigDef("segment.jitter.ms", LONG, "0", "log.roll.jitter.ms", int_range(0, LONG_MAX)),
    TopicConfigDef("segment.ms", LONG, "604800000", "log.roll.ms", int_range(1, LONG_MAX)),
    TopicConfigDef("unclean.leader.election.enable", BOOLEAN, "false", "unclean.leader.election.enable", _bool),
]
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}
DESCRIBED_CONFIGS = sorted(d.name for d in _DEFS if not d.internal)


def validate(name: str, value: str) -> str:
    """Return the value to store for a topic override, or raise ValueError with Kafka-like wording."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise ValueError(f"Unknown topic config name: {name}")
    try:
        if definition.type in _NUMBER_BOUNDS:
            _parse_number(definition.type, value.strip())
        if definition.check is not None:
            definition.check(value.strip())
    except ValueError as err:
        raise ValueError(f"Invalid value {value} for configuration {name}: {err}") from None
    return value.strip()


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


def effective(name: str, overrides: dict[str, str], broker_value: BrokerLookup) -> ConfigEntry:
    definition = TOPIC_CONFIGS[name]
    synonyms: list[tuple[str, str | None, int]] = []
    if name in overrides:
        synonyms.append((name, overrides[name], TOPIC_CONFIG))
    if definition.broker_key is not None:
        value, source = broker_value(definition.broker_key)
        if value is not None and source != DEFAULT_CONFIG:
            synonyms.append((definition.broker_key, value, source))
    synonyms.append((name, definition.default, DEFAULT_CONFIG))
    _, value, source = synonyms[0]
    return ConfigEntry(name, value, source, config_type=definition.type, synonyms=tuple(synonyms),
                       documentation=definition.doc or None)


def effective_value(name: str, overrides: dict[str, str], broker_value: BrokerLookup) -> str:
    return effective(name, overrides, broker_value).value or ""
