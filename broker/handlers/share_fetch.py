"""ShareFetch (78) and ShareAcknowledge (79), v1-2: share sessions, acknowledgements, acquisition, long poll.

Thin: each decodes the request (the group's READ, the member id, the acknowledgement types its version knows, the
budgets capped by fetch.max.bytes and the client's quota), makes one call to the share-partition leader
(`SharePartitionManager.fetch_messages` or `acknowledge`, broker.share_partition.manager), which serves the share session,
the acknowledgements (durable before they are answered) and the long poll, and encodes its answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from broker.cluster.manager import TopicManager
from broker.config import BrokerConfig
from broker.config.request_limits import RequestLimitsConfig
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.handlers.share_groups import valid_member_id
from broker.node import Endpoints
from broker.quotas.service import QuotaService
from broker.security.acl import AclOperation, ResourceType
from broker.share_partition.inflight import ACK_REJECT, ACK_RENEW
from broker.share_partition.manager import SharePartitionManager
from broker.share_partition.requests import (
    Acknowledgements,
    PartitionAcks,
    ShareAcknowledge,
    ShareFetch,
    ShareFetchParams,
    TopicPartition,
)
from protocol.errors import ErrorCode

SHARE_FETCH = 78
SHARE_ACKNOWLEDGE = 79
RECORD_LIMIT_MODE = 1  # ShareAcquireMode (v2): MaxRecords is a hard limit


def _top_error(code: ErrorCode, message: str | None = None) -> dict:
    # Kafka's ShareFetch/ShareAcknowledge error responses (getErrorResponse) carry no message: `message` is for
    # the log only.
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "responses": [],
            "node_endpoints": []}


def _renew_only_refusal(req) -> str | None:
    """Kafka's check of an is_renew_ack ShareFetch (v2): it only acknowledges, so it must fetch nothing."""
    wrong = [f"{name} must be set to 0, " for name, value in (
        ("maxBytes", req.max_bytes), ("minBytes", req.min_bytes), ("maxRecords", req.max_records),
        ("maxWaitMs", req.max_wait_ms)) if value != 0]
    return "".join(wrong) + "if isRenewAck is true." if wrong else None


def _ack_batches(batches, version: int, renew_ack: bool) -> Acknowledgements:
    """The acknowledgement batches as (first, last, types), and whether any is a RENEW; None for a type the
    version does not know."""
    highest = ACK_RENEW if version >= 2 else ACK_REJECT
    out = []
    renew = False
    for b in batches:
        types = list(b.acknowledge_types)
        if types:
            top = max(types)
            if min(types) < 0 or top > highest:
                return None
            renew = renew or top == ACK_RENEW  # the highest type there is
        out.append((b.first_offset, b.last_offset, types))
    if renew and not renew_ack:
        return None  # Kafka: RENEW only in a request flagged IsRenewAck
    return PartitionAcks(out, renew)


def _requested(topics, version: int, renew_ack: bool
               ) -> tuple[list[TopicPartition], dict[TopicPartition, Acknowledgements]]:
    """The partitions a ShareFetch names, and the acknowledgements of those carrying some, in one pass."""
    requested: list[TopicPartition] = []
    acks: dict[TopicPartition, Acknowledgements] = {}
    for t in topics:
        topic_id = t.topic_id
        for p in t.partitions:
            tp = (topic_id, p.partition_index)
            requested.append(tp)
            if p.acknowledgement_batches:
                acks[tp] = _ack_batches(p.acknowledgement_batches, version, renew_ack)
    return requested, acks


class ShareFetchApis(Apis):
    """ShareFetch and ShareAcknowledge, over the share-partition leader."""

    def __init__(self, share_partitions: SharePartitionManager, topics: TopicManager, quotas: QuotaService,
                 config: BrokerConfig, endpoints: Endpoints) -> None:
        self._share_partitions = share_partitions
        self._topics = topics
        self._quotas = quotas
        self._config = config
        self._endpoints = endpoints

    def _readable(self, ctx: RequestContext) -> Callable[[uuid.UUID], bool]:
        """Whether the client may READ a topic (by id): share consumption needs READ on the topic and on the group.
        An unknown topic id is left to the share-partition leader (UNKNOWN_TOPIC_ID)."""
        registry = self._topics.registry

        def readable(topic_id: uuid.UUID) -> bool:
            info = registry.by_id(topic_id)
            return info is None or ctx.authorize(AclOperation.READ, ResourceType.TOPIC, info.name)

        return readable

    def _leader(self) -> dict:
        return {"leader_id": self._endpoints.node_id, "leader_epoch": 0}

    def _fetch_params(self, ctx: RequestContext, req: Request) -> ShareFetchParams:
        # Kafka caps MaxBytes by fetch.max.bytes and by what the client's consumer_byte_rate allows in a quota
        # window, and MinBytes by that
        max_bytes = int(min(req.max_bytes, RequestLimitsConfig.from_config(self._config).fetch_max_bytes,
                            self._quotas.fetch_max_bytes(ctx)))
        return ShareFetchParams(
            req.max_wait_ms, min(req.min_bytes, max_bytes), max_bytes,
            req.max_records, ctx.api_version >= 2 and req.get("share_acquire_mode", 0) == RECORD_LIMIT_MODE,
            req.share_session_epoch)

    async def share_fetch(self, ctx: RequestContext, req: Request) -> Response:
        version = ctx.api_version
        group, member = req.group_id, req.member_id
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group):
            return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if not valid_member_id(member):
            return _top_error(ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")
        renew_ack = version >= 2 and bool(req.get("is_renew_ack", False))
        if renew_ack and (refused := _renew_only_refusal(req)) is not None:
            return _top_error(ErrorCode.INVALID_REQUEST, refused)
        requested, acks = _requested(req.topics, version, renew_ack)
        forgotten = req.forgotten_topics_data
        forget = [(t.topic_id, p) for t in forgotten for p in t.partitions] if forgotten else []
        answer = await self._share_partitions.fetch_messages(
            ShareFetch(group, member, req.share_session_epoch, ctx.connection.id, requested, forget, acks,
                       self._fetch_params(ctx, req), renew_ack), self._readable(ctx))
        if answer.error != ErrorCode.NONE:
            return _top_error(answer.error, answer.message)
        leader = self._leader()  # the same for every partition: one node leads them all
        responses: dict[uuid.UUID, list[dict]] = {}
        served = 0
        for (tid, p), e in answer.partitions:
            served += len(e.records)
            responses.setdefault(tid, []).append({
                "partition_index": p, "error_code": int(e.error), "error_message": e.message,
                "acknowledge_error_code": int(e.ack_error), "acknowledge_error_message": e.ack_message,
                "current_leader": leader, "records": e.records,
                "acquired_records": [{"first_offset": r.first_offset, "last_offset": r.last_offset,
                                      "delivery_count": r.delivery_count} for r in e.acquired]})
        # consumer_byte_rate (Kafka records ShareFetch bytes too); the acquired records are still handed over. Group ""
        # has no share-partition to serve: nothing to record.
        ctx.throttle_ms = self._quotas.share_fetch_throttle(ctx, served) if group else 0
        return {"throttle_time_ms": ctx.throttle_ms, "error_code": 0, "error_message": None,
                "acquisition_lock_timeout_ms": answer.lock_duration_ms,
                "responses": [{"topic_id": tid, "partitions": parts} for tid, parts in responses.items()],
                # Kafka lists the leaders of partitions answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH only;
                # this broker leads every partition it serves, so there are none.
                "node_endpoints": []}

    async def share_acknowledge(self, ctx: RequestContext, req: Request) -> Response:
        version = ctx.api_version
        group, member = req.group_id, req.member_id
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group):
            return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if not valid_member_id(member) or not group:
            return _top_error(ErrorCode.INVALID_REQUEST, "Invalid member or group id in the request.")
        renew_ack = version >= 2 and bool(req.get("is_renew_ack", False))
        answer = await self._share_partitions.acknowledge(ShareAcknowledge(
            group, member, req.share_session_epoch,
            [((t.topic_id, p.partition_index), _ack_batches(p.acknowledgement_batches, version, renew_ack))
             for t in req.topics for p in t.partitions]), self._readable(ctx))
        if answer.error != ErrorCode.NONE:
            return _top_error(answer.error, answer.message)
        outcomes = iter(answer.partitions)
        leader = self._leader()
        responses = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                code, message = next(outcomes)
                parts.append({"partition_index": p.partition_index, "error_code": int(code), "error_message": message,
                              "current_leader": leader})
            responses.append({"topic_id": t.topic_id, "partitions": parts})
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "acquisition_lock_timeout_ms": answer.lock_duration_ms, "responses": responses,
                "node_endpoints": []}

    HANDLERS = {SHARE_FETCH: share_fetch, SHARE_ACKNOWLEDGE: share_acknowledge}
