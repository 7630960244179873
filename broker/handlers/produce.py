"""Produce (api key 0): validate and append one batch per partition; acks=-1 waits for the fsync.

In Kafka's order (KafkaApis.handleProduceRequest, then ReplicaManager.appendRecords):
- a request whose first batch of some partition is transactional needs a TransactionalId the principal may WRITE,
  else the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a first batch that Kafka's record walk cannot
  read fails the whole request CORRUPT_MESSAGE, with Kafka's message (`protocol.produce_records`);
- each partition: WRITE on the topic (TOPIC_AUTHORIZATION_FAILED), the partition known (UNKNOWN_TOPIC_OR_PARTITION,
  or UNKNOWN_TOPIC_ID by id), then ProduceRequest.validateRecords (exactly one whole batch of magic 2, no zstd
  before v7). A partition named twice is one partition, with the records named last (Kafka keys them by partition);
- acks other than -1, 0, 1: INVALID_REQUIRED_ACKS for the partitions that passed; else the replica manager's
  checks and the append (`ReplicaManager.append`).

A transactional produce with a transaction verifier (KIP-890) has the partitions where a batch would start a
transaction verified with the coordinator, inside the request's produce turn so pipelined batches keep their order.
From v12 (transaction.version 2, KIP-890 part 2) the coordinator adds those partitions to the transaction instead:
a TV2 client sends no AddPartitionsToTxn. v13 (KIP-516) names topics by TopicId: an id the registry does not know is
answered UNKNOWN_TOPIC_ID, as Kafka's KafkaApis.handleProduceRequest does for an id its metadata cannot resolve,
and the response carries the id."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from broker.cluster.manager import TopicManager
from broker.cluster.topics import TopicInfo
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request
from broker.replica_manager import (
    ProduceResult,
    ReplicaManager,
    idempotent_keys,
    storage_error,
    transactional_batches,
)
from broker.router import CloseConnection
from broker.security.acl import AclOperation, ResourceType
from protocol import produce_records
from protocol.errors import ErrorCode

PRODUCE = 0
ZERO_UUID = uuid.UUID(int=0)
VALID_ACKS = (-1, 0, 1)


@dataclass(slots=True)
class _Partition:
    """One partition of the request, named once however often the request names it."""

    topic: dict  # the response topic it belongs to
    index: int
    records: bytes | memoryview | None  # the request's field as decoded (a view of the frame)
    result: ProduceResult | None = None  # decided before the append (refused), else the append's


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


def _partitions(ctx: RequestContext, req) -> list[_Partition]:
    """The request's partitions, each once (the records named last), grouped under one response topic per topic
    (by name, or by id from v13), in the order the request first names them."""
    topics: dict[object, dict] = {}
    parts: dict[tuple[object, int], _Partition] = {}
    by_id = ctx.api_version >= 13
    for topic in req.topic_data:
        key = topic.get("topic_id", ZERO_UUID) if by_id else topic.get("name")
        out = topics.get(key)
        if out is None:
            out = topics[key] = {"name": topic.get("name") if not by_id else None,
                                 "topic_id": topic.get("topic_id", ZERO_UUID), "partition_responses": []}
        for part in topic.partition_data:
            known = parts.get((key, part.index))
            if known is None:
                parts[(key, part.index)] = _Partition(out, part.index, part.records)
            else:
                known.records = part.records
    return list(parts.values())


def _respond(parts: list[_Partition]) -> dict:
    topics: dict[int, dict] = {}
    for part in parts:
        topic = topics.setdefault(id(part.topic), part.topic)
        topic["partition_responses"].append(_partition_response(part.index, part.result or ProduceResult()))
    return {"responses": list(topics.values()), "throttle_time_ms": 0}


def _whole_request(parts: list[_Partition], acks: int, code: ErrorCode, message: str | None) -> dict:
    """Every partition answered `code` (Kafka's ProduceRequest.getErrorResponse); acks=0 closes the connection."""
    if acks == 0:
        raise CloseConnection(f"acks=0 produce refused: {code.name}")
    for part in parts:
        part.result = ProduceResult(code, error_message=message)
    return _respond(parts)


@dataclass(slots=True)
class _Accepted:
    """A partition that passed the request's checks, with its topic."""

    info: TopicInfo
    part: _Partition


class ProduceApis(Apis):
    """Produce, through the replica manager."""

    def __init__(self, topics: TopicManager, replicas: ReplicaManager) -> None:
        self._topics = topics
        self._replicas = replicas

    async def produce(self, ctx: RequestContext, req: Request) -> dict | None:
        acks = req.acks
        parts = _partitions(ctx, req)
        try:
            transactional = produce_records.has_transactional_records(p.records for p in parts)
        except produce_records.BatchWalkError as err:
            ctx.log.info("produce refused: unreadable record batch", error=str(err))
            return _whole_request(parts, acks, err.error_code, str(err))
        if transactional and (req.transactional_id is None or not ctx.authorize(
                AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)):
            return _whole_request(parts, acks, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
        try:
            accepted = self._admit(ctx, parts)
        except produce_records.UnknownCodecError as err:
            ctx.log.info("produce refused", error=str(err))
            return _whole_request(parts, acks, err.error_code, None)
        if acks not in VALID_ACKS:
            for a in accepted:
                a.part.result = ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)
            return _respond(parts)
        # Idempotent batches need their partitions' producer state; the first produce after a start loads it
        # from the log in worker threads, and requests arriving meanwhile queue behind this one (in arrival
        # order).
        entries = [(a.info, a.part.index, a.part.records) for a in accepted]
        keys = idempotent_keys(entries)
        txn_batches = transactional_batches(entries) if self._replicas.txn_verifier is not None else []
        turn = self._replicas.produce_turn(keys, force=[k for k, _h in txn_batches])
        written: list = []
        try:
            if turn is not None:
                await turn.wait()
            # Produce v12 (transaction.version 2): the partitions are added to the transaction here, on the
            # producer's behalf (Kafka's `addPartition` operation); before, only verified.
            verified = await self._replicas.verify_transactional(
                req.transactional_id, txn_batches, add=ctx.api_version >= 12,
                abortable=ctx.api_version >= 11) if txn_batches else None
            written = self._append_all(accepted, verified)
        finally:
            if turn is not None:
                turn.done()
        if acks == -1:
            # A partition whose flush failed is answered KAFKA_STORAGE_ERROR, never success (its log directory
            # is offline: nothing appended before the failure is confirmed by a later flush).
            failed = await self._replicas.not_durable(plog for _part, plog in written)
            for part, plog in written:
                if id(plog) in failed:
                    part.result = storage_error()
        if acks == 0:
            errors = sorted({p.result.error.name for p in parts if p.result is not None and p.result.error})
            if errors:
                # The client reads no response for acks=0, so, as Kafka does, closing the connection is the
                # only way to tell it something went wrong (it then refreshes metadata and retries).
                ctx.log.info("acks=0 produce failed, closing connection", errors=errors)
                raise CloseConnection("acks=0 produce failed")
            return None  # acks=0: the client expects no response at all
        return _respond(parts)

    def _admit(self, ctx: RequestContext, parts: list[_Partition]) -> list[_Accepted]:
        """KafkaApis' checks of each partition (no await); the refused get their result, the rest are
        returned."""
        registry = self._topics.registry
        version = ctx.api_version
        accepted = []
        allowed: dict[str, bool] = {}
        for part in parts:
            topic = part.topic
            if version >= 13:
                info = registry.by_id(topic["topic_id"])
                missing = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                info = registry.get(topic["name"])
                missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # WRITE on the topic, checked before its existence so an unauthorized client learns nothing about
            # it.
            target = info.name if info is not None else topic["name"]  # None: an unknown topic id
            if target is not None and target not in allowed:
                allowed[target] = ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, target)
            if target is not None and not allowed[target]:
                part.result = ProduceResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif info is None:
                part.result = ProduceResult(missing)
            elif not 0 <= part.index < info.num_partitions:
                part.result = ProduceResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                code = produce_records.validate_records(version, part.records)
                if code != ErrorCode.NONE:
                    part.result = ProduceResult(code)
                else:
                    accepted.append(_Accepted(info, part))
        return accepted

    def _append_all(self, accepted: list[_Accepted], verified=None) -> list:
        """Append every accepted partition's batch (no await: one loop step); the logs written, for the fsync.
        """
        replicas = self._replicas
        written = []
        for a in accepted:
            result, plog = replicas.append(a.info, a.part.index, a.part.records, verified=verified)
            a.part.result = result
            if result.error == ErrorCode.NONE:
                written.append((a.part, plog))
        return written

    HANDLERS = {PRODUCE: produce}

    # Kafka 4 serves Produce v3+ but lists v0 in ApiVersions, for librdkafka versions that fail without it
    # (KAFKA-18659); a v0-v2 request closes the connection, as any version not served
    ADVERTISED_MIN = {PRODUCE: 0}
