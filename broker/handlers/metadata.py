"""Metadata (api key 3): brokers, cluster id and topic/partition layout of this single-node cluster."""

from __future__ import annotations

import functools
import uuid

from broker.cluster.manager import MAX_RECORDS_PER_USER_OP, TopicManager
from broker.cluster.topics import INTERNAL_TOPICS, TopicError, TopicInfo, validate_topic_name
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.node import Endpoints
from broker.pacing import Pacer
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

METADATA = 3
ZERO_UUID = uuid.UUID(int=0)
NO_AUTHORIZED_OPERATIONS = -2147483648


@functools.lru_cache(maxsize=64)
def partition_entries(node_id: int, count: int) -> list[dict]:
    """A topic's partition entries: on one node they depend only on the node and the count, so they are built
    once and shared by every answer (never changed after: a response is only encoded)."""
    return [
        {
            "error_code": 0,
            "partition_index": p,
            "leader_id": node_id,
            "leader_epoch": 0,
            "replica_nodes": [node_id],
            "isr_nodes": [node_id],
            "offline_replicas": [],
        }
        for p in range(count)
    ]


def topic_entry(node_id: int, info: TopicInfo) -> dict:
    return {
        "error_code": 0,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": partition_entries(node_id, info.num_partitions),
        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


def error_entry(code: ErrorCode, name: str | None, topic_id: uuid.UUID = ZERO_UUID, internal: bool = False) -> dict:
    return {"error_code": int(code), "name": name, "topic_id": topic_id, "is_internal": internal, "partitions": []}


def _describable(ctx: RequestContext, name: str, audit: bool = True) -> bool:
    return ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name, audit=audit)


async def _missing_topics(topics, node_id: int, names: list[str], auto_create: bool) -> list[dict]:
    """Entries for requested topics that do not exist: auto-created when allowed, else Kafka's error."""
    entries: list[dict] = []
    creatable: list[str] = []
    for name in names:
        try:
            validate_topic_name(name)
        except TopicError as err:
            entries.append(error_entry(err.code, name))  # INVALID_TOPIC_EXCEPTION, with or without auto-creation
            continue
        if auto_create:
            creatable.append(name)
        else:
            entries.append(error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
    # Kafka auto-creates a Metadata request's topics in one controller operation, which is refused past 10 000
    # metadata records (none are created; Metadata answers UNKNOWN_TOPIC_OR_PARTITION).
    if creatable and topics.auto_create_records(len(creatable)) > MAX_RECORDS_PER_USER_OP:
        return entries + [error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name) for name in creatable]
    for name in creatable:
        try:
            info = await topics.auto_create(name)
        except TopicError as err:
            entries.append(error_entry(err.code, name))
            continue
        entries.append(topic_entry(node_id, info))
    return entries


class MetadataApis(Apis):
    """Metadata, from the topics."""

    def __init__(self, topics: TopicManager, endpoints: Endpoints) -> None:
        self._topics = topics
        self._endpoints = endpoints

    async def metadata(self, ctx: RequestContext, req: Request) -> Response:
        topics = self._topics
        # the endpoint of the listener this client came in on
        node = self._endpoints.for_listener(ctx.connection.listener)
        version = ctx.api_version
        requested = req.topics
        # v0: an empty list means every topic; v1+: null means every topic and an empty list none.
        all_topics = requested is None or (version == 0 and not requested)
        auto_create = (req.get("allow_auto_topic_creation", True) if version >= 4 else True) and topics.auto_create_enabled

        entries: list[dict] = []
        info: TopicInfo | None
        if all_topics:
            # As Kafka: topics the client may not DESCRIBE are left out, not reported.
            pacer = Pacer()
            for info in topics.registry.all():  # thousands of topics: yield to the loop between them
                if _describable(ctx, info.name, audit=False):
                    entries.append(topic_entry(node.node_id, info))
                await pacer.pace()
        else:
            # As Kafka, the requested names and ids are sets: a name or id asked for many times is answered
            # once. A request naming any topic id (v12+) is answered by id alone, its names ignored: Kafka's
            # Java Admin asks for topics by id with an empty name ("").
            names: dict[str, None] = {}
            ids: dict[uuid.UUID, None] = {}
            by_id = version >= 12 and any((wanted.get("topic_id") or ZERO_UUID) != ZERO_UUID for wanted in requested)
            for wanted in requested:
                name = wanted.get("name")
                topic_id = wanted.get("topic_id") or ZERO_UUID
                if by_id:
                    if topic_id != ZERO_UUID:
                        ids[topic_id] = None
                elif name is None:
                    ids[topic_id] = None
                else:
                    names[name] = None
            for topic_id in ids:
                info = topics.registry.by_id(topic_id) if topic_id != ZERO_UUID else None
                if info is None:
                    entries.append(error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id))
                elif not _describable(ctx, info.name):
                    # Topic ids are not secret (Kafka): the id is echoed, the name withheld.
                    entries.append(error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, topic_id))
                else:
                    entries.append(topic_entry(node.node_id, info))
            missing: list[str] = []
            for name in names:
                if not _describable(ctx, name):
                    # Whether the topic exists is not disclosed.
                    entries.append(error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                    continue
                info = topics.registry.get(name)
                if info is not None:
                    entries.append(topic_entry(node.node_id, info))
                else:
                    missing.append(name)
            if missing and auto_create and not ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
                creatable = [n for n in missing if ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, n)]
                entries += [error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, n,
                                        internal=n in INTERNAL_TOPICS)
                            for n in missing if n not in creatable]
                missing = creatable
            entries += await _missing_topics(topics, node.node_id, missing, auto_create)
        cluster_operations = NO_AUTHORIZED_OPERATIONS
        if version >= 8:
            if req.get("include_topic_authorized_operations"):
                for entry in entries:
                    # as Kafka: also for a topic that does not exist or whose name is invalid, not for one
                    # refused
                    name = entry["name"]
                    if name is not None and entry["error_code"] != ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                        entry["topic_authorized_operations"] = ctx.authorized_operations(ResourceType.TOPIC,
                                                                                         name)
            if version <= 10 and req.get("include_cluster_authorized_operations"):
                cluster_operations = ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME) \
                    if ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME) else 0

        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack}],
            "cluster_id": self._endpoints.cluster_id,
            "controller_id": node.node_id,
            "topics": entries,
            "cluster_authorized_operations": cluster_operations,
            "error_code": 0,
        }

    HANDLERS = {METADATA: metadata}
