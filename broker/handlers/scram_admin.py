"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM credentials in the metadata journal.

Authorization as Kafka: DESCRIBE, respectively ALTER, on the CLUSTER resource.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.security.manager import SecurityManager
from protocol.errors import ErrorCode

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."


class ScramAdminApis(Apis):
    """DescribeUserScramCredentials and AlterUserScramCredentials, through the credential store."""

    def __init__(self, security: SecurityManager) -> None:
        self._security = security

    async def describe(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            code = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            # Kafka's error response: the top-level error plus one (nameless) result per user asked about.
            return {"error_code": code, "error_message": CLUSTER_AUTHORIZATION_FAILED,
                    "results": [{"user": "", "error_code": code,
                                 "error_message": CLUSTER_AUTHORIZATION_FAILED} for _ in req.users or ()]}
        users = None if req.users is None else [u.name for u in req.users]
        results = self._security.credentials.describe(users)
        # Kafka leaves the messages of what succeeded unset ("")
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "results": [
            {"user": r.user, "error_code": int(r.error), "error_message": r.message if r.error else "",
             "credential_infos": [{"mechanism": m, "iterations": i} for m, i in r.credentials]}
            for r in results]}

    async def alter(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            users = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
            code = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            return {"results": [{"user": u, "error_code": code, "error_message": CLUSTER_AUTHORIZATION_FAILED}
                                for u in users]}
        security = self._security
        async with security.changes:
            records, results = security.credentials.alter(list(req.deletions), list(req.upsertions))
            await security.commit(records)
        if records:
            ctx.log.info("SCRAM credentials altered", users=sorted({r.user for r in results if not r.error}))
        return {"throttle_time_ms": 0, "results": [
            {"user": r.user, "error_code": int(r.error), "error_message": r.message} for r in results]}

    HANDLERS = {DESCRIBE_USER_SCRAM_CREDENTIALS: describe, ALTER_USER_SCRAM_CREDENTIALS: alter}
