"""The SASL state of one connection on a SASL_PLAINTEXT or SASL_SSL listener (Kafka's SaslServerAuthenticator).

Sans-IO: the connection hands every request frame to `receive(frame)` and acts on the returned `SaslStep`
(`None`: an ordinary request for the router). Until the client has authenticated, only these may arrive, in
Kafka's order:
- ApiVersions (answered by the router; one valid request, or retries after UNSUPPORTED_VERSION),
- SaslHandshake: v1 announces SaslAuthenticate requests, v0 raw SASL tokens (4-byte size prefix, no header);
  an unknown mechanism is answered UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes,
- SaslAuthenticate (v0-v2) until the mechanism completes. A failure is answered SASL_AUTHENTICATION_FAILED (with
  the mechanism's own message or Kafka's standard one) and the connection closes.
Anything else before authentication is an illegal SASL state: the connection closes (after an ILLEGAL_SASL_STATE
answer when it arrives in place of SaslAuthenticate, as Kafka).

Session lifetime (KIP-368): with `connections.max.reauth.ms` > 0 the successful SaslAuthenticate carries that
SessionLifetimeMs; the client must re-authenticate (SaslHandshake + SaslAuthenticate on the same connection, same
mechanism and principal, at most once a second) before it ends, or its next request closes the connection. A
session authenticated with a delegation token ends at the token's expiry at the latest, as in Kafka.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import structlog

from broker.security.sasl_errors import SaslAuthenticationError, SaslFailure, standard_failure_message
from protocol.codec import request_codec, response_codec
from protocol.error_responses import error_body
from protocol.errors import DecodeError, ErrorCode
from protocol.framing import decode_request_header, encode_response, response_header_version
from protocol.java_hash import java_hash_order

log = structlog.get_logger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
_API_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")
MIN_REAUTH_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class SaslStep:
    response: bytes | None = None  # bytes to send, in request order (size prefix included)
    dispatch: bool = False  # hand the frame to the router (ApiVersions)
    fail: bool = False  # authentication failed: send `response` after the failed-authentication delay, then close
    close: bool = False  # close at once (after the responses already queued)
    error: int = 0  # the error the request was refused with (request metrics; 0: none or answered fine)
    kafka_request: bool = True  # False for a raw (v0 handshake) token, which is no Kafka request


class SaslAuthenticator:
    def __init__(self, *, listener: str, mechanisms: list[str], new_server: Callable[[str], Any],
                 version_range: Callable[[int], tuple[int, int] | None], reauth_ms: int,
                 clock: Callable[[], float] = time.monotonic, connection: Any = None,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.listener = listener
        self.mechanisms = handshake_order(mechanisms)
        self._new_server = new_server
        self._version_range = version_range
        self._reauth_ms = reauth_ms
        self._clock = clock
        self._wall_ms = wall_ms  # token expiry timestamps are wall-clock milliseconds
        self._connection = connection  # for log lines
        self._state = "versions"  # versions | handshake | authenticate | raw | complete | bad_mechanism | failed
        self._server: Any = None
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.token_authenticated = False  # Kafka's KafkaPrincipal.tokenAuthenticated
        self._expires_at: float | None = None
        self._previous: tuple[str, str] | None = None  # (mechanism, principal) while re-authenticating
        self._last_reauth_start = 0.0
        self._bad_mechanism = ""

    @property
    def authenticated(self) -> bool:
        return self._state == "complete"

    # --- the one entry point -------------------------------------------------------------------------------------
    def receive(self, frame: bytes | memoryview) -> SaslStep | None:
        state = self._state
        if state == "complete":
            return self._authenticated_request(frame)
        if state == "failed":
            return SaslStep(close=True)
        if state == "raw":
            return self._raw_token(bytes(frame))
        if state == "bad_mechanism":
            return self._failed(None, self._bad_mechanism, ErrorCode.ILLEGAL_SASL_STATE)
        try:
            header, offset = decode_request_header(frame)
        except DecodeError as err:
            return replace(self._failed(None, f"first SASL packet is not a Kafka request (GSSAPI is not served): "
                                              f"{err}", ErrorCode.INVALID_REQUEST), kafka_request=False)
        if state == "authenticate":
            return self._authenticate(header, frame, offset)
        if header.api_key == API_VERSIONS:
            if state != "versions":
                self._state = "failed"
                self._log("unexpected ApiVersions request during SASL authentication, closing")
                return SaslStep(close=True, error=ErrorCode.ILLEGAL_SASL_STATE)
            served = self._version_range(API_VERSIONS)
            if served is not None and served[0] <= header.api_version <= served[1]:
                self._state = "handshake"
            return SaslStep(dispatch=True)
        if header.api_key == SASL_HANDSHAKE:
            return self._handshake(header, frame, offset)
        return self._failed(None, f"unexpected Kafka request (api key {header.api_key}) during SASL handshake",
                            ErrorCode.ILLEGAL_SASL_STATE)

    # --- states --------------------------------------------------------------------------------------------------
    def _authenticated_request(self, frame) -> SaslStep | None:
        if len(frame) < 2:
            return None  # the router closes the connection on the malformed header
        now = self._clock()
        if _API_KEY.unpack_from(frame)[0] == SASL_HANDSHAKE and self._expires_at is not None and \
                now - self._last_reauth_start >= MIN_REAUTH_INTERVAL_S:
            self._last_reauth_start = now
            mechanism, principal = self.mechanism, self.principal
            assert mechanism is not None and principal is not None  # set when the session authenticated
            self._previous = (mechanism, principal)
            self._state = "handshake"
            return self.receive(frame)
        if self._expires_at is not None and now > self._expires_at:
            self._log("SASL session expired, closing the connection")
            return SaslStep(close=True)
        return None

    def _handshake(self, header, frame, offset) -> SaslStep:
        version = header.api_version
        served = self._version_range(SASL_HANDSHAKE) or (0, -1)
        if not served[0] <= version <= served[1]:
            return self._failed(None, f"SaslHandshake v{version} is not supported", ErrorCode.UNSUPPORTED_VERSION)
        try:
            request, _ = request_codec(SASL_HANDSHAKE, version).decode_prefix(frame, offset)
        except DecodeError as err:
            return self._failed(None, f"malformed SaslHandshake: {err}", ErrorCode.INVALID_REQUEST)
        mechanism = request.mechanism
        body = {"error_code": 0, "mechanisms": self.mechanisms}
        if mechanism not in self.mechanisms:
            body["error_code"] = int(ErrorCode.UNSUPPORTED_SASL_MECHANISM)
            return self._failed(_response(header, body), f"unsupported SASL mechanism {mechanism!r}",
                                ErrorCode.UNSUPPORTED_SASL_MECHANISM)
        response = _response(header, body)
        if self._previous is not None and mechanism != self._previous[0]:
            self._state = "bad_mechanism"
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self._previous[0]}'")
            return SaslStep(response=response)
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self._state = "authenticate" if version >= 1 else "raw"
        return SaslStep(response=response)

    def _authenticate(self, header, frame, offset) -> SaslStep:
        version = header.api_version
        if header.api_key != SASL_AUTHENTICATE:
            return self._failed(self._illegal_state_answer(header),
                                f"unexpected Kafka request (api key {header.api_key}) during SASL authentication",
                                ErrorCode.ILLEGAL_SASL_STATE)
        served = self._version_range(SASL_AUTHENTICATE) or (0, -1)
        if not served[0] <= version <= served[1]:
            self._state = "failed"
            self._log("unsupported SaslAuthenticate version, closing", api_version=version)
            return SaslStep(close=True, error=ErrorCode.UNSUPPORTED_VERSION)
        try:
            request, _ = request_codec(SASL_AUTHENTICATE, version).decode_prefix(frame, offset)
        except DecodeError as err:
            return self._failed(None, f"malformed SaslAuthenticate: {err}", ErrorCode.INVALID_REQUEST)
        try:
            token = self._evaluate(bytes(request.auth_bytes))
        except SaslAuthenticationError as err:
            body = {"error_code": int(ErrorCode.SASL_AUTHENTICATION_FAILED), "error_message": str(err)}
            return self._failed(_response(header, body), str(err), ErrorCode.SASL_AUTHENTICATION_FAILED)
        except SaslFailure as err:
            message = standard_failure_message(self.mechanism or "?", self._previous is not None)
            body = {"error_code": int(ErrorCode.SASL_AUTHENTICATION_FAILED), "error_message": message}
            return self._failed(_response(header, body), str(err), ErrorCode.SASL_AUTHENTICATION_FAILED)
        lifetime = self._finish() if self._server.complete else 0
        # Kafka leaves a successful step's message unset ("")
        return SaslStep(response=_response(header, {"error_code": 0, "error_message": "", "auth_bytes": token,
                                                    "session_lifetime_ms": lifetime}))

    def _raw_token(self, token: bytes) -> SaslStep:
        try:
            answer = self._evaluate(token)
        except (SaslAuthenticationError, SaslFailure) as err:
            return replace(self._failed(None, str(err), ErrorCode.SASL_AUTHENTICATION_FAILED), kafka_request=False)
        if self._server.complete:
            self._finish()
        return SaslStep(response=_SIZE.pack(len(answer)) + answer, kafka_request=False)

    # --- helpers -------------------------------------------------------------------------------------------------
    def _evaluate(self, token: bytes) -> bytes:
        answer = self._server.evaluate(token)
        if self._server.complete and self._previous is not None:
            principal = f"User:{self._server.authorization_id}"
            if principal != self._previous[1]:
                old = self._previous[1].replace(":", ".", 1)
                raise SaslAuthenticationError(f"Cannot change principals during re-authentication from {old}: "
                                              f"{principal.replace(':', '.', 1)}")
        return answer

    def _finish(self) -> int:
        """Authentication complete: the principal, and the session lifetime in ms (0: none)."""
        server = self._server
        self.principal = f"User:{server.authorization_id}"
        self.token_authenticated = server.token_authenticated
        self._state = "complete"
        reauthenticated = self._previous is not None
        self._previous = None
        self._server = None
        lifetime = max(0, self._reauth_ms)
        expiry_ms = server.credential_expiry_ms
        if expiry_ms is not None:  # Kafka: the lesser of the token's remaining life and connections.max.reauth.ms
            left = max(0, expiry_ms - self._wall_ms())
            lifetime = min(left, lifetime) if lifetime else left
        self._expires_at = self._clock() + lifetime / 1000 if lifetime or expiry_ms is not None else None
        self._log("re-authenticated" if reauthenticated else "authenticated", principal=self.principal,
                  mechanism=self.mechanism, session_lifetime_ms=lifetime)
        return lifetime

    def _failed(self, response: bytes | None, reason: str, error: ErrorCode) -> SaslStep:
        self._state = "failed"
        self._server = None
        self._log("SASL authentication failed", reason=reason, mechanism=self.mechanism)
        return SaslStep(response=response, fail=True, error=error)

    def _illegal_state_answer(self, header) -> bytes | None:
        """Kafka answers a request that arrives in place of SaslAuthenticate with that request's error response
        (ILLEGAL_SASL_STATE), where the response has a top-level error code."""
        served = self._version_range(header.api_key)
        if served is None or not served[0] <= header.api_version <= served[1]:
            return None
        body = error_body(header.api_key, header.api_version, ErrorCode.ILLEGAL_SASL_STATE)
        if body is None:
            return None
        return encode_response(header.correlation_id, response_header_version(header.api_key, header.api_version),
                               body)

    def _log(self, event: str, **kw) -> None:
        conn = self._connection
        log.info(event, listener=self.listener, conn=getattr(conn, "id", None), peer=getattr(conn, "peer", None),
                 **kw)


def handshake_order(mechanisms: list[str]) -> list[str]:
    """sasl.enabled.mechanisms in the order Kafka's SaslHandshake answers list them: its SaslServerAuthenticator
    copies them through a java.util.HashSet, so they come in that set's iteration order (by hash bucket, then
    insertion), not in the configured order."""
    unique = list(dict.fromkeys(mechanisms))
    buckets = 16  # HashSet(Collection): capacity max(n / .75 + 1, 16), rounded up to a power of two
    while buckets < max(int(len(unique) / 0.75) + 1, 16):
        buckets *= 2
    return java_hash_order(unique, initial_capacity=buckets)


def _response(header, body: dict) -> bytes:
    encoded = response_codec(header.api_key, header.api_version).encode(body)
    return encode_response(header.correlation_id, response_header_version(header.api_key, header.api_version), encoded)
