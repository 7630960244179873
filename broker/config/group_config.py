"""Group-level configs (KIP-848/KIP-932 GroupConfig): names, validation and the broker settings they default to.

Set with IncrementalAlterConfigs on the GROUP resource (type 32), e.g. `share.auto.offset.reset=earliest`;
a group's effective value is its override, else the broker setting it is a synonym of, else the default.
Integer share configs must lie within the broker's `group.share.min.*`/`group.share.max.*` bounds; the share
group coordinator and the share-partition leader read the effective values on every use, so a change applies
to running groups at once.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from broker.config import kafka_values as kv
from broker.config.broker_defs import default_text
from broker.config.definitions import DEFAULT_CONFIG, GROUP_CONFIG, ConfigDef, ConfigDescription
from broker.config.topic_config import BrokerSettings, resource_value

# ISO-8601 duration as Java's Duration.parse accepts it (days, hours, minutes, seconds).
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration such as P1DT2H or PT30M."""
    match = _DURATION.match(text.strip())
    if match is None or text.strip().upper() in ("P", "PT"):
        raise ValueError(f"{text!r} is not an ISO-8601 duration such as PT1H or P1D")
    days, hours, minutes, seconds = match.groups()
    total_s = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
    return int(total_s * 1000)


def _auto_offset_reset(name: str, value: str) -> None:
    if value in ("latest", "earliest"):
        return
    if value.startswith("by_duration:"):
        try:
            duration_ms(value.removeprefix("by_duration:"))
            return
        except ValueError:
            pass
    raise kv.invalid(name, value, f"Invalid value `{value}` for configuration {name}. The value must be either "
                                  "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def _dlq_topic_name(name: str, value: str) -> None:
    # KIP-1191: internal topics (their names start with "__") can never be a dead-letter queue.
    if value.startswith("__"):
        raise kv.ConfigValueError(f"{name}: DLQ topic name must not start with '__'")


def _non_negative_list(name: str, value: list[str]) -> None:
    if any(not item for item in value):
        raise kv.ConfigValueError(f"Configuration '{name}' values must not be empty.")


def _group(name: str, type: str, synonym: str | None, validator=None, *, default: str | None = None,
           bounded: bool = False, internal: bool = False) -> ConfigDef:
    """A group config; its default is its broker synonym's (as Kafka's GroupConfig), unless it has none.
    A bounded one must lie within the synonym's `min`/`max` broker configs (validateIntRange). An internal one
    (Kafka's defineInternal) is described only when the group sets it, as the text it was given."""
    bounds = None
    if synonym is not None:
        default = default_text(synonym)
        prefix, _, key = synonym.partition(".")  # "group", "share.record.lock.duration.ms"
        family, _, key = key.partition(".")
        if bounded:
            bounds = (f"{prefix}.{family}.min.{key}", f"{prefix}.{family}.max.{key}")
    return ConfigDef(name, type, default, synonym=synonym, bounds=bounds, validator=validator, internal=internal)


_SHARE = "group.share"
_CONSUMER = "group.consumer"
_STREAMS = "group.streams"
# Kafka 4.4's GroupConfig: types, validators and broker synonyms. The consumer and share assignment intervals
# are accepted and described with no effect (Shoal assigns at once), and so are the three
# *.assignor.offload.enable configs, as in Kafka 4.4: internal, and its group coordinator defines accessors for
# them that nothing calls.
_DEFS = [
    _group("consumer.assignment.interval.ms", "int", f"{_CONSUMER}.assignment.interval.ms", kv.at_least(0),
           bounded=True),
    _group("consumer.assignor.offload.enable", "bool", f"{_CONSUMER}.assignor.offload.enable", internal=True),
    _group("consumer.heartbeat.interval.ms", "int", f"{_CONSUMER}.heartbeat.interval.ms", kv.at_least(1),
           bounded=True),
    _group("consumer.session.timeout.ms", "int", f"{_CONSUMER}.session.timeout.ms", kv.at_least(1), bounded=True),
    _group("errors.deadletterqueue.copy.record.enable", "bool", None, default="false"),
    _group("errors.deadletterqueue.topic.name", "string", None, _dlq_topic_name, default=""),
    _group("share.assignment.interval.ms", "int", f"{_SHARE}.assignment.interval.ms", kv.at_least(0), bounded=True),
    _group("share.assignor.offload.enable", "bool", f"{_SHARE}.assignor.offload.enable", internal=True),
    _group("share.auto.offset.reset", "string", None, _auto_offset_reset, default="latest"),
    _group("share.delivery.count.limit", "int", f"{_SHARE}.delivery.count.limit", kv.at_least(2), bounded=True),
    _group("share.heartbeat.interval.ms", "int", f"{_SHARE}.heartbeat.interval.ms", kv.at_least(1), bounded=True),
    _group("share.isolation.level", "string", None, kv.one_of("read_committed", "read_uncommitted"),
           default="read_uncommitted"),
    _group("share.partition.max.record.locks", "int", f"{_SHARE}.partition.max.record.locks", kv.at_least(100),
           bounded=True),
    _group("share.record.lock.duration.ms", "int", f"{_SHARE}.record.lock.duration.ms", kv.at_least(1000),
           bounded=True),
    _group("share.renew.acknowledge.enable", "bool", None, default="true"),
    _group("share.session.timeout.ms", "int", f"{_SHARE}.session.timeout.ms", kv.at_least(1), bounded=True),
    _group("streams.assignment.interval.ms", "int", f"{_STREAMS}.assignment.interval.ms", kv.at_least(0),
           bounded=True),
    _group("streams.acceptable.recovery.lag", "long", f"{_STREAMS}.acceptable.recovery.lag", kv.at_least(0),
           internal=True),
    _group("streams.assignor.name", "string", f"{_STREAMS}.assignors"),
    _group("streams.assignor.offload.enable", "bool", f"{_STREAMS}.assignor.offload.enable", internal=True),
    _group("streams.heartbeat.interval.ms", "int", f"{_STREAMS}.heartbeat.interval.ms", kv.at_least(1),
           bounded=True),
    _group("streams.initial.rebalance.delay.ms", "int", f"{_STREAMS}.initial.rebalance.delay.ms", kv.at_least(0)),
    _group("streams.num.standby.replicas", "int", f"{_STREAMS}.num.standby.replicas", kv.at_least(0)),
    # Kafka 4.4 reads it to refine target assignments with warm-up tasks, but its refinement hands out none
    # (AssignmentRefiner.refine returns the assignor's answer): accepted and described, with no effect there either.
    _group("streams.num.warmup.replicas", "int", f"{_STREAMS}.num.warmup.replicas", kv.at_least(0), internal=True),
    _group("streams.rack.aware.assignment.tags", "list", f"{_STREAMS}.rack.aware.assignment.tags",
           _non_negative_list),
    _group("streams.session.timeout.ms", "int", f"{_STREAMS}.session.timeout.ms", kv.at_least(1), bounded=True),
    _group("streams.task.offset.interval.ms", "int", f"{_STREAMS}.task.offset.interval.ms", kv.at_least(1),
           internal=True),
]
GROUP_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}
# Session timeout must stay above the heartbeat interval (Kafka's validateSessionExceedsHeartbeat).
# One-sided broker bounds (Kafka's validateIntMax / validateIntMin, clampToMax / clampToMin): config -> (the
# broker config holding the bound, whether it is a maximum).
_ONE_SIDED = {"streams.num.standby.replicas": (f"{_STREAMS}.max.standby.replicas", True),
              "streams.task.offset.interval.ms": (f"{_STREAMS}.min.task.offset.interval.ms", False),
              "streams.num.warmup.replicas": (f"{_STREAMS}.max.warmup.replicas", True)}
_SESSION_HEARTBEAT = [("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                      ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                      ("streams.session.timeout.ms", "streams.heartbeat.interval.ms")]

BrokerGet = Callable[[str], object]


def validate(name: str, value: str) -> str:
    """Syntax and type of one value, as given (the broker's bounds are checked by `validate_all`)."""
    definition = GROUP_CONFIGS.get(name)
    if definition is None:
        raise ValueError(f"Unknown group config name: {name}")
    return definition.validate(value)


def validate_all(overrides: dict[str, str], broker_get: BrokerGet) -> None:
    """Kafka's GroupConfig.validate of a group's overrides after a change: the names, each value, each integer
    config within the broker's min/max (`key must be in the range MIN to MAX inclusive.`), the streams
    settings Kafka checks against the broker's, and the session timeout above the heartbeat interval, taking
    the broker's value for whichever of the two the group does not set."""
    unknown = [name for name in overrides if name not in GROUP_CONFIGS]
    if unknown:
        raise ValueError(f"Unknown group config name: {unknown[0]}")
    values = {name: GROUP_CONFIGS[name].canonical(validate(name, value)) or "" for name, value in overrides.items()}
    for name, value in values.items():
        definition = GROUP_CONFIGS[name]
        if value is not None and definition.bounds is not None:
            lo, hi = (int(str(broker_get(key))) for key in definition.bounds)
            if not lo <= int(value) <= hi:
                raise ValueError(f"{name} must be in the range {lo} to {hi} inclusive.")
    for name, (bound, is_max) in _ONE_SIDED.items():
        if name not in values:
            continue
        number, limit = int(values[name]), int(str(broker_get(bound)))
        if is_max and number > limit:
            raise ValueError(f"{name} must be less than or equal to {limit}")
        if not is_max and number < limit:
            raise ValueError(f"{name} must be greater than or equal to {limit}")
    assignor = values.get("streams.assignor.name")
    if assignor is not None:
        registered = broker_get(f"{_STREAMS}.assignors")
        names = list(registered) if isinstance(registered, list) else [str(registered)]
        if assignor not in names:
            raise ValueError(f"streams.assignor.name '{assignor}' is not a registered task assignor. Registered "
                             f"assignors are: [{', '.join(names)}].")
    for session, heartbeat in _SESSION_HEARTBEAT:
        if session in values or heartbeat in values:
            s = int(values.get(session) or str(broker_get(_synonym(session))))
            h = int(values.get(heartbeat) or str(broker_get(_synonym(heartbeat))))
            if s <= h:
                raise ValueError(f"{session} must be greater than {heartbeat}")


def clamped(name: str, value: str, broker_get: BrokerGet) -> str:
    """A group override within the broker's current bounds (Kafka's GroupConfig.evaluate: the bounds may have
    been narrowed since the override was set)."""
    definition = GROUP_CONFIGS[name]
    if name in _ONE_SIDED:
        bound, is_max = _ONE_SIDED[name]
        limit, number = int(str(broker_get(bound))), int(value)
        return str(min(number, limit) if is_max else max(number, limit))
    if definition.bounds is None:
        return value
    lo, hi = (int(str(broker_get(key))) for key in definition.bounds)
    return str(min(max(int(value), lo), hi))


def effective(name: str, overrides: Mapping[str, str], broker: BrokerSettings) -> ConfigDescription:
    """The group's value of `name` as Kafka's ConfigHelper describes it: its override (GROUP_CONFIG source, its
    parsed value), else the broker setting it defaults to (static or dynamic), else the default; the synonyms
    are the override, then the broker's synonyms, or the config's own default when it has no broker synonym."""
    definition = GROUP_CONFIGS[name]
    value = definition.default
    if definition.synonym is not None:
        synonyms = broker.topic_synonyms(definition.synonym)
        broker_text, broker_source = broker.broker_value(definition.synonym)
        if broker_text is not None and broker_source != DEFAULT_CONFIG:
            value = broker_text
    else:
        synonyms = [(name, definition.default, DEFAULT_CONFIG)]
    if name in overrides:
        value = overrides[name] if definition.internal else definition.canonical(overrides[name])
        synonyms.insert(0, (name, value, GROUP_CONFIG))
    source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
    return ConfigDescription(name, value, source, config_type=definition.type_code, synonyms=tuple(synonyms))


def effective_value(name: str, overrides: Mapping[str, str], broker: BrokerSettings) -> str:
    """What Shoal's components read: the effective value in Kafka's canonical text."""
    return resource_value(GROUP_CONFIGS[name], overrides, broker)


# --- typed effective values ---------------------------------------------------------------------------------
def _field(name: str) -> Any:
    """A GroupConfig field: the group config `name`, defaulting to its table default (parsed)."""
    definition = GROUP_CONFIGS[name]
    default = _typed(definition, definition.default or "")
    return dataclasses.field(default=default, metadata={"group_config": name})


def _typed(definition: ConfigDef, text: str) -> Any:
    value = kv.parse(definition.name, definition.type, text)
    return tuple(value) if isinstance(value, list) else value


@dataclasses.dataclass(frozen=True)
class GroupConfig:
    """A group's effective configs, typed (Kafka's GroupConfig accessors): what the group coordinator, the
    share-partition leader and the DLQ read. Defaults are the table's (a broker synonym's default)."""

    consumer_assignment_interval_ms: int = _field("consumer.assignment.interval.ms")
    consumer_assignor_offload_enable: bool = _field("consumer.assignor.offload.enable")
    consumer_heartbeat_interval_ms: int = _field("consumer.heartbeat.interval.ms")
    consumer_session_timeout_ms: int = _field("consumer.session.timeout.ms")
    errors_deadletterqueue_copy_record_enable: bool = _field("errors.deadletterqueue.copy.record.enable")
    errors_deadletterqueue_topic_name: str = _field("errors.deadletterqueue.topic.name")  # empty: no DLQ
    share_assignment_interval_ms: int = _field("share.assignment.interval.ms")
    share_assignor_offload_enable: bool = _field("share.assignor.offload.enable")
    share_auto_offset_reset: str = _field("share.auto.offset.reset")  # latest, earliest, by_duration:<ISO>
    share_delivery_count_limit: int = _field("share.delivery.count.limit")
    share_heartbeat_interval_ms: int = _field("share.heartbeat.interval.ms")
    share_isolation_level: str = _field("share.isolation.level")
    share_partition_max_record_locks: int = _field("share.partition.max.record.locks")
    share_record_lock_duration_ms: int = _field("share.record.lock.duration.ms")
    share_renew_acknowledge_enable: bool = _field("share.renew.acknowledge.enable")
    share_session_timeout_ms: int = _field("share.session.timeout.ms")
    streams_assignment_interval_ms: int = _field("streams.assignment.interval.ms")
    streams_acceptable_recovery_lag: int = _field("streams.acceptable.recovery.lag")
    streams_assignor_name: str = _field("streams.assignor.name")
    streams_assignor_offload_enable: bool = _field("streams.assignor.offload.enable")
    streams_heartbeat_interval_ms: int = _field("streams.heartbeat.interval.ms")
    streams_initial_rebalance_delay_ms: int = _field("streams.initial.rebalance.delay.ms")
    streams_num_standby_replicas: int = _field("streams.num.standby.replicas")
    streams_num_warmup_replicas: int = _field("streams.num.warmup.replicas")
    streams_rack_aware_assignment_tags: tuple[str, ...] = _field("streams.rack.aware.assignment.tags")
    streams_session_timeout_ms: int = _field("streams.session.timeout.ms")
    streams_task_offset_interval_ms: int = _field("streams.task.offset.interval.ms")

    @classmethod
    def from_values(cls, values: Mapping[str, str]) -> GroupConfig:
        """From effective values as text (ConfigService.group_config); a name not given takes its default."""
        names = {f.name: f.metadata["group_config"] for f in dataclasses.fields(cls)}
        return cls(**{field: _typed(GROUP_CONFIGS[name], values[name]) for field, name in names.items()
                      if name in values})

    @property
    def share_read_committed(self) -> bool:
        return self.share_isolation_level == "read_committed"


def _synonym(name: str) -> str:
    """The broker setting a group config defaults to (every group config with a range has one)."""
    synonym = GROUP_CONFIGS[name].synonym
    assert synonym is not None, name
    return synonym
