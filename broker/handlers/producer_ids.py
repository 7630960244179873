"""InitProducerId (22): producer ids and epochs for idempotent producers.

Transactions are not served yet, so a transactional id only gets its own producer id and epoch bumps, kept in
memory; the transaction APIs themselves are not advertised.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

INIT_PRODUCER_ID = 22
MAX_EPOCH = 32767


async def handle_init_producer_id(ctx: RequestContext, req) -> dict:
    producers = ctx.broker.producer_ids
    version = ctx.api_version
    if req.transaction_timeout_ms is not None and req.transactional_id is not None and req.transaction_timeout_ms <= 0:
        return {"error_code": int(ErrorCode.INVALID_TRANSACTION_TIMEOUT), "producer_id": -1, "producer_epoch": -1}
    # As Kafka: WRITE on the transactional id, else IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    if req.transactional_id is not None:
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) and \
            not ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    current_id = req.get("producer_id", -1) if version >= 3 else -1
    current_epoch = req.get("producer_epoch", -1) if version >= 3 else -1
    code, pid, epoch = await producers.init_producer(req.transactional_id, current_id, current_epoch)
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": pid, "producer_epoch": epoch}


def _refused(code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": -1, "producer_epoch": -1}


HANDLERS = {INIT_PRODUCER_ID: handle_init_producer_id}
