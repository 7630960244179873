"""Group-level configs (KIP-848/KIP-932 GroupConfig): names, validation and the broker settings they default to.

Set with IncrementalAlterConfigs on the GROUP resource (type 32), e.g. `share.auto.offset.reset=earliest`;
a group's effective value is its override, else the broker setting named in `broker_key`, else the default.
Integer share configs must lie within the broker's `group.share.min.*`/`group.share.max.*` bounds; the share
group coordinator and the share-partition leader read the effective values on every use, so a change applies
to running groups at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from broker.config.topic_config import (
    BOOLEAN,
    DEFAULT_CONFIG,
    INT,
    STRING,
    ConfigEntry,
    one_of,
)

GROUP_RESOURCE = 32
DYNAMIC_GROUP_CONFIG = 8  # ConfigSource for a group override

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


def _at_least(lo: int) -> Callable[[str], None]:
    # Kafka's ConfigDef.Range.atLeast, with its message.
    def check(value: str) -> None:
        if int(value) < lo:
            raise ValueError(f"Value must be at least {lo}")

    return check


def _boolean(value: str) -> None:
    # Kafka's ConfigDef accepts true/false in any case.
    if value.lower() not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")


def _dlq_topic_name(value: str) -> None:
    # KIP-1191: internal topics (their names start with "__") can never be a dead-letter queue.
    if value.startswith("__"):
        raise ValueError("DLQ topic name must not start with '__'")


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: int
    default: str
    broker_key: str | None
    check: Callable[[str], None]
    # Broker configs holding the allowed range ("group.share.min.x", "group.share.max.x", and the same for
    # group.consumer), as Kafka's GroupConfig.validateIntRange checks them.
    bounds: tuple[str, str] | None = None


_SHARE = "group.share"
_CONSUMER = "group.consumer"
_DEFS = [
    GroupConfigDef("consumer.session.timeout.ms", INT, "45000", f"{_CONSUMER}.session.timeout.ms", _at_least(1),
                   (f"{_CONSUMER}.min.session.timeout.ms", f"{_CONSUMER}.max.session.timeout.ms")),
    GroupConfigDef("consumer.heartbeat.interval.ms", INT, "5000", f"{_CONSUMER}.heartbeat.interval.ms",
                   _at_least(1),
                   (f"{_CONSUMER}.min.heartbeat.interval.ms", f"{_CONSUMER}.max.heartbeat.interval.ms")),
    GroupConfigDef("share.session.timeout.ms", INT, "45000", f"{_SHARE}.session.timeout.ms", _at_least(1),
                   (f"{_SHARE}.min.session.timeout.ms", f"{_SHARE}.max.session.timeout.ms")),
    GroupConfigDef("share.heartbeat.interval.ms", INT, "5000", f"{_SHARE}.heartbeat.interval.ms",
                   _at_least(1),
                   (f"{_SHARE}.min.heartbeat.interval.ms", f"{_SHARE}.max.heartbeat.interval.ms")),
    GroupConfigDef("share.record.lock.duration.ms", INT, "30000", f"{_SHARE}.record.lock.duration.ms",
                   _at_least(1000),
                   (f"{_SHARE}.min.record.lock.duration.ms", f"{_SHARE}.max.record.lock.duration.ms")),
    GroupConfigDef("share.delivery.count.limit", INT, "5", f"{_SHARE}.delivery.count.limit", _at_least(2),
                   (f"{_SHARE}.min.delivery.count.limit", f"{_SHARE}.max.delivery.count.limit")),
    GroupConfigDef("share.partition.max.record.locks", INT, "2000", f"{_SHARE}.partition.max.record.locks",
                   _at_least(100),
                   (f"{_SHARE}.min.partition.max.record.locks", f"{_SHARE}.max.partition.max.record.locks")),
    GroupConfigDef("share.auto.offset.reset", STRING, "latest", None, _auto_offset_reset),
    GroupConfigDef("share.isolation.level", STRING, "read_uncommitted", None,
                   one_of("read_uncommitted", "read_committed")),
    GroupConfigDef("share.renew.acknowledge.enable", BOOLEAN, "true", None, _boolean),
    GroupConfigDef("errors.deadletterqueue.topic.name", STRING, "", None, _dlq_topic_name),
    GroupConfigDef("errors.deadletterqueue.copy.record.enable", BOOLEAN, "false", None, _boolean),
]
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in _DEFS}
# Session timeout must stay above the heartbeat interval (Kafka's validateSessionExceedsHeartbeat).
_SESSION_HEARTBEAT = [("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                      ("share.session.timeout.ms", "share.heartbeat.interval.ms")]

BrokerGet = Callable[[str], object]


def validate(name: str, value: str) -> str:
    """Syntax and type of one value (the broker's bounds are checked by `validate_overrides`)."""
    definition = GROUP_CONFIGS.get(name)
    if definition is None:
        raise ValueError(f"Unknown group config name: {name}")
    text = value.strip()
    try:
        if definition.type == INT:
            try:
                int(text)
            except ValueError:
                raise ValueError("Not a number of type INT") from None
        definition.check(text)
    except ValueError as err:
        raise ValueError(f"Invalid value {value} for configuration {name}: {err}") from None
    return text.lower() if definition.type == BOOLEAN else text


def validate_overrides(changed: dict[str, str], overrides: dict[str, str], broker_get: BrokerGet) -> None:
    """Kafka's GroupConfig.validate for a group's overrides after a change: each changed integer config within
    the broker's min/max (`key must be in the range MIN to MAX inclusive.`), and the session timeout above
    the heartbeat interval, taking the broker's value for whichever of the two the group does not set."""
    for name, value in changed.items():
        definition = GROUP_CONFIGS[name]
        if definition.bounds is not None:
            lo, hi = (int(str(broker_get(key))) for key in definition.bounds)
            if not lo <= int(value) <= hi:
                raise ValueError(f"{name} must be in the range {lo} to {hi} inclusive.")
    for session, heartbeat in _SESSION_HEARTBEAT:
        if session in changed or heartbeat in changed:
            s = int(overrides.get(session) or str(broker_get(GROUP_CONFIGS[session].broker_key)))
            h = int(overrides.get(heartbeat) or str(broker_get(GROUP_CONFIGS[heartbeat].broker_key)))
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


def effective(name: str, overrides: dict[str, str], broker_value) -> ConfigEntry:
    """The group's value of `name` and where it comes from: its override (GROUP_CONFIG source), else the broker
    setting it defaults to (static or dynamic), else the default; synonyms list them in that order."""
    definition = GROUP_CONFIGS[name]
    synonyms: list[tuple[str, str | None, int]] = []
    if name in overrides:
        synonyms.append((name, overrides[name], DYNAMIC_GROUP_CONFIG))
    broker = None
    if definition.broker_key is not None:
        value, source = broker_value(definition.broker_key)
        if value is not None and source != DEFAULT_CONFIG:
            broker = ConfigEntry(name, value, source, config_type=definition.type)
            synonyms.append((definition.broker_key, value, source))
        else:
            synonyms.append((definition.broker_key, definition.default, DEFAULT_CONFIG))
    if name in overrides:
        return ConfigEntry(name, overrides[name], DYNAMIC_GROUP_CONFIG, config_type=definition.type,
                           synonyms=tuple(synonyms))
    if broker is not None:
        return ConfigEntry(name, broker.value, broker.source, config_type=definition.type, synonyms=tuple(synonyms))
    return ConfigEntry(name, definition.default, DEFAULT_CONFIG, config_type=definition.type,
                       synonyms=tuple(synonyms))
