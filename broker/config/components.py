"""Component configs: a component's broker settings as a typed, frozen dataclass built from `BROKER_CONFIGS`.

A component config derives from `ComponentConfig` and declares each field with `setting(key)`: the field's
default is the table's default of that key (a list as a tuple, scaled for a unit change such as minutes to
ms), so no default is written twice. Then

- `X()` holds the defaults, `X(field=...)` overrides some (tests);
- `X.from_config(config)` holds the broker's effective values; from a `BrokerConfig` it is built once per
  change (a dynamic change builds a new one), so a component reading a dynamic setting at use time calls it
  again each time, cheaply;
- `X.from_properties({"kafka.name": "text"})` parses Kafka-named properties as the broker would (tests).

A field that no config sets (a constant of Kafka's) is declared with `fixed(value)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol, Self

from broker.config.broker_config import BrokerConfig
from broker.config.broker_defs import BROKER_CONFIGS
from broker.config.definitions import ConfigError

_SETTING = "shoal.setting"
_FIXED = "shoal.fixed"


class ConfigSource(Protocol):
    """Broker settings by Kafka's names (BrokerConfig, or a test's stand-in)."""

    def get(self, name: str) -> Any: ...


@dataclasses.dataclass(frozen=True)
class Setting:
    """How a field reads its broker config: the key, and a factor for a unit change (the value as typed, times
    `scale`; a list becomes a tuple)."""

    key: str
    scale: int = 1

    def convert(self, value: Any) -> Any:
        if isinstance(value, list):
            return tuple(value)
        if self.scale != 1 and value is not None:
            return value * self.scale
        return value

    @property
    def default(self) -> Any:
        return self.convert(BROKER_CONFIGS[self.key].default)


def setting(key: str, *, scale: int = 1) -> Any:
    """A dataclass field read from the broker config `key`, defaulting to the table's default."""
    spec = Setting(key, scale)
    if key not in BROKER_CONFIGS:
        raise KeyError(f"no broker config {key}")
    return dataclasses.field(default=spec.default, metadata={_SETTING: spec})


def fixed(value: Any) -> Any:
    """A dataclass field no config sets (a constant of Kafka's, overridable by tests)."""
    return dataclasses.field(default=value, metadata={_FIXED: True})


def settings_of(cls: type) -> dict[str, Setting]:
    """Field name -> its Setting, for a component config class."""
    return {f.name: f.metadata[_SETTING] for f in dataclasses.fields(cls) if _SETTING in f.metadata}


def fixed_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if _FIXED in f.metadata]


class ComponentConfig:
    """Base of the component configs (frozen dataclasses whose fields are `setting`s or `fixed`)."""

    @classmethod
    def read(cls, get: Callable[[str], Any]) -> Self:
        """Built from a lookup of typed values by Kafka's names."""
        return cls(**{name: spec.convert(get(spec.key)) for name, spec in settings_of(cls).items()})

    @classmethod
    def from_config(cls, config: ConfigSource) -> Self:
        """The broker's effective values (from a BrokerConfig: cached until its next change)."""
        if isinstance(config, BrokerConfig):
            return config.component(cls)
        return cls.read(config.get)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> Self:
        """Built from Kafka-named properties as text, parsed and checked as the broker does; keys not given
        take the table's default. ConfigError for a key that is not one of this config's."""
        keys = {spec.key for spec in settings_of(cls).values()}
        unknown = sorted(set(props) - keys)
        if unknown:
            raise ConfigError(f"{cls.__name__} reads no config {', '.join(unknown)}")

        def get(key: str) -> Any:
            return BROKER_CONFIGS[key].parse(props[key]) if key in props else BROKER_CONFIGS[key].default

        return cls.read(get)

    def check(self, *names: str) -> None:
        """Check these fields' values with their config's validator (ConfigError in Kafka's words), for a
        config built directly rather than parsed."""
        specs = settings_of(type(self))
        for name in names:
            spec = specs[name]
            definition = BROKER_CONFIGS[spec.key]
            value = getattr(self, name)
            if definition.check is not None and value is not None:
                raw = list(value) if isinstance(value, tuple) else value // spec.scale
                try:
                    definition.check(raw)
                except ValueError as err:
                    raise ConfigError(f"Invalid value {value} for configuration {spec.key}: {err}") from None
