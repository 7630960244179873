"""Kafka's ConfigDef rules for values given as text (topic and group configs): how each type is parsed, the
validators Kafka's definitions use, and the messages of both, word for word.

`parse(name, type, text)` gives the typed value or raises ConfigValueError; a validator is a callable
`(name, value)` that raises ConfigValueError. The message of a ConfigValueError is what Kafka answers
(INVALID_CONFIG): mostly "Invalid value <v> for configuration <name>: <why>", where <v> is the text as given when
it could not be parsed, else the parsed value as Java prints it (1.0E9, [a, b]).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

INT_RANGE = (-(2**31), 2**31 - 1)
SHORT_RANGE = (-(2**15), 2**15 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)
_BOUNDS = {"int": INT_RANGE, "short": SHORT_RANGE, "long": LONG_RANGE}
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
# Java's Double.parseDouble: decimal (with an optional float/double suffix), NaN, Infinity, hexadecimal floats.
_JAVA_DECIMAL = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_HEX = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")
# Kafka's COMMA_WITH_WHITESPACE, splitting a list value (empty items kept).
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_JAVA_SPACE = " \t\n\x0b\f\r\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19" \
              "\x1a\x1b\x1c\x1d\x1e\x1f"  # what Java's String.trim() removes: every code point up to U+0020


class ConfigValueError(ValueError):
    """A value Kafka refuses; the message is Kafka's."""


def invalid(name: str, value: Any, why: str) -> ConfigValueError:
    """Kafka's ConfigException(name, value, message)."""
    return ConfigValueError(f"Invalid value {java_str(value)} for configuration {name}: {why}")


def java_str(value: Any) -> str:
    """A value as Java's toString prints it (the parsed value in Kafka's messages)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


def java_double(value: float) -> str:
    """Java's Double.toString: plain notation from 10^-3 up to 10^7, else computerized scientific notation,
    always with a fractional part; the shortest digits that round-trip (as Python's repr)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    shortest = Decimal(repr(value))
    if 1e-3 <= abs(value) < 1e7:
        text = format(shortest, "f")
        return text if "." in text else text + ".0"
    sign, digits, exponent = shortest.as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + int(exponent) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def java_trim(text: str) -> str:
    return text.strip(_JAVA_SPACE)


def parse(name: str, type_name: str, text: str) -> Any:
    """Kafka's ConfigDef.parseType for a value given as a string."""
    trimmed = java_trim(text)
    if type_name == "bool":
        if trimmed.lower() == "true":
            return True
        if trimmed.lower() == "false":
            return False
        raise invalid(name, text, "Expected value to be either true or false")
    if type_name in ("string", "class"):
        return trimmed
    if type_name == "password":
        return text
    if type_name in _BOUNDS:
        lo, hi = _BOUNDS[type_name]
        if _JAVA_INTEGER.fullmatch(trimmed) and lo <= int(trimmed) <= hi:
            return int(trimmed)
        raise invalid(name, text, f"Not a number of type {type_name.upper()}")
    if type_name == "double":
        number = parse_java_double(trimmed)
        if number is None:
            raise invalid(name, text, "Not a number of type DOUBLE")
        return number
    if type_name == "list":
        return [] if not trimmed else _LIST_SEPARATOR.split(trimmed)
    raise ValueError(f"unknown config type {type_name}")


def parse_java_double(text: str) -> float | None:
    if _JAVA_DECIMAL.fullmatch(text):
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    match = _JAVA_HEX.fullmatch(text)
    if match:
        value = float.fromhex(match.group(2))
        return -value if match.group(1) == "-" else value
    return None


Validator = Callable[[str, Any], None]


def at_least(lo: int) -> Validator:
    """ConfigDef.Range.atLeast."""
    def check(name: str, value: Any) -> None:
        if value < lo:
            raise invalid(name, value, f"Value must be at least {lo}")

    return check


def between(lo: int, hi: int) -> Validator:
    """ConfigDef.Range.between."""
    def check(name: str, value: Any) -> None:
        if value < lo:
            raise invalid(name, value, f"Value must be at least {lo}")
        if value > hi:
            raise invalid(name, value, f"Value must be no more than {hi}")

    return check


def level_or_default(lo: int, hi: int, default: int) -> Validator:
    """The compression level validators (CompressionType's levels): within [lo, hi] or the codec's default."""
    def check(name: str, value: Any) -> None:
        if value != default and not lo <= value <= hi:
            raise invalid(name, value, f"Value must be between {lo} and {hi} or equal to {default}")

    return check


def one_of(*choices: str) -> Validator:
    """ConfigDef.ValidString.in."""
    def check(name: str, value: Any) -> None:
        if value not in choices:
            raise invalid(name, value, f"String must be one of: {', '.join(choices)}")

    return check


def list_of(*choices: str) -> Validator:
    """ConfigDef.ValidList.in (an empty list allowed): no empty item, each item one of `choices`."""
    def check(name: str, value: Sequence[str]) -> None:
        for item in value:
            if not item:
                raise ConfigValueError(f"Configuration '{name}' values must not be empty.")
        for item in value:
            if item not in choices:
                raise invalid(name, item, f"String must be one of: {', '.join(choices)}")

    return check


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def throttled_replicas(name: str, value: Sequence[str]) -> None:
    """Kafka's ThrottledReplicaListValidator: empty, the literal '*', or partition:broker pairs."""
    if not value or list(value) == ["*"]:
        return
    if all(_REPLICA.fullmatch(item.strip()) for item in value):
        return
    raise invalid(name, list(value), f"{name} must be the literal '*' or a list of replicas in the following "
                                     "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def to_text(value: Any) -> str:
    """Kafka's ConfigDef.convertToString of a parsed value: what DescribeConfigs shows (and what Shoal's
    components read): numbers in decimal (doubles as Java prints them), booleans lower-case, lists joined with
    commas, strings trimmed."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float):
        return java_double(value)
    return str(value)
