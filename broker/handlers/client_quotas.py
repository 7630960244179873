"""DescribeClientQuotas (48) and AlterClientQuotas (49): client quotas in the metadata journal.

Authorization as Kafka: DESCRIBE_CONFIGS, respectively ALTER_CONFIGS, on the CLUSTER resource. Validation and
filters are Kafka's (broker/quotas/store.py); a refused Describe filter is a top-level error with null entries.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.quotas.service import QuotaService
from broker.quotas.store import QuotaRequestError, entity_of
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."
# The order Kafka lists an entity's parts in (its entity map's): client-id, user, ip, then any other type.
_PART_ORDER = {"client-id": 0, "user": 1, "ip": 2}


def _parts(entity) -> list[dict]:
    return [{"entity_type": t, "entity_name": n}
            for t, n in sorted(entity, key=lambda part: (_PART_ORDER.get(part[0], 3), part[0]))]


class ClientQuotaApis(Apis):
    """DescribeClientQuotas and AlterClientQuotas, through the quota service."""

    def __init__(self, quotas: QuotaService) -> None:
        self._quotas = quotas

    async def describe(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                    "error_message": None, "entries": None}  # Kafka's refusal has no message
        try:
            found = self._quotas.store.describe(
                [(c.entity_type, c.match_type, c.match) for c in req.components], req.strict)
        except QuotaRequestError as err:
            return {"throttle_time_ms": 0, "error_code": int(err.code), "error_message": err.message, "entries": None}
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "entries": [
            {"entity": _parts(entity),
             "values": [{"key": k, "value": v} for k, v in values.items()]}
            for entity, values in found]}

    async def alter(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
            code = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            # Kafka's error response: every entry, with its entity as sent
            return {"throttle_time_ms": 0, "entries": [
                {"error_code": code, "error_message": CLUSTER_AUTHORIZATION_FAILED,
                 "entity": _parts((e.entity_type, e.entity_name) for e in entry.entity)}
                for entry in req.entries]}
        entries = [(entity_of((e.entity_type, e.entity_name) for e in entry.entity),
                    [(op.key, None if op.remove else op.value) for op in entry.ops]) for entry in req.entries]
        results = await self._quotas.alter(entries, validate_only=req.validate_only)
        changed = [r.entity for r in results if not r.error]
        if changed and not req.validate_only:
            ctx.log.info("client quotas altered", entities=[dict(e) for e in changed])
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": int(r.error), "error_message": r.message, "entity": _parts(r.entity)} for r in results]}

    HANDLERS = {DESCRIBE_CLIENT_QUOTAS: describe, ALTER_CLIENT_QUOTAS: alter}
