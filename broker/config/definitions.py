"""The one definition dialect of broker, topic and group configs: types, sources, parsing and validators."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# ConfigType codes (DescribeConfigs v3+).
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9
TYPE_CODES = {"bool": BOOLEAN, "string": STRING, "int": INT, "short": SHORT, "long": LONG, "double": DOUBLE,
               "list": LIST, "password": PASSWORD}

# ConfigSource codes (DescribeConfigs).
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
GROUP_CONFIG = 8


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range."""


# --- value parsing ---------------------------------------------------------------------------------------------
def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise ValueError("expected true or false")
    return low == "true"


def parse_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


_PARSERS: dict[str, Callable[[str], Any]] = {
    "bool": _parse_bool,
    "string": lambda s: s.strip(),
    "password": lambda s: s,
    "int": lambda s: int(s.strip()),
    "short": lambda s: int(s.strip()),
    "long": lambda s: int(s.strip()),
    "double": lambda s: float(s.strip()),
    "list": parse_list,
}
_BOUNDS = {"int": (-(2**31), INT_MAX), "short": (-(2**15), 2**15 - 1), "long": (-(2**63), LONG_MAX)}


def at_least(lo: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value < lo:
            raise ValueError(f"value must be at least {lo}")

    return check


def between(lo: int, hi: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not lo <= value <= hi:
            raise ValueError(f"value must be between {lo} and {hi}")

    return check


def one_of(*choices: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        items = value if isinstance(value, list) else [value]
        bad = [v for v in items if v not in choices]
        if bad or not items:
            raise ValueError(f"value must be among {', '.join(choices)}")

    return check


def fraction(value: Any) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError("value must be between 0 and 1")


# --- the table -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # bool, string, int, short, long, double, list, password
    default: Any  # typed default; None = unset (a derived value or "absent")
    check: Callable[[Any], None] | None = None
    dynamic: bool = False  # may be changed with IncrementalAlterConfigs (cluster-wide default)
    doc: str = ""

    @property
    def sensitive(self) -> bool:
        return self.type == "password"

    def parse(self, text: str) -> Any:
        try:
            value = _PARSERS[self.type](str(text))
        except ValueError:
            raise ConfigError(f"Invalid value {text!r} for configuration {self.name}: expected {self.type}") from None
        bounds = _BOUNDS.get(self.type)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise ConfigError(f"Invalid value {text!r} for configuration {self.name}: out of {self.type} range")
        if self.check is not None:
            try:
                self.check(value)
            except ValueError as err:
                raise ConfigError(f"Invalid value {text!r} for configuration {self.name}: {err}") from None
        return value


class ConfigDescription(NamedTuple):
    """One row for DescribeConfigs: the first five fields are the wire's ConfigEntry."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool
    read_only: bool
    config_type: int = 0
    documentation: str | None = None
    synonyms: tuple[tuple[str, str | None, int], ...] = ()


def to_text(value: Any) -> str | None:
    """The string form Kafka shows for a typed value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
