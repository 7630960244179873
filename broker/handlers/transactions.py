"""AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), DescribeTransactions (65), ListTransactions (66):
thin wrappers over the transaction coordinator runtime (component `transaction_coordinator`, broker.txn.runtime).
InitProducerId with a transactional id goes there too (broker.handlers.producer_ids).

Authorization as Kafka's KafkaApis: WRITE on the transactional id (AddPartitions v0-3, AddOffsets, EndTxn), WRITE
on each topic (AddPartitions v0-3; internal topics never), READ on the group (AddOffsets); AddPartitions v4+
is the brokers' batched/verify-only form and needs CLUSTER_ACTION; DESCRIBE on each transactional id
(DescribeTransactions, whose topics the client may not DESCRIBE are left out); ListTransactions lists only the
ids the client may DESCRIBE.

Versions: EndTxn v5 and AddPartitionsToTxn v5 are transaction version 2 (KIP-890 part 2: the epoch bumped by
every EndTxn, whose v5 answer carries the producer id and epoch to use next; partitions added by their leaders
on Produce v12). They are served only while transaction.version 2 is finalized (broker.features; Kafka serves
them always, but a client only uses them when it sees TV2 finalized). AddPartitionsToTxn v4+ is the brokers'
batched form (v4: KIP-890 part 1 verification; v5 adds partitions the TV2 way).
"""

from __future__ import annotations

from broker.cluster.topics import INTERNAL_TOPICS
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.linear_regex import RegexError, RegexUnavailable
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.txn.runtime import TransactionCoordinatorRuntime
from broker.txn.versions import client_transaction_version, error_for_version
from protocol.errors import ErrorCode

ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66


def _partition_results(errors: dict[tuple[str, int], ErrorCode | int]) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), code in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": int(code)})
    return [{"name": t, "results_by_partition": ps} for t, ps in topics.items()]


def _requested(topics) -> list[tuple[str, int]]:
    return [(t.name, p) for t in topics for p in t.partitions]


class TransactionApis(Apis):
    """The transaction APIs, over the transaction coordinator."""

    def __init__(self, transaction_coordinator: TransactionCoordinatorRuntime) -> None:
        self._transaction_coordinator = transaction_coordinator

    async def _add_one(self, ctx, version: int, tid: str, producer_id: int, epoch: int, verify_only: bool,
                       parts: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode | int]:
        """One transaction of an AddPartitionsToTxn request (Kafka's per-transaction branch)."""
        if version < 4 and not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return dict.fromkeys(parts, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if version < 4:
            allowed = {t for t, _ in parts if t not in INTERNAL_TOPICS
                       and ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, t)}
            if len(allowed) != len({t for t, _ in parts}):
                # Any failed check fails the whole transaction: the refused and unknown partitions say why, the rest
                # were not attempted (Kafka's handler).
                exists = self._transaction_coordinator.partition_exists
                return {(t, p): ErrorCode.TOPIC_AUTHORIZATION_FAILED if t not in allowed
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if not exists(t, p)
                        else ErrorCode.OPERATION_NOT_ATTEMPTED for t, p in parts}
        errors = await self._transaction_coordinator.add_partitions(
            tid, producer_id, epoch, parts, verify_only=verify_only,
            client_transaction_version=client_transaction_version("AddPartitionsToTxn", version),
            from_producer=version < 4)
        return {(tp.topic, tp.partition): error_for_version(code, "AddPartitionsToTxn", version)
                for tp, code in errors.items()}

    async def add_partitions_to_txn(self, ctx: RequestContext, req: Request) -> Response:
        version = ctx.api_version
        if version < 4:
            parts = _requested(req.v3_and_below_topics)
            errors = await self._add_one(ctx, version, req.v3_and_below_transactional_id,
                                         req.v3_and_below_producer_id, req.v3_and_below_producer_epoch, False,
                                         parts)
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _partition_results(errors)}
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                    "results_by_transaction": []}
        # A transactional id repeated in the batch is served once per entry, each with the partitions of its
        # last entry (Kafka's partitionsByTransaction map) and its own producer and verify_only, and each
        # answered
        partitions = {t.transactional_id: _requested(t.topics) for t in req.transactions}
        results = []
        for t in req.transactions:
            errors = await self._add_one(ctx, version, t.transactional_id, t.producer_id, t.producer_epoch,
                                         t.verify_only, partitions[t.transactional_id])
            results.append({"transactional_id": t.transactional_id,
                            "topic_results": _partition_results(errors)})
        return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}

    async def add_offsets_to_txn(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            code = await self._transaction_coordinator.add_offsets(req.transactional_id, req.producer_id,
                                                                req.producer_epoch, req.group_id)
            code = error_for_version(code, "AddOffsetsToTxn", ctx.api_version)
        return {"throttle_time_ms": 0, "error_code": int(code)}

    async def end_txn(self, ctx: RequestContext, req: Request) -> Response:
        version = ctx.api_version
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
        result = await self._transaction_coordinator.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
            client_transaction_version("EndTxn", version))
        answer = {"throttle_time_ms": 0,
                  "error_code": int(error_for_version(result.error, "EndTxn", version))}
        if version >= 5:
            # TV2: the epoch was bumped (or a new producer id given on overflow); -1/-1 with an error, as
            # Kafka
            answer.update(producer_id=result.producer_id, producer_epoch=result.producer_epoch)
        return answer

    async def describe_transactions(self, ctx: RequestContext, req: Request) -> Response:
        allowed = [t for t in req.transactional_ids
                   if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t)]
        described = {d.transactional_id: d
                     for d in await self._transaction_coordinator.describe_transactions(allowed)}
        states = []
        for tid in req.transactional_ids:
            d = described.get(tid)
            if d is None:
                # the message's defaults besides the error, as Kafka answers it
                states.append({"transactional_id": tid, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                               "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": 0,
                               "producer_id": 0, "producer_epoch": 0, "topics": []})
                continue
            topics = [{"topic": topic, "partitions": parts} for topic, parts in d.topics.items()
                      if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)]
            states.append({"transactional_id": tid, "error_code": int(d.error), "transaction_state": d.state,
                           "transaction_timeout_ms": d.transaction_timeout_ms,
                           "transaction_start_time_ms": d.transaction_start_time_ms,
                           "producer_id": d.producer_id,
                           "producer_epoch": d.producer_epoch, "topics": topics})
        return {"throttle_time_ms": 0, "transaction_states": states}

    async def list_transactions(self, ctx: RequestContext, req: Request) -> Response:
        version = ctx.api_version
        pattern = req.get("transactional_id_pattern") if version >= 2 else None
        try:
            result = await self._transaction_coordinator.list_transactions(
                req.state_filters, req.producer_id_filters, req.get("duration_filter", -1) if version >= 1 else -1,
                pattern)
        except RegexError:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_REGULAR_EXPRESSION),
                    "unknown_state_filters": [], "transaction_states": []}
        except RegexUnavailable:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                    "unknown_state_filters": [], "transaction_states": []}
        listed = [{"transactional_id": t.transactional_id, "producer_id": t.producer_id, "transaction_state": t.state}
                  for t in result.transactions
                  if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id, audit=False)]
        return {"throttle_time_ms": 0, "error_code": int(result.error),
                "unknown_state_filters": result.unknown_state_filters, "transaction_states": listed}

    HANDLERS = {
        ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
        ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
        END_TXN: end_txn,
        DESCRIBE_TRANSACTIONS: describe_transactions,
        LIST_TRANSACTIONS: list_transactions,
    }
