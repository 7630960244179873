"""SaslHandshake (17) and SaslAuthenticate (36) outside an authentication exchange.

On a SASL listener the connection's authenticator (broker.security.sasl) answers these while the client
authenticates or re-authenticates; what reaches the router is a handshake on a listener without SASL or after
authentication, which Kafka answers with ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from protocol.errors import ErrorCode

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


class SaslApis(Apis):
    """SaslHandshake and SaslAuthenticate once the connection is authenticated (or on a listener without
    SASL)."""

    async def sasl_handshake(self, ctx: RequestContext, req: Request) -> Response:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}

    async def sasl_authenticate(self, ctx: RequestContext, req: Request) -> Response:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE),
                "error_message": "SaslAuthenticate request received after successful authentication",
                "auth_bytes": b"", "session_lifetime_ms": 0}

    HANDLERS = {SASL_HANDSHAKE: sasl_handshake, SASL_AUTHENTICATE: sasl_authenticate}
