"""The one definition dialect of broker, topic and group configs: types, sources, parsing and validators."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from broker.config import kafka_values

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# ConfigType codes (DescribeConfigs v3+).
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9
TYPE_CODES = {"bool": BOOLEAN, "string": STRING, "int": INT, "short": SHORT, "long": LONG, "double": DOUBLE,
              "list": LIST, "class": CLASS, "password": PASSWORD}

# ConfigSource codes (DescribeConfigs).
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
GROUP_CONFIG = 8


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range."""


# --- broker values: parsing and validators (they see typed values) ------------------------------------------
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
    "class": lambda s: s.strip(),
    "password": lambda s: s,
    "int": lambda s: int(s.strip()),
    "short": lambda s: int(s.strip()),
    "long": lambda s: int(s.strip()),
    "double": lambda s: float(s.strip()),
    "list": parse_list,
}


def at_least(lo: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value < lo:
            raise ValueError(f"Value must be at least {lo}")

    return check


def between(lo: int, hi: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not lo <= value <= hi:
            raise ValueError(f"Value must be at least {lo}" if value < lo else f"Value must be no more than {hi}")

    return check


def one_of(*choices: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        items = value if isinstance(value, list) else [value]
        bad = [v for v in items if v not in choices]
        if bad or not items:
            raise ValueError(f"String must be one of: {', '.join(choices)}")

    return check


def fraction(value: Any) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError("Value must be at least 0" if value < 0 else "Value must be no more than 1")


# --- the definition --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigDef:
    """One config of any scope (broker, topic, group), as Kafka's ConfigDef.define.

    Broker configs are typed when loaded (`parse` and `check`, ConfigError). Topic and group configs keep the
    text they were given, as Kafka stores it (`validate`: Kafka's parsing and `validator`, ConfigValueError in
    Kafka's words), and are described as Kafka prints their parsed value (`canonical`); their `default` is text
    too, and `synonym` names the broker setting they default to.
    """

    name: str
    type: str  # bool, string, int, short, long, double, list, class, password
    default: Any  # None = unset (a derived value or "absent")
    check: Callable[[Any], object] | None = None  # raises ValueError; a parser may double as one (result unused)
    dynamic: bool = False  # may be changed with IncrementalAlterConfigs (cluster-wide default)
    doc: str = ""
    synonym: str | None = None  # the broker setting a topic or group config defaults to
    internal: bool = False  # Kafka's defineInternal: settable, never listed by DescribeConfigs unless set
    # Broker configs holding a group config's allowed range (Kafka's GroupConfig.validateIntRange).
    bounds: tuple[str, str] | None = None
    validator: Callable[[str, Any], None] | None = None  # a topic or group config's (kafka_values validators)

    @property
    def sensitive(self) -> bool:
        return self.type == "password"

    @property
    def type_code(self) -> int:
        return TYPE_CODES[self.type]

    def parse(self, text: str) -> Any:
        """A broker value from its text: numbers and booleans as Kafka's ConfigDef parses them, lists without
        their empty items; ConfigError in Kafka's words."""
        try:
            if self.type in _KAFKA_PARSED:
                value = kafka_values.parse(self.name, self.type, str(text))
            else:
                value = _PARSERS[self.type](str(text))
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if self.check is not None:
            try:
                self.check(value)
            except ValueError as err:
                raise ConfigError(f"Invalid value {kafka_values.java_str(value)} for configuration {self.name}: "
                                  f"{err}") from None
        return value

    def validate(self, text: str) -> str:
        """A topic or group value as Kafka checks it (ConfigValueError with Kafka's message); the text to keep,
        as given."""
        parsed = kafka_values.parse(self.name, self.type, text)
        if self.validator is not None:
            self.validator(self.name, parsed)
        return text

    def canonical(self, text: str | None) -> str | None:
        """A valid topic or group value as Kafka describes it (its parsed value converted back to text)."""
        if text is None:
            return None
        return kafka_values.to_text(kafka_values.parse(self.name, self.type, text))


_KAFKA_PARSED = frozenset({"bool", "int", "short", "long", "double"})


# --- topic and group values: validators in Kafka's ConfigDef wording (they see the text) ---------------------
def int_range(lo: int, hi: int | None = None) -> Callable[[str], None]:
    """Kafka's ConfigDef.Range (atLeast without `hi`, between with it) with its messages."""
    def check(value: str) -> None:
        number = int(value)
        if number < lo:
            raise ValueError(f"Value must be at least {lo}")
        if hi is not None and number > hi:
            raise ValueError(f"Value must be no more than {hi}")

    return check


def in_values(*choices: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in choices:
            raise ValueError(f"String must be one of: {', '.join(choices)}")

    return check


class ConfigDescription(NamedTuple):
    """One row for DescribeConfigs (any scope): the first five fields are the wire's ConfigEntry."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool = False
    read_only: bool = False
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
    if isinstance(value, float):
        return kafka_values.java_double(value)
    return str(value)
