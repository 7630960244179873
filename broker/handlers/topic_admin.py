"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37)."""

from __future__ import annotations

import uuid

from broker.cluster.topics import TopicError
from protocol.errors import ErrorCode

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
ZERO_UUID = uuid.UUID(int=0)


async def handle_create_topics(ctx, req) -> dict:
    topics = ctx.broker.topics
    validate_only = req.get("validate_only", False)
    results = []
    seen: dict[str, int] = {}
    for topic in req.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    for topic in req.topics:
        result = {"name": topic.name, "topic_id": ZERO_UUID, "error_code": 0, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if seen[topic.name] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Create topics request from client has a duplicate topic {topic.name}.")
            configs = {c.name: c.value for c in topic.configs}
            info = await topics.create_topic(
                topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                assignments=[list(a.broker_ids) for a in topic.assignments],
                configs=configs,
                validate_only=validate_only,
            )
            result.update(
                topic_id=info.topic_id if not validate_only else ZERO_UUID,
                num_partitions=info.num_partitions,
                replication_factor=1,
                configs=[
                    {"name": e.name, "value": e.value, "read_only": e.read_only,
                     "config_source": e.source, "is_sensitive": e.is_sensitive}
                    for e in topics.topic_config_entries(info)
                ],
            )
        except TopicError as err:
            result.update(error_code=int(err.code), error_message=err.message)
        results.append(result)
    return {"throttle_time_ms": 0, "topics": results}


async def handle_delete_topics(ctx, req) -> dict:
    topics = ctx.broker.topics
    version = ctx.api_version
    wanted = (
        [(t.get("name"), t.get("topic_id", ZERO_UUID)) for t in req.topics]
        if version >= 6
        else [(name, ZERO_UUID) for name in req.topic_names]
    )
    results = []
    for name, topic_id in wanted:
        result = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
        try:
            if name is not None and topic_id != ZERO_UUID:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Give a topic name or a topic id, not both")
            info = await topics.delete_topic(name=name, topic_id=topic_id if name is None else None)
            result.update(name=info.name, topic_id=info.topic_id)
        except TopicError as err:
            result.update(error_code=int(err.code), error_message=err.message)
        results.append(result)
    return {"throttle_time_ms": 0, "responses": results}


async def handle_create_partitions(ctx, req) -> dict:
    topics = ctx.broker.topics
    results = []
    for topic in req.topics:
        result = {"name": topic.name, "error_code": 0, "error_message": None}
        try:
            await topics.create_partitions(topic.name, topic.count, validate_only=req.validate_only,
                                           assignments=topic.assignments)
        except TopicError as err:
            result.update(error_code=int(err.code), error_message=err.message)
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


HANDLERS = {
    CREATE_TOPICS: handle_create_topics,
    DELETE_TOPICS: handle_delete_topics,
    CREATE_PARTITIONS: handle_create_partitions,
}
