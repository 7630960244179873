"""Topic-level configs: Kafka's names, types, validation and the broker settings they default to.

A topic's effective value is its own override if set, else the broker's value of its synonym (static or dynamic),
else Kafka's default. An override is kept as given (Kafka stores the text) and described as Kafka prints its parsed
value; DescribeConfigs reports where the value came from and its synonyms as Kafka's ConfigHelper does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from broker.config import kafka_values as kv
from broker.config.broker_defs import default_text
from broker.config.definitions import DEFAULT_CONFIG, TOPIC_CONFIG, ConfigDef, ConfigDescription
from broker.config.kafka_values import ConfigValueError

INT_MAX = kv.INT_RANGE[1]
LONG_MAX = kv.LONG_RANGE[1]
TIERED_STORAGE_DISABLED = ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
                           "remote log storage.")


def _topic(name: str, type: str, synonym: str | None, validator=None, *, default: str | None = None,
           internal: bool = False, doc: str = "") -> ConfigDef:
    """A topic config; its default is its broker synonym's unless given (a synonym Shoal does not define, or
    one whose default differs from the topic's as in Kafka)."""
    if default is None and synonym is not None:
        default = default_text(synonym)
    return ConfigDef(name, type, default, synonym=synonym, internal=internal, validator=validator, doc=doc)


# Kafka 4.4's LogConfig definitions: types, validators (their ranges and messages) and broker synonyms.
_DEFS = [
    _topic("cleanup.policy", "list", "log.cleanup.policy", kv.list_of("compact", "delete")),
    _topic("compression.type", "string", "compression.type",
           kv.one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _topic("compression.gzip.level", "int", "compression.gzip.level", kv.level_or_default(1, 9, -1), default="-1"),
    _topic("compression.lz4.level", "int", "compression.lz4.level", kv.between(1, 17), default="9"),
    _topic("compression.zstd.level", "int", "compression.zstd.level", kv.between(-131072, 22), default="3"),
    _topic("delete.retention.ms", "long", "log.cleaner.delete.retention.ms", kv.at_least(0)),
    # KIP-1191: a topic is a share group's dead-letter queue only if its owner allows it.
    _topic("errors.deadletterqueue.group.enable", "bool", None, default="false"),
    # accepted and reported, with no effect: a dropped segment's files are unlinked without this delay
    _topic("file.delete.delay.ms", "long", "log.segment.delete.delay.ms", kv.at_least(0), default="60000"),
    _topic("flush.messages", "long", "log.flush.interval.messages", kv.at_least(1)),
    # Kafka's flush.ms defaults to "never"; the broker's log.flush.interval.ms is Shoal's group-commit interval.
    _topic("flush.ms", "long", "log.flush.interval.ms", kv.at_least(0), default=str(LONG_MAX)),
    # replication throttles (no effect on one broker), accepted as Kafka validates them
    _topic("follower.replication.throttled.replicas", "list", None, kv.throttled_replicas, default=""),
    _topic("index.interval.bytes", "int", "log.index.interval.bytes", kv.at_least(0)),
    _topic("leader.replication.throttled.replicas", "list", None, kv.throttled_replicas, default=""),
    # tiered storage (remote.storage.enable=true is refused: the broker has none)
    _topic("local.retention.bytes", "long", "log.local.retention.bytes", kv.at_least(-2)),
    _topic("local.retention.ms", "long", "log.local.retention.ms", kv.at_least(-2)),
    _topic("max.compaction.lag.ms", "long", "log.cleaner.max.compaction.lag.ms", kv.at_least(1)),
    # Kafka 4.4's bound on one record's decompressed size; accepted and reported, not enforced
    _topic("max.decompressed.message.bytes", "int", "max.decompressed.message.bytes", kv.at_least(1)),
    _topic("max.message.bytes", "int", "message.max.bytes", kv.at_least(0)),
    _topic("message.timestamp.after.max.ms", "long", "log.message.timestamp.after.max.ms", kv.at_least(0),
           default="3600000"),
    _topic("message.timestamp.before.max.ms", "long", "log.message.timestamp.before.max.ms", kv.at_least(0),
           default=str(LONG_MAX)),
    _topic("message.timestamp.type", "string", "log.message.timestamp.type", kv.one_of("CreateTime", "LogAppendTime")),
    _topic("min.cleanable.dirty.ratio", "double", "log.cleaner.min.cleanable.ratio", kv.between(0, 1)),
    _topic("min.compaction.lag.ms", "long", "log.cleaner.min.compaction.lag.ms", kv.at_least(0)),
    _topic("min.insync.replicas", "int", "min.insync.replicas", kv.at_least(1)),
    _topic("preallocate", "bool", "log.preallocate"),
    _topic("remote.copy.lag.bytes", "long", "log.remote.copy.lag.bytes", kv.at_least(-1)),
    _topic("remote.copy.lag.ms", "long", "log.remote.copy.lag.ms", kv.at_least(-1)),
    _topic("remote.log.copy.disable", "bool", None, default="false"),
    _topic("remote.log.delete.on.disable", "bool", None, default="false"),
    _topic("remote.storage.enable", "bool", None, default="false"),
    _topic("retention.bytes", "long", "log.retention.bytes"),
    _topic("retention.ms", "long", "log.retention.ms", kv.at_least(-1)),
    # KIP-1030 (Kafka 4.0): segments of at least 1 MiB; smaller ones only through internal.segment.bytes (tests)
    _topic("segment.bytes", "int", "log.segment.bytes", kv.at_least(1024 * 1024)),
    _topic("internal.segment.bytes", "int", None, internal=True),
    _topic("segment.index.bytes", "int", "log.index.size.max.bytes", kv.at_least(4)),
    # Kafka's log.roll.jitter.ms is unset by default (log.roll.jitter.hours, 0, applies).
    _topic("segment.jitter.ms", "long", "log.roll.jitter.ms", kv.at_least(0)),
    _topic("segment.ms", "long", "log.roll.ms", kv.at_least(1)),
    _topic("unclean.leader.election.enable", "bool", "unclean.leader.election.enable"),
]
TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}
DESCRIBED_CONFIGS = sorted(d.name for d in _DEFS if not d.internal)


def validate(name: str, value: str) -> str:
    """The text to store for a topic override (as given, as Kafka stores it), or ValueError with Kafka's
    message."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise ValueError(f"Unknown topic config name: {name}")
    return definition.validate(value)


def canonical(name: str, value: str) -> str:
    """A stored override as Kafka describes it (and as Shoal's components read it)."""
    return TOPIC_CONFIGS[name].canonical(value) or ""


def validate_values(values: Mapping[str, str]) -> None:
    """Checks across configs, on a topic's effective values (overrides over broker settings over defaults), as
    Kafka's LogConfig.validateValues; ValueError with Kafka's message (answered INVALID_CONFIG)."""
    min_lag = int(values["min.compaction.lag.ms"])
    max_lag = int(values["max.compaction.lag.ms"])
    if min_lag > max_lag:
        raise ConfigValueError(f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                               f"max.compaction.lag.ms ({max_lag})")
    if values["remote.storage.enable"] == "true":
        raise ConfigValueError(TIERED_STORAGE_DISABLED)


class BrokerSettings(Protocol):
    """What a topic's effective configs need of the broker's (BrokerConfig)."""

    def broker_value(self, broker_key: str) -> tuple[str | None, int]:
        """(value text, source) of a broker setting; (None, DEFAULT_CONFIG) when only defaulted."""

    def topic_synonyms(self, broker_key: str) -> list[tuple[str, str | None, int]]:
        """The broker synonyms Kafka lists for a topic config defaulting to `broker_key`."""


def effective(name: str, overrides: Mapping[str, str], broker: BrokerSettings, *,
              raw: bool = False) -> ConfigDescription:
    """A topic config as Kafka describes it: the override (shown as Kafka prints its parsed value; as given with
    `raw`, CreateTopics' view), else the broker's value of its synonym, else the default; the synonyms are the
    override and the broker's (Kafka's ConfigHelper: the topic's own default is not one)."""
    definition = TOPIC_CONFIGS[name]
    synonyms: list[tuple[str, str | None, int]] = []
    value = definition.default
    if definition.synonym is not None:
        synonyms = broker.topic_synonyms(definition.synonym)
        broker_text, broker_source = broker.broker_value(definition.synonym)
        if broker_text is not None and broker_source != DEFAULT_CONFIG:
            value = broker_text
    if name in overrides:
        value = overrides[name] if raw else definition.canonical(overrides[name])
        synonyms.insert(0, (name, value, TOPIC_CONFIG))
    source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
    return ConfigDescription(name, value, source, config_type=definition.type_code, synonyms=tuple(synonyms),
                             documentation=definition.doc or None)


def effective_value(name: str, overrides: Mapping[str, str], broker: BrokerSettings) -> str:
    """What Shoal's components read: the effective value in Kafka's canonical text."""
    return resource_value(TOPIC_CONFIGS[name], overrides, broker)


def resource_value(definition: ConfigDef, overrides: Mapping[str, str], broker: BrokerSettings) -> str:
    """The effective value of a resource config (a topic's or a group's) in Kafka's canonical text: the
    resource's override, else its broker synonym when set (not at its default), else the config's default."""
    name = definition.name
    if name in overrides:
        return definition.canonical(overrides[name]) or ""
    if definition.synonym is not None:
        text, source = broker.broker_value(definition.synonym)
        if text is not None and source != DEFAULT_CONFIG:
            return text
    return definition.default or ""
