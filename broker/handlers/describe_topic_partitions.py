"""DescribeTopicPartitions (75, KIP-966): topics and their partitions, paged by a cursor.

As Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache: an empty topic list means every topic
the client may DESCRIBE (others left out); named topics are a set, in name order, from the cursor's topic on;
at most min(ResponsePartitionLimit, `max.request.partition.size.limit`) partitions (at least 1) are answered and
NextCursor names where to go on. A named topic the client may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED with
the zero id, listed after the others; an unknown one UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
illegal name). A cursor whose topic is not among the named ones, or whose partition is negative, makes the whole
request INVALID_REQUEST. With one replica, eligible leader replicas and the last known ELR are empty lists.
"""

from __future__ import annotations

import uuid

from broker.cluster.manager import TopicManager
from broker.cluster.topics import TopicError, TopicInfo, validate_topic_name
from broker.config import BrokerConfig
from broker.config.request_limits import RequestLimitsConfig
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.node import Endpoints
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

DESCRIBE_TOPIC_PARTITIONS = 75
ZERO_UUID = uuid.UUID(int=0)
LEADER_EPOCH = 0  # as Metadata answers: a partition's leader never changes


class _BadRequest(Exception):
    pass


def _topic(name: str, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID, internal: bool = False,
           partitions: list | None = None) -> dict:
    return {"error_code": int(code), "name": name, "topic_id": topic_id, "is_internal": internal,
            "partitions": partitions or [], "topic_authorized_operations": -2147483648}


def _partitions(node_id: int, start: int, end: int) -> list[dict]:
    return [{"error_code": 0, "partition_index": p, "leader_id": node_id, "leader_epoch": LEADER_EPOCH,
             "replica_nodes": [node_id], "isr_nodes": [node_id], "eligible_leader_replicas": [],
             "last_known_elr": [], "offline_replicas": []} for p in range(start, end)]


def _missing(name: str) -> dict:
    try:
        validate_topic_name(name)
    except TopicError:
        return _topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    return _topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class DescribeTopicPartitionsApis(Apis):
    """DescribeTopicPartitions, from the topics (paged by cursor)."""

    def __init__(self, topics: TopicManager, config: BrokerConfig, endpoints: Endpoints) -> None:
        self._topics = topics
        self._config = config
        self._endpoints = endpoints

    async def describe_topic_partitions(self, ctx: RequestContext, req: Request) -> Response:
        try:
            return self._describe(ctx, req)
        except _BadRequest:
            return {"throttle_time_ms": 0, "next_cursor": None, "topics": [
                _topic(t.name, ErrorCode.INVALID_REQUEST) for t in req.topics]}

    def _describe(self, ctx: RequestContext, req) -> dict:
        registry = self._topics.registry
        cursor = req.cursor
        cursor_topic = cursor.topic_name if cursor is not None else ""
        every_topic = not req.topics
        names = set(registry.names()) if every_topic else {t.name for t in req.topics}
        # Java's String.compareTo: UTF-16 order, equal for ASCII
        names = {n for n in names if n >= cursor_topic}
        if cursor is not None and not every_topic and cursor.topic_name not in names:
            raise _BadRequest
        if cursor is not None and cursor.partition_index < 0:
            raise _BadRequest
        refused = []
        allowed = []
        for name in sorted(names):
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name, audit=not every_topic):
                allowed.append(name)
            elif not every_topic:
                refused.append(_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        most = RequestLimitsConfig.from_config(self._config).max_request_partition_size_limit
        limit = max(min(most, req.response_partition_limit), 1)
        node_id = self._endpoints.node_id
        topics: list[dict] = []
        next_cursor = None
        remaining = limit
        for name in allowed:
            if remaining == 0:
                next_cursor = {"topic_name": name, "partition_index": 0}
                break
            info: TopicInfo | None = registry.get(name)
            if info is None:
                if not every_topic:
                    topics.append(_missing(name))
                continue
            start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
            end = min(info.num_partitions, start + remaining)
            partitions = _partitions(node_id, start, end)
            topics.append(_topic(name, ErrorCode.NONE, info.topic_id, info.internal, partitions))
            if end < info.num_partitions:
                next_cursor = {"topic_name": name, "partition_index": end}
                break
            remaining -= len(partitions)
        for entry in topics:  # as Kafka: every topic answered but the refused ones
            entry["topic_authorized_operations"] = ctx.authorized_operations(ResourceType.TOPIC,
                                                                             entry["name"])
        return {"throttle_time_ms": 0, "topics": topics + refused, "next_cursor": next_cursor}

    HANDLERS = {DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions}
