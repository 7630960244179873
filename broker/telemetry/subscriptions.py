"""Client-metrics subscriptions: the configs of a CLIENT_METRICS config resource (Kafka's ClientMetricsConfigs).

A subscription is named; its configs are `metrics` (metric name prefixes, `*` for all), `interval.ms` (the push
interval, 100 ms to 1 hour, default 5 minutes) and `match` (`attribute=regex` pairs; a client matches when every
regex fully matches its attribute, and an empty list matches every client).

The regexes are RE2's (broker.linear_regex), not Java's as in Kafka: they are matched against what clients send
(their client id, software name, address) on the event loop, where a backtracking engine would let one client
stall the broker on an unlucky pattern. Lookaround and backreferences are refused as an illegal pattern.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.linear_regex import RegexError, compile_pattern
from protocol.errors import ErrorCode

CLIENT_METRICS_RESOURCE = 16  # ConfigResource.Type.CLIENT_METRICS
METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
NAMES = (METRICS, INTERVAL_MS, MATCH)
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
INT_MAX = 2**31 - 1

# The client attributes a `match` pattern may name (ClientMetricsInstanceMetadata's).
CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
MATCH_PARAMS = frozenset({CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
                          CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT})


class SubscriptionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def parse_list(text: str) -> list[str]:
    """Kafka's LIST config type: comma-separated, items trimmed, an empty text is the empty list."""
    text = text.strip()
    return [] if not text else [item.strip() for item in text.split(",")]


def parse_patterns(patterns: list[str]) -> dict[str, Any]:
    """`attribute=regex` pairs -> compiled regexes (RE2); anything else is INVALID_CONFIG as in Kafka."""
    parsed: dict[str, Any] = {}
    for pattern in patterns:
        # Java's String.split("=") drops trailing empty parts: "a=" and "a=b=c" are both illegal
        parts = pattern.split("=")
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in MATCH_PARAMS:
            raise SubscriptionError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            parsed[parts[0].strip()] = compile_pattern(parts[1].strip())
        except RegexError:
            raise SubscriptionError(ErrorCode.INVALID_CONFIG,
                                    f"Illegal client matching pattern: {pattern}") from None
    return parsed


def validate(name: str, props: dict[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate on a subscription's whole set of configs (after a change)."""
    if not name:
        raise SubscriptionError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in props:
        if key not in NAMES:
            raise SubscriptionError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    if INTERVAL_MS in props:
        interval = _parse_int(props[INTERVAL_MS])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise SubscriptionError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 and 3600000 (1 hour)")
    if MATCH in props:
        parse_patterns(parse_list(props[MATCH]))


def _parse_int(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or not -(2**31) <= value <= INT_MAX:
        raise SubscriptionError(ErrorCode.INVALID_CONFIG,
                                f"Invalid value {text} for configuration {INTERVAL_MS}: Not a number of type INT")
    return value


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: dict[str, Any]  # attribute -> compiled RE2 pattern

    @classmethod
    def from_configs(cls, name: str, props: dict[str, str]) -> Subscription:
        """A validated subscription's configs -> the subscription (defaults for the keys not set)."""
        interval = props.get(INTERVAL_MS)
        return cls(name, tuple(parse_list(props.get(METRICS, ""))),
                   int(interval) if interval is not None else DEFAULT_INTERVAL_MS,
                   parse_patterns(parse_list(props.get(MATCH, ""))))

    def matches(self, attributes: dict[str, str | None]) -> bool:
        """Every pattern fully matches its attribute (an absent attribute matches nothing)."""
        for param, regex in self.match.items():
            value = attributes.get(param)
            if value is None or regex.fullmatch(value) is None:
                return False
        return True
