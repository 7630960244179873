"""Group-level configs (KIP-848/KIP-932 GroupConfig): names, validation and the broker settings they default to.

Set with IncrementalAlterConfigs on the GROUP resource (type 32), e.g. `share.auto.offset.reset=earliest`;
a group's effective value is its override, else the broker setting it is a synonym of, else the default.
Integer share configs must lie within the broker's `group.share.min.*`/`group.share.max.*` bounds; the share
group coordinator and the share-partition leader read the effective values on every use, so a change applies
to running groups at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from broker.config.broker_defs import default_text
from broker.config.definitions import (
    DEFAULT_CONFIG,
    GROUP_CONFIG,
    ConfigDef,
    ConfigDescription,
    in_values,
    int_range,
)

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


def _auto_offset_reset(value: str) -> None:
    if value in ("latest", "earliest"):
        return
    if value.startswith("by_duration:"):
        duration_ms(value.removeprefix("by_duration:"))
        return
    raise ValueError("value must be latest, earliest or by_duration:<ISO-8601 duration>")


def _boolean(value: str) -> None:
    # Kafka's ConfigDef accepts true/false in any case.
    if value.lower() not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")


def _dlq_topic_name(value: str) -> None:
    # KIP-1191: internal topics (their names start with "__") can never be a dead-letter queue.
    if value.startswith("__"):
        raise ValueError("DLQ topic name must not start with '__'")


def _group(name: str, type: str, synonym: str | None, check: Callable[[str], None], *, default: str | None = None,
           bounded: bool = False) -> ConfigDef:
    """A group config; its default is its broker synonym's (as Kafka's GroupConfig), unless it has none.
    A bounded one must lie within the synonym's `min`/`max` broker configs (validateIntRange)."""
    bounds = None
    if synonym is not None:
        default = default_text(synonym)
        prefix, _, key = synonym.partition(".")  # "group", "share.record.lock.duration.ms"
        family, _, key = key.partition(".")
        if bounded:
            bounds = (f"{prefix}.{family}.min.{key}", f"{prefix}.{family}.max.{key}")
    return ConfigDef(name, type, default, check, synonym=synonym, bounds=bounds)


_SHARE = "group.share"
_CONSUMER = "group.consumer"
_DEFS = [
    _group("consumer.session.timeout.ms", "int", f"{_CONSUMER}.session.timeout.ms", int_range(1), bounded=True),
    _group("consumer.heartbeat.interval.ms", "int", f"{_CONSUMER}.heartbeat.interval.ms", int_range(1),
           bounded=True),
    _group("share.session.timeout.ms", "int", f"{_SHARE}.session.timeout.ms", int_range(1), bounded=True),
    _group("share.heartbeat.interval.ms", "int", f"{_SHARE}.heartbeat.interval.ms", int_range(1), bounded=True),
    _group("share.record.lock.duration.ms", "int", f"{_SHARE}.record.lock.duration.ms", int_range(1000),
           bounded=True),
    _group("share.delivery.count.limit", "int", f"{_SHARE}.delivery.count.limit", int_range(2), bounded=True),
    _group("share.partition.max.record.locks", "int", f"{_SHARE}.partition.max.record.locks", int_range(100),
           bounded=True),
    _group("share.auto.offset.reset", "string", None, _auto_offset_reset, default="latest"),
    _group("share.isolation.level", "string", None, in_values("read_uncommitted", "read_committed"),
           default="read_uncommitted"),
    _group("share.renew.acknowledge.enable", "bool", None, _boolean, default="true"),
    _group("errors.deadletterqueue.topic.name", "string", None, _dlq_topic_name, default=""),
    _group("errors.deadletterqueue.copy.record.enable", "bool", None, _boolean, default="false"),
]
GROUP_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}
# Session timeout must stay above the heartbeat interval (Kafka's validateSessionExceedsHeartbeat).
_SESSION_HEARTBEAT = [("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                      ("share.session.timeout.ms", "share.heartbeat.interval.ms")]

BrokerGet = Callable[[str], object]
BrokerLookup = Callable[[str], tuple[str | None, int]]


def validate(name: str, value: str) -> str:
    """Syntax and type of one value (the broker's bounds are checked by `validate_overrides`)."""
    definition = GROUP_CONFIGS.get(name)
    if definition is None:
        raise ValueError(f"Unknown group config name: {name}")
    text = definition.validate(value)
    return text.lower() if definition.type == "bool" else text


def validate_overrides(changed: dict[str, str | None], overrides: dict[str, str], broker_get: BrokerGet) -> None:
    """Kafka's GroupConfig.validate for a group's overrides after a change (`changed`: the new values, None for a
    deleted one): each set integer config within the broker's min/max (`key must be in the range MIN to MAX
    inclusive.`), and the session timeout above the heartbeat interval, taking the broker's value for whichever
    of the two the group does not set (so deleting one may be refused too)."""
    for name, value in changed.items():
        definition = GROUP_CONFIGS[name]
        if value is not None and definition.bounds is not None:
            lo, hi = (int(str(broker_get(key))) for key in definition.bounds)
            if not lo <= int(value) <= hi:
                raise ValueError(f"{name} must be in the range {lo} to {hi} inclusive.")
    for session, heartbeat in _SESSION_HEARTBEAT:
        if session in changed or heartbeat in changed:
            s = int(overrides.get(session) or str(broker_get(GROUP_CONFIGS[session].synonym)))
            h = int(overrides.get(heartbeat) or str(broker_get(GROUP_CONFIGS[heartbeat].synonym)))
            if s <= h:
                raise ValueError(f"{session} must be greater than {heartbeat}")


def clamped(name: str, value: str, broker_get: BrokerGet) -> str:
    """A group override within the broker's current bounds (Kafka's GroupConfig.evaluate: the bounds may have
    been narrowed since the override was set)."""
    definition = GROUP_CONFIGS[name]
    if definition.bounds is None:
        return value
    lo, hi = (int(str(broker_get(key))) for key in definition.bounds)
    return str(min(max(int(value), lo), hi))


def effective(name: str, overrides: dict[str, str], broker_value: BrokerLookup) -> ConfigDescription:
    """The group's value of `name` and where it comes from: its override (GROUP_CONFIG source), else the broker
    setting it defaults to (static or dynamic), else the default; synonyms list them in that order."""
    definition = GROUP_CONFIGS[name]
    synonyms: list[tuple[str, str | None, int]] = []
    if name in overrides:
        synonyms.append((name, overrides[name], GROUP_CONFIG))
    value, source = definition.default, DEFAULT_CONFIG
    if definition.synonym is not None:
        broker, broker_source = broker_value(definition.synonym)
        if broker is not None and broker_source != DEFAULT_CONFIG:
            value, source = broker, broker_source
        synonyms.append((definition.synonym, value, source))
    if name in overrides:
        value, source = overrides[name], GROUP_CONFIG
    return ConfigDescription(name, value, source, config_type=definition.type_code, synonyms=tuple(synonyms))
