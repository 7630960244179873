"""Api key -> handler dispatch: header decode, version checks, body codecs, error responses, metrics.

`Router.handle(frame, connection)` turns one request frame (size prefix excluded) into the response frame
(size prefix included), or None when the request gets no response (Produce acks=0). It raises
`CloseConnection` when Kafka would close the connection: unknown api key, unsupported version (other than
ApiVersions), malformed header or body, or a handler failure with no error field to report it in.
`Router.admit(frame, connection)` runs first, when the network layer dispatches the frame: the quota decisions
that must be taken before the connection's next request is dispatched.
"""

from __future__ import annotations

import asyncio
import inspect
import struct
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import CollectorRegistry

from broker.context import Admission, Authorizer, ConnectionInfo, RequestContext
from broker.metrics.requests import ApiMetrics, RequestMetrics
from broker.pacing import heavy
from broker.quotas.request_time import Timed
from protocol import schema
from protocol.codec import Codec, request_codec, response_codec
from protocol.error_responses import error_body
from protocol.errors import DecodeError, ErrorCode
from protocol.framing import (
    decode_request_header,
    encode_response,
    encode_response_chunks,
    response_header_version,
)

if TYPE_CHECKING:
    from broker.quotas.service import QuotaService

log = structlog.get_logger(__name__)

API_VERSIONS = 18
_API_KEY = struct.Struct(">h")
# APIs whose responses can be large (up to the request's MaxBytes): a connection runs one of them at a time, as
# real clients send them (one fetch per broker connection), so a client that never reads holds one response.
LARGE_RESPONSE_APIS = frozenset({1, 78})  # Fetch, ShareFetch
# an `async def` (quota accounting steps its coroutine: broker/quotas/request_time.py)
Handler = Callable[[RequestContext, Any], Coroutine[Any, Any, Any]]


class CloseConnection(Exception):
    """The connection must be closed (after the responses queued before this request, and `response` if given)."""

    def __init__(self, message: str = "", response: bytes | None = None) -> None:
        super().__init__(message)
        self.response = response


@dataclass(frozen=True)
class Registration:
    api_key: int
    name: str
    handler: Handler
    min_version: int
    max_version: int
    advertised_min: int | None = None  # the minimum ApiVersions lists, when below min_version (KAFKA-18659)


class Router:
    def __init__(self, registry: CollectorRegistry | None = None, *, authorizer: Authorizer | None = None) -> None:
        self._routes: dict[int, Registration] = {}
        self._ceilings: dict[int, int] = {}  # api key -> the highest version a feature change may serve
        # Per-API metrics in the broker's registry (a private one when none is given: tests, benchmarks).
        self.request_metrics = RequestMetrics(registry if registry is not None else CollectorRegistry())
        self.metrics: dict[int, ApiMetrics] = {}
        self._api_versions_fallback: bytes | None = None
        self.quotas: QuotaService | None = None  # set by the broker once built: throttles every response
        # set by the broker once built (its SecurityManager); requests are dispatched only once it is
        self.authorizer: Authorizer | None = authorizer

    # --- registration --------------------------------------------------------------------------------------
    def register(self, api_key: int, handler: Handler, min_version: int | None = None,
                 max_version: int | None = None, *, ceiling: int | None = None,
                 advertised_min: int | None = None) -> None:
        """Serve api_key with `async handler(ctx, request) -> dict | None`, for versions within the schema's
        range narrowed by min_version/max_version; `ceiling` (default: the schema's maximum) is the highest version
        set_max_version may serve later. `advertised_min`: a lower minimum for ApiVersions to list than the one
        served (requests below the served one still close the connection)."""
        spec = schema.api_specs().get(api_key)
        if spec is None:
            raise ValueError(f"no request/response schema for api key {api_key}")
        if not inspect.iscoroutinefunction(handler):
            raise TypeError(f"handler for {spec.name} must be an async function")
        lo = spec.min_version if min_version is None else max(min_version, spec.min_version)
        hi = spec.max_version if max_version is None else min(max_version, spec.max_version)
        if lo > hi:
            raise ValueError(f"{spec.name}: empty version range {lo}-{hi} (schema {spec.min_version}-{spec.max_version})")
        if api_key in self._routes:
            raise ValueError(f"{spec.name} is already registered")
        self._routes[api_key] = Registration(api_key, spec.name, handler, lo, hi, advertised_min)
        self._ceilings[api_key] = spec.max_version if ceiling is None else min(max(ceiling, hi), spec.max_version)
        self.metrics.setdefault(api_key, self.request_metrics.for_api(api_key, spec.name))
        self._api_versions_fallback = None

    def set_max_version(self, api_key: int, max_version: int | None) -> None:
        """Serve a registered API up to `max_version` (None: its ceiling, the versions its module serves) from
        now on: a finalized feature changed (UpdateFeatures of transaction.version)."""
        reg = self._routes[api_key]
        ceiling = self._ceilings[api_key]
        hi = ceiling if max_version is None else min(max_version, ceiling)
        self._routes[api_key] = Registration(reg.api_key, reg.name, reg.handler, reg.min_version, hi,
                                             reg.advertised_min)
        self._api_versions_fallback = None

    def registrations(self) -> list[Registration]:
        return [self._routes[k] for k in sorted(self._routes)]

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        reg = self._routes.get(api_key)
        return None if reg is None else (reg.min_version, reg.max_version)

    def api_keys(self) -> list[dict]:
        """The ApiKeys array of an ApiVersions response."""
        return [{"api_key": r.api_key, "max_version": r.max_version,
                 "min_version": r.min_version if r.advertised_min is None else min(r.advertised_min, r.min_version)}
                for r in self.registrations()]

    def api_name(self, api_key: int, unknown: str | None = None) -> str:
        """The API's name; for a key no schema knows, `unknown` (default: "api<key>")."""
        reg = self._routes.get(api_key)
        if reg is not None:
            return reg.name
        spec = schema.api_specs().get(api_key)
        if spec is not None:
            return spec.name
        return f"api{api_key}" if unknown is None else unknown

    def metrics_name(self, api_key: int | None) -> str:
        """The `api` label of a request: its API's name, or "unknown" for a key no schema knows (one label for all
        of them, so garbage cannot grow the label set)."""
        return "unknown" if api_key is None else self.api_name(api_key, "unknown")

    def count_refused(self, api_key: int | None, code: ErrorCode | None) -> None:
        """Count a request that never reached its handler (here, or in the connection: too large, SASL)."""
        self.request_metrics.refused(self.metrics_name(api_key), code)

    # --- dispatch ------------------------------------------------------------------------------------------
    def admit(self, frame: bytes | bytearray | memoryview, connection: ConnectionInfo) -> Admission | None:
        """Called by the network layer as it dispatches `frame`, before it looks at the connection's next one: the
        quota decisions that must hold back what the client pipelines (`QuotaService.admit`). None while no
        producer or request quota exists (or the header is malformed: `handle` closes the connection)."""
        quotas = self.quotas
        if quotas is None or not quotas.admitting:
            return None
        try:
            header, _ = decode_request_header(frame)
        except DecodeError:
            return None
        return quotas.admit(header.api_key, header.client_id, connection, len(frame))

    async def handle(self, frame: bytes | bytearray | memoryview, connection: ConnectionInfo,
                     admitted: Admission | None = None) -> bytes | list[bytes | bytearray | memoryview] | None:
        received = time.monotonic_ns()
        try:
            header, offset = decode_request_header(frame)
        except DecodeError as err:
            log.warning("malformed request header, closing connection", conn=connection.id, peer=connection.peer,
                        error=str(err))
            self.count_refused(_API_KEY.unpack_from(frame)[0] if len(frame) >= 2 else None,
                               ErrorCode.INVALID_REQUEST)
            raise CloseConnection(str(err)) from None
        reg = self._routes.get(header.api_key)
        if reg is None:
            log.warning("unknown api key, closing connection", conn=connection.id, peer=connection.peer,
                        api_key=header.api_key, api_version=header.api_version, client_id=header.client_id)
            self.count_refused(header.api_key, ErrorCode.INVALID_REQUEST)  # Kafka: InvalidRequestException
            raise CloseConnection(f"unknown api key {header.api_key}")
        version = header.api_version
        if not reg.min_version <= version <= reg.max_version:
            metrics = self.metrics[header.api_key]
            metrics.requests.inc()
            metrics.error(ErrorCode.UNSUPPORTED_VERSION)
            if header.api_key == API_VERSIONS:
                # KIP-511: answer in the v0 layout with UNSUPPORTED_VERSION and the ApiVersions versions we
                # serve, so the client can retry with one of them.
                log.info("unsupported ApiVersions version, answering v0 with UNSUPPORTED_VERSION",
                         conn=connection.id, api_version=version, client_id=header.client_id)
                metrics.latency.observe((time.monotonic_ns() - received) / 1e9)
                return encode_response(header.correlation_id, 0, self.unsupported_api_versions_body())
            log.warning("unsupported api version, closing connection", conn=connection.id, peer=connection.peer,
                        api=reg.name, api_version=version, supported=f"{reg.min_version}-{reg.max_version}",
                        client_id=header.client_id)
            raise CloseConnection(f"{reg.name} v{version} is not supported")
        try:
            # Like Kafka, ignore bytes after the body: librdkafka 2.16's Metadata v13 (AdminClient list_topics)
            # carries three of them.
            request, end = request_codec(header.api_key, version).decode_prefix(frame, offset)
        except DecodeError as err:
            log.warning("malformed request body, closing connection", conn=connection.id, peer=connection.peer,
                        api=reg.name, api_version=version, correlation_id=header.correlation_id, error=str(err))
            self.count_refused(header.api_key, ErrorCode.INVALID_REQUEST)
            raise CloseConnection(str(err)) from None

        if end != len(frame):
            log.debug("trailing bytes after request body ignored", conn=connection.id, api=reg.name,
                      api_version=version, correlation_id=header.correlation_id, trailing=len(frame) - end)
        metrics = self.metrics[header.api_key]
        metrics.requests.inc()
        authorizer = self.authorizer
        if authorizer is None:
            raise CloseConnection("no authorizer: the router is not wired yet")
        ctx = RequestContext(header, connection, authorizer, received)
        quotas = self.quotas
        # the loop time the request takes, charged to its request quota (broker/quotas/request_time.py)
        timed = Timed(reg.handler(ctx, request)) if quotas is not None and quotas.request_time_counted(
            header.api_key) else None
        body: bytes | bytearray | memoryview
        try:
            if timed is None:
                result = await reg.handler(ctx, request)
            else:
                timed.busy_ns += time.monotonic_ns() - received  # the header and body decode
                result = await timed
            if quotas is not None:
                throttle_ms = quotas.throttle(ctx, len(frame), None if timed is None else timed.busy_ns, admitted)
                if throttle_ms > 0:
                    if type(result) is dict:
                        result["throttle_time_ms"] = throttle_ms
                    connection.mute_for(throttle_ms / 1000)
            if result is None:
                return None
            if type(result) is dict:
                codec = response_codec(header.api_key, version)
                if header.api_key in LARGE_RESPONSE_APIS:
                    metrics.count_response_errors(result, version)
                    # records stay the buffers the log read gave (no copy into one frame): a vectored write
                    return encode_response_chunks(header.correlation_id,
                                                  response_header_version(header.api_key, version),
                                                  codec.encode_chunks(result))
                if heavy(result):
                    # Thousands of entries (groups, members, topics, partitions): encoding them would hold the
                    # loop for as long as it takes; a worker thread does it while the loop serves the others.
                    body = await asyncio.to_thread(_count_and_encode, metrics, codec, result, version)
                else:
                    metrics.count_response_errors(result, version)
                    body = codec.encode(result)
            else:
                body = result if isinstance(result, bytes | bytearray | memoryview) else \
                    response_codec(header.api_key, version).encode(result)
        except CloseConnection:
            raise  # the handler's answer (Produce acks=0 with an error): it logged why, nothing failed
        except Exception as err:  # noqa: BLE001 - a handler failure must not escape the connection
            metrics.error(ErrorCode.UNKNOWN_SERVER_ERROR)
            ctx.log.error("request handler failed", exc_info=err)
            error = error_body(header.api_key, version)
            if error is None:
                raise CloseConnection(f"{reg.name} handler failed: {err!r}") from None
            body = error
        finally:
            metrics.latency.observe((time.monotonic_ns() - received) / 1e9)
        return encode_response(header.correlation_id, response_header_version(header.api_key, version), body)

    # --- error bodies --------------------------------------------------------------------------------------
    def unsupported_api_versions_body(self) -> bytes:
        """The v0 answer to an ApiVersions version we do not serve: UNSUPPORTED_VERSION with ApiVersions' own
        versions only, as Kafka's ApiVersionsRequest.getErrorResponse (the client retries with one of them)."""
        if self._api_versions_fallback is None:
            own = [k for k in self.api_keys() if k["api_key"] == API_VERSIONS]
            self._api_versions_fallback = response_codec(API_VERSIONS, 0).encode(
                {"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "api_keys": own})
        return self._api_versions_fallback



def _count_and_encode(metrics: ApiMetrics, codec: Codec, result: dict, version: int) -> bytes:
    """Off the loop: the response is the request's own (built for it, shared with no state the loop changes)."""
    metrics.count_response_errors(result, version)
    return codec.encode(result)
