"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37)."""

from __future__ import annotations

import uuid

from broker.cluster.manager import MAX_RECORDS_PER_USER_OP, POLICY_VIOLATION_MESSAGE, TopicPlan
from broker.cluster.topics import CLUSTER_METADATA_TOPIC, TopicError, TopicInfo
from broker.context import RequestContext
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
ZERO_UUID = uuid.UUID(int=0)
THROTTLED = "The throttling quota has been exceeded."


def _mutation_quota(ctx: RequestContext, strict_since: int):
    """Kafka's controller mutation quota for this request: strict (THROTTLING_QUOTA_EXCEEDED per topic) from the
    versions that know that error (CreateTopics v6, DeleteTopics v5, CreatePartitions v3), else permissive."""
    return ctx.broker.quotas.controller_mutation_quota(ctx.connection, ctx.client_id,
                                                       strict=ctx.api_version >= strict_since)


async def handle_create_topics(ctx: RequestContext, req) -> dict:
    topics = ctx.broker.topics
    validate_only = req.get("validate_only", False)
    seen: dict[str, int] = {}
    for topic in req.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    results = []
    plans: list[tuple[dict, TopicPlan]] = []
    # As Kafka: CREATE on the cluster, else on each topic; DESCRIBE_CONFIGS on a topic to see its configs.
    cluster_create = ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
    for topic in req.topics:
        result = {"name": topic.name, "topic_id": ZERO_UUID, "error_code": 0, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        results.append(result)
        try:
            if seen[topic.name] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Create topics request from client has a duplicate topic {topic.name}.")
            if topic.name != CLUSTER_METADATA_TOPIC and not cluster_create and \
                    not ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, topic.name):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
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
    quota = _mutation_quota(ctx, 6)
    for result, plan in plans:
        try:
            if not quota.record(plan.num_partitions):
                raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
            if validate_only:
                info = TopicInfo(plan.name, ZERO_UUID, plan.num_partitions, plan.configs)
            else:
                info = await topics.create_planned(plan)
            if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, info.name):
                result.update(topic_id=info.topic_id, topic_config_error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
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
    ctx.throttle_ms = quota.throttle_time_ms()
    return {"throttle_time_ms": ctx.throttle_ms, "topics": results}


async def handle_delete_topics(ctx: RequestContext, req) -> dict:
    topics = ctx.broker.topics
    version = ctx.api_version
    wanted = (
        [(t.get("name"), t.get("topic_id", ZERO_UUID)) for t in req.topics]
        if version >= 6
        else [(name, ZERO_UUID) for name in req.topic_names]
    )
    results = []
    # As Kafka: DELETE on the cluster, else DESCRIBE (to learn the topic exists) and DELETE on each topic.
    cluster_delete = ctx.authorize(AclOperation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME)
    quota = _mutation_quota(ctx, 5)
    for name, topic_id in wanted:
        result = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
        try:
            if name is not None and topic_id != ZERO_UUID:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Give a topic name or a topic id, not both")
            if not cluster_delete:
                _check_deletable(ctx, topics, name, topic_id, result)
            found = topics.registry.get(name) if name is not None else topics.registry.by_id(topic_id)
            if found is not None and not quota.record(found.num_partitions):
                raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
            info = await topics.delete_topic(name=name, topic_id=topic_id if name is None else None)
            result.update(name=info.name, topic_id=info.topic_id)
        except TopicError as err:
            result.update(error_code=int(err.code), error_message=err.message)
        results.append(result)
    ctx.throttle_ms = quota.throttle_time_ms()
    return {"throttle_time_ms": ctx.throttle_ms, "responses": results}


def _check_deletable(ctx: RequestContext, topics, name: str | None, topic_id: uuid.UUID, result: dict) -> None:
    def may(operation: AclOperation, topic: str) -> bool:
        return ctx.authorize(operation, ResourceType.TOPIC, topic)

    denied = TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    if name is not None:
        if not may(AclOperation.DESCRIBE, name):
            raise denied  # whether the topic exists is not disclosed
        if topics.registry.get(name) is not None and not may(AclOperation.DELETE, name):
            raise denied
        return
    info = topics.registry.by_id(topic_id)
    if info is not None and not may(AclOperation.DELETE, info.name):
        if may(AclOperation.DESCRIBE, info.name):
            result["name"] = info.name
        raise denied


async def handle_create_partitions(ctx: RequestContext, req) -> dict:
    topics = ctx.broker.topics
    results = []
    planned: list[tuple[dict, str, int, int]] = []
    quota = _mutation_quota(ctx, 3)
    for topic in req.topics:
        result = {"name": topic.name, "error_code": 0, "error_message": None}
        results.append(result)
        if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            result.update(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        try:
            _info, added = topics.plan_partitions(topic.name, topic.count, topic.assignments)
            if not quota.record(added):
                raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
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
    ctx.throttle_ms = quota.throttle_time_ms()
    return {"throttle_time_ms": ctx.throttle_ms, "results": results}


HANDLERS = {
    CREATE_TOPICS: handle_create_topics,
    DELETE_TOPICS: handle_delete_topics,
    CREATE_PARTITIONS: handle_create_partitions,
}
