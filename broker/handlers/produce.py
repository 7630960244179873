"""Produce (api key 0): validate and append one batch per partition; acks=-1 waits for the fsync.

A transactional produce (TransactionalId set) needs WRITE on the transactional id (transactional records
without one are TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka); with a transaction verifier
(KIP-890) the partitions where a batch would start a transaction are verified with the coordinator, inside the
request's produce turn so pipelined batches keep their order. From v12 (transaction.version 2, KIP-890 part 2) the
coordinator adds those partitions to the transaction instead: a TV2 client sends no AddPartitionsToTxn.
v13 (KIP-516) names topics by TopicId: an id the registry does not know is answered UNKNOWN_TOPIC_ID, as Kafka's
KafkaApis.handleProduceRequest does for an id its metadata cannot resolve, and the response carries the id."""

from __future__ import annotations

import uuid

from broker.context import RequestContext
from broker.replica_manager import ProduceResult, idempotent_keys, storage_error, transactional_batches
from broker.router import CloseConnection
from broker.security.acl import AclOperation, ResourceType
from protocol import records as rec
from protocol.errors import ErrorCode

PRODUCE = 0
ZERO_UUID = uuid.UUID(int=0)


def _has_transactional_records(topic_data) -> bool:
    """Whether a partition's first batch is transactional (as Kafka's ProduceRequest looks: one header each)."""
    for topic in topic_data:
        for part in topic.partition_data:
            if part.records is not None and len(part.records) >= rec.HEADER_SIZE:
                header = rec.read_header(part.records)
                if header.magic == rec.MAGIC and header.is_transactional:
                    return True
    return False


def _partition_response(index: int, result: ProduceResult) -> dict:
    return {
        "index": index,
        "error_code": int(result.error),
        "base_offset": result.base_offset,
        "log_append_time_ms": result.log_append_time,
        "log_start_offset": result.log_start_offset,
        "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in result.record_errors],
        "error_message": result.error_message,
    }


async def handle_produce(ctx: RequestContext, req) -> dict | None:
    broker = ctx.broker
    acks = req.acks
    responses: list = []
    if acks not in (-1, 0, 1):
        error = ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)
        for topic in req.topic_data:
            responses.append(
                {
                    "name": topic.get("name"),
                    "topic_id": topic.get("topic_id", ZERO_UUID),
                    "partition_responses": [_partition_response(p.index, error) for p in topic.partition_data],
                }
            )
        return {"responses": responses, "throttle_time_ms": 0}
    error = None
    if req.transactional_id is not None and not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                               req.transactional_id):
        error = ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif req.transactional_id is None and _has_transactional_records(req.topic_data):
        # Kafka's KafkaApis: transactional records need a transactional id it may authorize, so none at all is
        # refused the same way, for the whole request
        error = ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    # Idempotent batches need their partitions' producer state; the first produce after a start loads it from
    # the log in worker threads, and requests arriving meanwhile queue behind this one (in arrival order).
    # (Only partitions this principal may write: the real, audited check is in _append_all.)
    turn = None
    txn_batches: list = []
    if error is None:
        keys = [k for k in idempotent_keys(req.topic_data, broker.topics.registry)
                if ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, k[0], audit=False)]
        if broker.replicas.txn_verifier is not None:
            txn_batches = [(k, h) for k, h in transactional_batches(req.topic_data, broker.topics.registry)
                           if ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, k[0], audit=False)]
        turn = broker.replicas.produce_turn(keys, force=[k for k, _h in txn_batches])
    try:
        if turn is not None:
            await turn.wait()
        # Produce v12 (transaction.version 2): the partitions are added to the transaction here, on the
        # producer's behalf (Kafka's `addPartition` operation); before, only verified.
        verified = await broker.replicas.verify_transactional(
            req.transactional_id, txn_batches, add=ctx.api_version >= 12,
            abortable=ctx.api_version >= 11) if txn_batches else None
        responses, written = _append_all(ctx, req, error, verified)
    finally:
        if turn is not None:
            turn.done()
    if acks == -1:
        # A partition whose flush failed is answered KAFKA_STORAGE_ERROR, never success (its log directory is
        # offline: nothing appended before the failure is confirmed by a later flush).
        failed = await broker.replicas.not_durable(plog for _i, _parts, plog in written)
        for i, parts, plog in written:
            if id(plog) in failed:
                parts[i] = _partition_response(parts[i]["index"], storage_error())
    if acks == 0:
        failed = [p for t in responses for p in t["partition_responses"] if p["error_code"]]
        if failed:
            # The client reads no response for acks=0, so, as Kafka does, closing the connection is the only
            # way to tell it something went wrong (it then refreshes metadata and retries).
            ctx.log.info("acks=0 produce failed, closing connection", errors=sorted({p["error_code"] for p in failed}))
            raise CloseConnection("acks=0 produce failed")
        return None  # acks=0: the client expects no response at all
    return {"responses": responses, "throttle_time_ms": 0}


def _append_all(ctx: RequestContext, req, error: ProduceResult | None, verified=None) -> tuple[list, list]:
    """Authorize and append every partition's batch (no await: one loop step)."""
    broker = ctx.broker
    responses: list = []
    written: list = []
    denied = ProduceResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    for topic in req.topic_data:
        name = topic.get("name") if ctx.api_version < 13 else None  # v13 names topics by id only
        info = broker.topics.registry.get(name) if name is not None else None
        if info is None and name is None:
            info = broker.topics.registry.by_id(topic.get("topic_id", ZERO_UUID))
        # WRITE on the topic, checked before its existence so an unauthorized client learns nothing about it.
        target = info.name if info is not None else name  # None: an unknown topic id, answered as unknown
        allowed = error is not None or target is None or ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, target)
        missing = ProduceResult(ErrorCode.UNKNOWN_TOPIC_ID if ctx.api_version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        partitions = []
        for part in topic.partition_data:
            if error is not None:
                result = error
            elif not allowed:
                result = denied
            elif info is None:
                result = missing
            else:
                result, plog = broker.replicas.append(info, part.index, part.records, verified=verified)
                if result.error == ErrorCode.NONE:
                    written.append((len(partitions), partitions, plog))
            partitions.append(_partition_response(part.index, result))
        responses.append({"name": name, "topic_id": topic.get("topic_id", ZERO_UUID), "partition_responses": partitions})
    return responses, written


HANDLERS = {PRODUCE: handle_produce}
