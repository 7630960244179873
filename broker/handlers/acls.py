"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31) over the ACLs in the metadata journal.

As Kafka: DESCRIBE (DescribeAcls) or ALTER (CreateAcls, DeleteAcls) on the CLUSTER resource, SECURITY_DISABLED
when no authorizer is configured, and a request carrying the UNKNOWN code (0) is malformed: the connection is
closed, as Kafka fails to parse it. A code Kafka does not define is UNKNOWN once parsed, answered as Kafka does.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.router import CloseConnection
from broker.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from broker.security.manager import SecurityManager
from protocol.errors import ErrorCode

DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."
NO_AUTHORIZER = "No Authorizer is configured."


def _codes(resource_type: int, pattern_type: int, operation: int, permission: int, item) -> tuple:
    """The codes as Kafka reads them: UNKNOWN itself (0) fails the request's parsing (the connection is closed); a
    code Kafka does not define reads as UNKNOWN and is answered as such (CreateAcls and DeleteAcls refuse it,
    DescribeAcls matches nothing)."""
    if 0 in (resource_type, pattern_type, operation, permission):
        raise CloseConnection(f"request contains UNKNOWN elements: {dict(item)}")
    return (ResourceType.of(resource_type), PatternType.of(pattern_type), AclOperation.of(operation),
            PermissionType.of(permission))


def _filter(item) -> AclBindingFilter:
    rtype, pattern, op, perm = _codes(item.resource_type_filter, item.pattern_type_filter, item.operation,
                                      item.permission_type, item)
    return AclBindingFilter(rtype, item.resource_name_filter, pattern, item.principal_filter, item.host_filter, op,
                            perm)


def _acl_fields(acl: AclBinding) -> dict:
    return {"principal": acl.principal, "host": acl.host, "operation": int(acl.operation),
            "permission_type": int(acl.permission)}


def _refusal(ctx: RequestContext, security) -> dict | None:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED)
    if not security.enforcing:
        return _error(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    return None


def _error(code: ErrorCode, message: str | None) -> dict:
    return {"error_code": int(code), "error_message": message}


class AclApis(Apis):
    """DescribeAcls, CreateAcls and DeleteAcls, through the authorizer's ACL store."""

    def __init__(self, security: SecurityManager) -> None:
        self._security = security

    async def describe_acls(self, ctx: RequestContext, req: Request) -> Response:
        flt = _filter(req)
        security = self._security
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return {"error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                    "error_message": CLUSTER_AUTHORIZATION_FAILED}
        if not security.enforcing:
            return {"error_code": int(ErrorCode.SECURITY_DISABLED),
                    "error_message": "No Authorizer is configured on the broker"}
        resources: dict[tuple[int, str, int], list[dict]] = {}
        for acl in security.acls.acls(flt):
            key = (int(acl.resource_type), acl.name, int(acl.pattern_type))
            resources.setdefault(key, []).append(_acl_fields(acl))
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in resources.items()]}

    async def create_acls(self, ctx: RequestContext, req: Request) -> Response:
        bindings = []
        for c in req.creations:
            rtype, pattern, op, perm = _codes(c.resource_type, c.resource_pattern_type, c.operation, c.permission_type, c)
            bindings.append(AclBinding(rtype, c.resource_name, pattern, c.principal, c.host, op, perm))
        security = self._security
        failure = _refusal(ctx, security)
        if failure is not None:
            return {"throttle_time_ms": 0, "results": [failure] * len(bindings)}
        async with security.changes:
            try:
                records, results = security.acls.create(bindings)
            except AclError as err:
                return {"throttle_time_ms": 0, "results": [_error(ErrorCode.INVALID_REQUEST, str(err))] * len(bindings)}
            await security.commit(records)
        if records:
            ctx.log.info("ACLs created", count=len(records))
        # Kafka leaves a created ACL's message unset ("")
        return {"throttle_time_ms": 0, "results": [_error(r.error, r.message if r.error else "") for r in results]}

    async def delete_acls(self, ctx: RequestContext, req: Request) -> Response:
        filters = [_filter(f) for f in req.filters]
        security = self._security
        failure = _refusal(ctx, security)
        if failure is not None:
            return {"throttle_time_ms": 0, "filter_results": [failure] * len(filters)}
        async with security.changes:
            try:
                records, results = security.acls.delete(filters)
            except AclError as err:
                failed = _error(ErrorCode.INVALID_REQUEST, str(err))
                return {"throttle_time_ms": 0, "filter_results": [failed] * len(filters)}
            await security.commit(records)
        if records:
            ctx.log.info("ACLs deleted", count=len(records))
        return {"throttle_time_ms": 0, "filter_results": [
            {**_error(r.error, r.message), "matching_acls": [
                {"error_code": 0, "error_message": None, "resource_type": int(acl.resource_type),
                 "resource_name": acl.name, "pattern_type": int(acl.pattern_type), **_acl_fields(acl)}
                for acl in r.deleted]}
            for r in results]}

    HANDLERS = {DESCRIBE_ACLS: describe_acls, CREATE_ACLS: create_acls, DELETE_ACLS: delete_acls}
