"""Options of the "shoal" data source, parsed and checked when the DataFrame is loaded (DataSource.__init__).

Spark hands options over as a case-insensitive str -> str map; names are matched case-insensitively and reported
with their documented spelling. Unknown names, missing required ones and bad values raise ValueError with a
message that says which option and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from shoal_client.connection import parse_bootstrap

DEFAULT_MAX_BYTES_PER_TRIGGER = 32 << 20
DEFAULT_POLL_TIMEOUT_MS = 500
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
DEFAULT_BATCH_MAX_RECORDS = 10_000
MODES = ("peek", "drain")


def _positive_int(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"option {name!r} must be an integer, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"option {name!r} must be positive, got {value}")
    return value


def _non_negative_int(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"option {name!r} must be an integer, got {text!r}") from None
    if value < 0:
        raise ValueError(f"option {name!r} must be >= 0, got {value}")
    return value


def _topics(name: str, text: str) -> tuple[str, ...]:
    topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    if not topics:
        raise ValueError(f"option {name!r} must name at least one topic (comma-separated)")
    return topics


def _bootstrap(name: str, text: str) -> str:
    try:
        parse_bootstrap(text)
    except ValueError as err:
        raise ValueError(f"option {name!r}: {err}") from None
    return text


def _text(name: str, text: str) -> str:
    if not text.strip():
        raise ValueError(f"option {name!r} must not be empty")
    return text.strip()


def _bool(name: str, text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise ValueError(f"option {name!r} must be true or false, got {text!r}")
    return text.strip().lower() == "true"


def _mode(name: str, text: str) -> str:
    if text.lower() not in MODES:
        raise ValueError(f"option {name!r} must be one of {', '.join(MODES)}, got {text!r}")
    return text.lower()


# documented name -> (parser, required, used by: "both" | "stream" | "batch")
_OPTIONS: dict[str, tuple[Callable[[str, str], object], bool, str]] = {
    "kafka.bootstrap.servers": (_bootstrap, True, "both"),
    "subscribe": (_topics, True, "both"),
    "group.id": (_text, True, "both"),
    "kafka.client.id": (_text, False, "both"),
    "pollTimeoutMs": (_non_negative_int, False, "both"),
    "requestTimeoutMs": (_positive_int, False, "both"),
    "maxRecordsPerTrigger": (_positive_int, False, "stream"),
    "maxBytesPerTrigger": (_positive_int, False, "stream"),
    "lockRenewIntervalMs": (_positive_int, False, "stream"),
    "minPartitions": (_positive_int, False, "stream"),
    "maxPartitions": (_positive_int, False, "stream"),
    "acquireAhead": (_bool, False, "stream"),
    "mode": (_mode, False, "batch"),
    "maxRecords": (_positive_int, False, "batch"),
    "numPartitions": (_positive_int, False, "batch"),
}
_BY_LOWER = {name.lower(): name for name in _OPTIONS}


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    topics: tuple[str, ...]
    group_id: str
    client_id: str = "shoal-spark"
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    max_records_per_trigger: int | None = None
    max_bytes_per_trigger: int = DEFAULT_MAX_BYTES_PER_TRIGGER
    lock_renew_interval_ms: int | None = None  # None: a third of the broker's acquisition lock timeout
    min_partitions: int = 1
    max_partitions: int | None = None
    acquire_ahead: bool = True  # acquire the next micro-batch's records while Spark runs the current one
    mode: str = "peek"
    max_records: int = DEFAULT_BATCH_MAX_RECORDS
    num_partitions: int = 1
    given: frozenset[str] = frozenset()  # documented names of the options that were set

    def check_for(self, kind: str) -> None:
        """Refuse options that only the other kind of read uses ("stream" or "batch")."""
        wrong = sorted(n for n in self.given if _OPTIONS[n][2] not in ("both", kind))
        if wrong:
            other = "batch (spark.read)" if kind == "stream" else "streaming (spark.readStream)"
            raise ValueError(f"option(s) {', '.join(wrong)} only apply to {other} reads of the shoal source")


_FIELDS = {
    "kafka.bootstrap.servers": "bootstrap_servers", "subscribe": "topics", "group.id": "group_id",
    "kafka.client.id": "client_id", "pollTimeoutMs": "poll_timeout_ms", "requestTimeoutMs": "request_timeout_ms",
    "maxRecordsPerTrigger": "max_records_per_trigger", "maxBytesPerTrigger": "max_bytes_per_trigger",
    "lockRenewIntervalMs": "lock_renew_interval_ms", "minPartitions": "min_partitions", "maxPartitions": "max_partitions",
    "acquireAhead": "acquire_ahead", "mode": "mode",
    "maxRecords": "max_records", "numPartitions": "num_partitions",
}


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    values: dict[str, object] = {}
    unknown = []
    given = set()
    for key, text in dict(options).items():
        name = _BY_LOWER.get(key.lower())
        if name is None:
            unknown.append(key)
            continue
        parser = _OPTIONS[name][0]
        values[_FIELDS[name]] = parser(name, str(text))
        given.add(name)
    if unknown:
        raise ValueError(f"unknown option(s) for the shoal source: {', '.join(sorted(unknown))}; known options: "
                         f"{', '.join(_OPTIONS)}")
    missing = [n for n, (_, required, _) in _OPTIONS.items() if required and n not in given]
    if missing:
        raise ValueError(f"the shoal source needs option(s) {', '.join(missing)}")
    low, high = values.get("min_partitions", 1), values.get("max_partitions")
    if high is not None and low > high:  # type: ignore[operator]
        raise ValueError(f"option 'minPartitions' ({low}) must not exceed 'maxPartitions' ({high})")
    return SourceOptions(**values, given=frozenset(given))  # type: ignore[arg-type]
