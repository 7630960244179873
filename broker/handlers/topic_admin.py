"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37)."""

from __future__ import annotations

import uuid

from broker.cluster.manager import MAX_RECORDS_PER_USER_OP, POLICY_VIOLATION_MESSAGE, TopicPlan
from broker.cluster.topics import TopicError, TopicInfo
from protocol.errors import ErrorCode

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
ZERO_UUID = uuid.UUID(int=0)


async def handle_create_topics(ctx, req) -> dict:
    topics = ctx.broker.topics
    validate_only = req.get("validate_only", False)
    seen: dict[str, int] = {}
    for topic in req.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    results = []
    plans: list[tuple[dict, TopicPlan]] = []
    for topic in req.topics:
        result = {"name": topic.name, "topic_id": ZERO_UUID, "error_code": 0, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        results.append(result)
        try:
            if seen[topic.name] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Create topics request from client has a duplicate topic {topic.name}.")
            plans.append((result, topics.plan_topic(
                topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                assignments=[list(a.broker_ids) for a in topic.assignments],
                configs={c.name: c.value for c in topic.configs},
            )))
        except TopicError as err:
            result.update(error_code=int(err.code), error_message=err.message)
    # Kafka's controller runs a request as one operation of at most 10 000 metadata records; past that the whole
    # request fails with POLICY_VIOLATION.
    if sum(plan.records for _result, plan in plans) > MAX_RECORDS_PER_USER_OP:
        for result in results:
            result.update(error_code=int(ErrorCode.POLICY_VIOLATION), error_message=POLICY_VIOLATION_MESSAGE)
        return {"throttle_time_ms": 0, "topics": results}
    for result, plan in plans:
        try:
            if validate_only:
                info = TopicInfo(plan.name, ZERO_UUID, plan.num_partitions, plan.configs)
            else:
                info = await topics.create_planned(plan)
            result.update(
                topic_id=info.topic_id,
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
    planned: list[tuple[dict, str, int, int]] = []
    for topic in req.topics:
        result = {"name": topic.name, "error_code": 0, "error_message": None}
        results.append(result)
        try:
            _info, added = topics.plan_partitions(topic.name, topic.count, topic.assignments)
            planned.append((result, topic.name, topic.count, added))
        except TopicError as err:
            result.update(error_code=int(err.code), error_message=err.message)
    # As CreateTopics: one controller operation of at most 10 000 records (one per new partition) in Kafka.
    if sum(added for *_rest, added in planned) > MAX_RECORDS_PER_USER_OP:
        for result in results:
            result.update(error_code=int(ErrorCode.POLICY_VIOLATION), error_message=POLICY_VIOLATION_MESSAGE)
        return {"throttle_time_ms": 0, "results": results}
    if not req.validate_only:
        for result, name, count, _added in planned:
            try:
                await topics.add_partitions(name, count)
            except TopicError as err:
                result.update(error_code=int(err.code), error_message=err.message)
    return {"throttle_time_ms": 0, "results": results}


HANDLERS = {
    CREATE_TOPICS: handle_create_topics,
    DELETE_TOPICS: handle_delete_topics,
    CREATE_PARTITIONS: handle_create_partitions,
}
