"""Group-level configs (KIP-848/KIP-932 GroupConfig): names, validation and the broker settings they default to.

Set with IncrementalAlterConfigs on the GROUP resource (type 32), e.g. `share.auto.offset.reset=earliest`;
a group's effective value is its override, else the broker setting named in `broker_key`, else the default.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from broker.cluster.topic_config import DEFAULT_CONFIG, INT, INT_MAX, STRING, ConfigEntry, int_range, one_of

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


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: int
    default: str
    broker_key: str | None
    check: Callable[[str], None]


_DEFS = [
    GroupConfigDef("consumer.session.timeout.ms", INT, "45000", "group.consumer.session.timeout.ms", int_range(1, INT_MAX)),
    GroupConfigDef("consumer.heartbeat.interval.ms", INT, "5000", "group.consumer.heartbeat.interval.ms",
                   int_range(1, INT_MAX)),
    GroupConfigDef("share.session.timeout.ms", INT, "45000", "group.share.session.timeout.ms", int_range(1, INT_MAX)),
    GroupConfigDef("share.heartbeat.interval.ms", INT, "5000", "group.share.heartbeat.interval.ms", int_range(1, INT_MAX)),
    GroupConfigDef("share.record.lock.duration.ms", INT, "30000", "group.share.record.lock.duration.ms",
                   int_range(1000, INT_MAX)),
    GroupConfigDef("share.auto.offset.reset", STRING, "latest", None, _auto_offset_reset),
    GroupConfigDef("share.isolation.level", STRING, "read_uncommitted", None,
                   one_of("read_uncommitted", "read_committed")),
]
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in _DEFS}


def validate(name: str, value: str) -> str:
    definition = GROUP_CONFIGS.get(name)
    if definition is None:
        raise ValueError(f"Unknown group config name: {name}")
    try:
        definition.check(value.strip())
    except ValueError as err:
        raise ValueError(f"Invalid value {value} for configuration {name}: {err}") from None
    return value.strip()


def effective(name: str, overrides: dict[str, str], broker_value) -> ConfigEntry:
    definition = GROUP_CONFIGS[name]
    if name in overrides:
        return ConfigEntry(name, overrides[name], DYNAMIC_GROUP_CONFIG, config_type=definition.type)
    if definition.broker_key is not None:
        value, source = broker_value(definition.broker_key)
        if value is not None and source != DEFAULT_CONFIG:
            return ConfigEntry(name, value, source, config_type=definition.type)
    return ConfigEntry(name, definition.default, DEFAULT_CONFIG, config_type=definition.type)
