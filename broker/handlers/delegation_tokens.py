"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40), DescribeDelegationToken (41).

Kafka's broker checks (KafkaApis), then its controller's (DelegationTokenControlManager, here
`broker.security.delegation_tokens`):
- no token request over a connection authenticated with a token, over PLAINTEXT, or over SSL without a client
  certificate (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, Kafka's allowTokenRequests);
- Create: a token for another owner needs CREATE_TOKENS on USER:<owner> (DELEGATION_TOKEN_AUTHORIZATION_FAILED);
  renewers must be User principals (INVALID_PRINCIPAL_TYPE);
- Describe: the requester sees the tokens it owns or may renew, and others with DESCRIBE on the
  DELEGATION_TOKEN resource (the token id) or DESCRIBE_TOKENS on USER:<owner>.
Changes are metadata records, committed to the journal before the answer.
"""

from __future__ import annotations

import asyncio

from broker.config import BrokerConfig
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.security.acl import ANONYMOUS, AclOperation, ResourceType
from broker.security.delegation_tokens import USER_TYPE, TokenInfo, split_principal
from broker.security.manager import SecurityManager
from protocol.errors import ErrorCode

CREATE_DELEGATION_TOKEN = 38
RENEW_DELEGATION_TOKEN = 39
EXPIRE_DELEGATION_TOKEN = 40
DESCRIBE_DELEGATION_TOKEN = 41
ERROR_TIMESTAMP = -1  # Kafka's DelegationTokenManager.ErrorTimestamp


def _create_error(error: ErrorCode, owner: str, requester: str, timestamp: int = ERROR_TIMESTAMP) -> dict:
    owner_type, owner_name = split_principal(owner)
    requester_type, requester_name = split_principal(requester)
    return {"error_code": int(error), "principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp_ms": timestamp, "expiry_timestamp_ms": timestamp, "max_timestamp_ms": timestamp,
            "token_id": "", "hmac": b"", "throttle_time_ms": 0}


def _expiry_answer(error: ErrorCode, expiry: int) -> dict:
    return {"error_code": int(error), "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}


def _described(token: TokenInfo, hmac: bytes) -> dict:
    owner_type, owner_name = split_principal(token.owner)
    requester_type, requester_name = split_principal(token.requester)
    return {"principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp": token.issue_ms, "expiry_timestamp": token.expiry_ms, "max_timestamp": token.max_ms,
            "token_id": token.token_id, "hmac": hmac,
            "renewers": [dict(zip(("principal_type", "principal_name"), split_principal(r), strict=True))
                         for r in token.renewers]}


class DelegationTokenApis(Apis):
    """The delegation token APIs, through the security manager's token store."""

    def __init__(self, security: SecurityManager, config: BrokerConfig) -> None:
        self._security = security
        self._config = config

    def allow_token_requests(self, ctx: RequestContext) -> bool:
        connection = ctx.connection
        protocol = self._config.security_protocol(connection.listener)
        return not (connection.token_authenticated or protocol == "PLAINTEXT"
                    or (protocol == "SSL" and connection.principal == ANONYMOUS))

    async def create(self, ctx: RequestContext, req: Request) -> Response:
        requester = ctx.principal
        owner = requester
        if req.owner_principal_name:  # v3+; null or empty: the requester
            owner = f"{req.owner_principal_type or ''}:{req.owner_principal_name}"
        renewers = [f"{r.principal_type}:{r.principal_name}" for r in req.renewers]
        if not self.allow_token_requests(ctx):
            return _create_error(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
        if owner != requester and not ctx.authorize(AclOperation.CREATE_TOKENS, ResourceType.USER, owner):
            return _create_error(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
        if any(r.principal_type != USER_TYPE for r in req.renewers):
            return _create_error(ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
        security = self._security
        async with security.changes:
            records, created = security.tokens.create(requester, owner, renewers, req.max_lifetime_ms)
            await security.commit(records)
        token = created.token
        if token is None:  # the controller's errors carry zero timestamps (its response data's defaults)
            return _create_error(created.error, owner, requester, timestamp=0)
        # the token's SCRAM credentials (PBKDF2) are derived off the loop before the client can use them
        await asyncio.to_thread(security.tokens.prepare_credentials, [token.token_id])
        ctx.log.info("delegation token created", token_id=token.token_id, owner=owner)
        body = _create_error(ErrorCode.NONE, owner, requester)
        body.update(issue_timestamp_ms=token.issue_ms, expiry_timestamp_ms=token.expiry_ms, max_timestamp_ms=token.max_ms,
                    token_id=token.token_id, hmac=created.hmac)
        return body

    async def renew(self, ctx: RequestContext, req: Request) -> Response:
        if not self.allow_token_requests(ctx):
            return _expiry_answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP)
        security = self._security
        async with security.changes:
            records, error, expiry = security.tokens.renew(ctx.principal, bytes(req.hmac), req.renew_period_ms)
            await security.commit(records)
        return _expiry_answer(error, expiry)

    async def expire(self, ctx: RequestContext, req: Request) -> Response:
        if not self.allow_token_requests(ctx):
            return _expiry_answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP)
        security = self._security
        async with security.changes:
            records, error, expiry = security.tokens.expire(ctx.principal, bytes(req.hmac),
                                                            req.expiry_time_period_ms)
            await security.commit(records)
        return _expiry_answer(error, expiry)

    async def describe(self, ctx: RequestContext, req: Request) -> Response:
        tokens = self._security.tokens
        if not self.allow_token_requests(ctx):
            return {"error_code": int(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED), "tokens": [], "throttle_time_ms": 0}
        if not tokens.enabled:
            return {"error_code": int(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED), "tokens": [], "throttle_time_ms": 0}
        owners = None if req.owners is None else [f"{o.principal_type}:{o.principal_name}"
                                                  for o in req.owners]

        def may_describe(token: TokenInfo) -> bool:
            return (ctx.authorize(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id)
                    or ctx.authorize(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, token.owner))

        found = [] if owners == [] else tokens.describe(ctx.principal, owners, may_describe)
        return {"error_code": 0, "throttle_time_ms": 0,
                "tokens": [_described(token, tokens.hmac(token.token_id)) for token in found]}

    HANDLERS = {CREATE_DELEGATION_TOKEN: create, RENEW_DELEGATION_TOKEN: renew,
                EXPIRE_DELEGATION_TOKEN: expire, DESCRIBE_DELEGATION_TOKEN: describe}
