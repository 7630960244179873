"""What a handler sees of the request it serves: the header, the connection, the principal and the authorizer."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from protocol import schema
from protocol.framing import RequestHeader

if TYPE_CHECKING:
    from broker.security.acl import AclOperation, ResourceType

_connection_ids = itertools.count(1)
_log = structlog.get_logger("broker.request")


def _not_muted(_seconds: float) -> None:
    """A connection without a network layer behind it (tests, raw dispatch) cannot be muted."""


@dataclass(slots=True)
class ConnectionInfo:
    """One client connection. `client_software_*` are filled by ApiVersions v3+."""

    peer: str = "?"
    listener: str = "PLAINTEXT"
    local: str = "?"
    id: int = field(default_factory=lambda: next(_connection_ids))
    opened_at: float = field(default_factory=time.time)
    client_software_name: str | None = None
    client_software_version: str | None = None
    host: str = "?"  # the client's address without the port (ACL host matching)
    principal: str = "User:ANONYMOUS"  # Kafka's principal string once authenticated (SASL, TLS client auth)
    token_authenticated: bool = False  # authenticated with a delegation token (may not manage tokens, as Kafka)
    # Stop reading from the connection for this many seconds (a quota throttle, KIP-219); set by the server.
    mute_for: Callable[[float], None] = _not_muted


@dataclass(frozen=True, slots=True)
class Admission:
    """What the broker decided about a request when the network layer dispatched it, before that connection's next
    request is looked at. Kafka's network layer reads one request of a connection at a time, so a quota throttle
    computed for one request always holds back the next; Shoal runs a connection's requests concurrently, so the
    decisions that must hold back what a client pipelines are taken here (`Router.admit`).

    throttle_ms: the throttle the request's bytes earned against producer_byte_rate, recorded at admission (the
        router mutes the connection for it when it answers)
    hold: dispatch nothing more from the connection until this request is answered (a Produce over its byte rate,
        or any request of a client under a request_percentage quota, which is charged once the request has run)
    """

    throttle_ms: int = 0
    hold: bool = False


class Authorizer(Protocol):
    """Kafka's Authorizer as a request sees it (broker.security.manager.SecurityManager): may the connection's
    principal, from its host, do `operation` on the resource? Always yes when no authorizer is configured."""

    def authorize(self, connection: ConnectionInfo, operation: AclOperation, resource_type: ResourceType,
                  name: str, audit: bool = True) -> bool: ...

    def authorize_by_resource_type(self, connection: ConnectionInfo, operation: AclOperation,
                                   resource_type: ResourceType) -> bool: ...


class AllowAll:
    """No authorizer configured (a router without a broker behind it: tests, benchmarks): every check passes."""

    def authorize(self, connection: ConnectionInfo, operation: AclOperation, resource_type: ResourceType,
                  name: str, audit: bool = True) -> bool:
        return True

    def authorize_by_resource_type(self, connection: ConnectionInfo, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        return True


class RequestContext:
    """Per-request context handed to every handler.

    header: the decoded request header (api_key, api_version, correlation_id, client_id)
    api_version: shortcut for header.api_version
    connection: `ConnectionInfo` of the client connection
    principal: the connection's principal (Kafka's principal string, "User:ANONYMOUS" until authenticated)
    authorizer: what `authorize` asks (the broker's SecurityManager)
    log: a structlog logger bound with api, version, correlation id, client id and connection id (lazy)
    received_ns: `time.monotonic_ns()` when the frame was taken off the socket
    throttle_ms: a quota throttle the handler computed (a Fetch over its byte rate, topic mutations over their
        rate); the router answers the largest throttle and mutes the connection for it
    """

    __slots__ = ("header", "api_version", "connection", "authorizer", "received_ns", "throttle_ms", "_log")

    def __init__(self, header: RequestHeader, connection: ConnectionInfo, authorizer: Authorizer,
                 received_ns: int | None = None) -> None:
        self.header = header
        self.api_version = header.api_version
        self.connection = connection
        self.authorizer = authorizer
        self.received_ns = received_ns if received_ns is not None else time.monotonic_ns()
        self.throttle_ms = 0
        self._log = None

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def principal(self) -> str:
        return self.connection.principal

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str, audit: bool = True) -> bool:
        """May this connection's principal do `operation` (broker.security.acl.AclOperation) on the resource?
        Always true when no authorizer is configured. `audit=False` when the answer only filters a listing (as
        Kafka's logIfDenied=false): a denial is then not logged."""
        return self.authorizer.authorize(self.connection, operation, resource_type, name, audit=audit)

    def authorize_by_resource_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Might the principal do `operation` on some resource of this type (Kafka's authorizeByResourceType)?"""
        return self.authorizer.authorize_by_resource_type(self.connection, operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bit field (bit n = AclOperation n) for describe responses."""
        from broker.security.authorizer import supported_operations  # noqa: PLC0415 - keep context import-light

        authorizer = self.authorizer
        ops = [op for op in supported_operations(resource_type)
               if authorizer.authorize(self.connection, op, resource_type, name, audit=False)]
        return sum(1 << int(op) for op in ops)

    @property
    def log(self) -> Any:
        if self._log is None:
            self._log = _log.bind(
                api=_api_name(self.header.api_key),
                api_version=self.header.api_version,
                correlation_id=self.header.correlation_id,
                client_id=self.header.client_id,
                conn=self.connection.id,
                peer=self.connection.peer,
            )
        return self._log


def _api_name(api_key: int) -> str | int:
    spec = schema.api_specs().get(api_key)
    return spec.name if spec is not None else api_key
