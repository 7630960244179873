"""Per-API request metrics, Kafka's RequestMetrics (RequestsPerSec, TotalTimeMs, ErrorsPerSec) as
prometheus-client objects in the broker's own registry.

The router counts every request on the event loop, so the hot path stays small: each API's labelled children
are looked up once, at registration, and kept in an `ApiMetrics`; error children are cached per error code.
Error codes are found by walking the response along the paths that can hold one (from the response schema,
once per version), so arrays without error codes (ApiVersions' keys, replica lists, records) are never visited.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Histogram

from protocol import schema
from protocol.errors import ErrorCode

# Latency histogram bucket upper bounds in seconds (+Inf is added by prometheus-client).
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class ApiMetrics:
    """The children of one API: `requests.inc()`, `latency.observe(s)`, `error(code)`."""

    __slots__ = ("api_key", "name", "requests", "latency", "_errors", "_error_family", "_plans")

    def __init__(self, api_key: int, name: str, requests: Any, latency: Any, error_family: Counter) -> None:
        self.api_key = api_key
        self.name = name
        self.requests = requests
        self.latency = latency
        self._error_family = error_family
        self._errors: dict[int, Any] = {}
        self._plans: dict[int, ErrorPlan | None] = {}

    def count_response_errors(self, body: dict, version: int) -> None:
        try:
            plan = self._plans[version]
        except KeyError:
            plan = self._plans[version] = error_plan(self.api_key, version)
        if plan is not None:
            found: list[int] = []
            _walk(body, plan, found)
            for code in found:
                self.error(code)

    def error(self, code: int, count: int = 1) -> None:
        child = self._errors.get(code)
        if child is None:
            child = self._errors[code] = self._error_family.labels(self.name, error_name(code))
        child.inc(count)


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter("shoal_requests", "Requests received, per API.", ["api"], registry=registry)
        self.errors = Counter(
            "shoal_request_errors",
            "Error codes in responses, per API and error: every non-zero error_code field counts once (as Kafka's "
            "ErrorsPerSec); a handler failure counts as UNKNOWN_SERVER_ERROR.", ["api", "error"], registry=registry)
        self.latency = Histogram("shoal_request_latency_seconds",
                                 "Time from a request's arrival to its response being ready, per API.", ["api"],
                                 buckets=LATENCY_BUCKETS, registry=registry)

    def for_api(self, api_key: int, name: str) -> ApiMetrics:
        return ApiMetrics(api_key, name, self.requests.labels(name), self.latency.labels(name), self.errors)

    def refused(self, name: str, code: int | None) -> None:
        """A request answered or dropped before its handler (unknown API, unsupported version, malformed, too
        large, refused during SASL authentication): counted as a request of its API, with its error if any."""
        self.requests.labels(name).inc()
        if code:
            self.errors.labels(name, error_name(code)).inc()


class ErrorPlan(NamedTuple):
    """Where a struct of one response version can hold error codes: its own error fields, and the struct or
    array-of-struct fields under which some are."""

    keys: tuple[str, ...]
    children: tuple[tuple[str, bool, ErrorPlan], ...]  # (field key, is array, plan)


def error_plan(api_key: int, version: int) -> ErrorPlan | None:
    """The plan for a response version, None if it has no error code field at all."""
    return _plan(schema.response_message(api_key).struct, version)


def _plan(struct: schema.Struct, version: int) -> ErrorPlan | None:
    present = [f for f in struct.fields if f.present(version)]
    keys = tuple(f.key for f in present if f.key.endswith("error_code") and f.struct is None)
    children = []
    for f in present:
        if f.struct is not None and (sub := _plan(f.struct, version)) is not None:
            children.append((f.key, f.is_array, sub))
    return ErrorPlan(keys, tuple(children)) if keys or children else None


def response_errors(body: dict, api_key: int, version: int) -> list[int]:
    """Every non-zero error code in a response body (nested structs and arrays included)."""
    out: list[int] = []
    plan = error_plan(api_key, version)
    if plan is not None:
        _walk(body, plan, out)
    return out


def _walk(obj: dict, plan: ErrorPlan, out: list[int]) -> None:
    keys, children = plan
    for key in keys:
        code = obj.get(key)
        if code:
            out.append(code)
    for key, is_array, sub in children:
        value = obj.get(key)
        if not value:
            continue
        if not is_array:
            if type(value) is dict:
                _walk(value, sub, out)
            continue
        sub_keys, sub_children = sub
        if sub_children:
            for item in value:
                if type(item) is dict:
                    _walk(item, sub, out)
        else:  # the common leaf: partitions with an error code each, read inline (no call per element)
            for item in value:
                if type(item) is dict:
                    for sub_key in sub_keys:
                        code = item.get(sub_key)
                        if code:
                            out.append(code)
