"""InitProducerId (22): producer ids and epochs for idempotent producers.

Transactions are not served yet, so a transactional id only gets its own producer id and epoch bumps, kept in
memory; the transaction APIs themselves are not advertised.
"""

from __future__ import annotations

from protocol.errors import ErrorCode

INIT_PRODUCER_ID = 22
MAX_EPOCH = 32767


async def handle_init_producer_id(ctx, req) -> dict:
    producers = ctx.broker.producer_ids
    version = ctx.api_version
    if req.transaction_timeout_ms is not None and req.transactional_id is not None and req.transaction_timeout_ms <= 0:
        return {"error_code": int(ErrorCode.INVALID_TRANSACTION_TIMEOUT), "producer_id": -1, "producer_epoch": -1}
    current_id = req.get("producer_id", -1) if version >= 3 else -1
    current_epoch = req.get("producer_epoch", -1) if version >= 3 else -1
    code, pid, epoch = producers.init_producer(req.transactional_id, current_id, current_epoch)
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": pid, "producer_epoch": epoch}


HANDLERS = {INIT_PRODUCER_ID: handle_init_producer_id}
