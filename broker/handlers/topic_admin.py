"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37)."""

from __future__ import annotations

import uuid

from broker.cluster.manager import MAX_RECORDS_PER_USER_OP, POLICY_VIOLATION_MESSAGE, TopicManager, TopicPlan
from broker.cluster.topics import CLUSTER_METADATA_TOPIC, TopicError, TopicInfo
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.quotas.service import QuotaService
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
ZERO_UUID = uuid.UUID(int=0)
THROTTLED = "The throttling quota has been exceeded."


def _topic_result(name: str, code: int = 0, message: str | None = None) -> dict:
    """A CreateTopics result as Kafka answers a refused topic: no id, no partitions, no configs (an empty list
    from v5, where the field is nullable)."""
    return {"name": name, "topic_id": ZERO_UUID, "error_code": code, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": []}


NOT_HOSTED = "This server does not host this topic-partition."
NOT_HOSTED_ID = "This server does not host this topic ID."


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


class TopicAdminApis(Apis):
    """CreateTopics, DeleteTopics and CreatePartitions, through the topic manager (the controller's part),
    within the controller mutation quota."""

    def __init__(self, topics: TopicManager, quotas: QuotaService) -> None:
        self._topics = topics
        self._quotas = quotas

    def _mutation_quota(self, ctx: RequestContext, strict_since: int):
        """Kafka's controller mutation quota for this request: strict (THROTTLING_QUOTA_EXCEEDED per topic)
        from the versions that know that error (CreateTopics v6, DeleteTopics v5, CreatePartitions v3), else
        permissive."""
        return self._quotas.controller_mutation_quota(ctx.connection, ctx.client_id,
                                                      strict=ctx.api_version >= strict_since)

    async def create_topics(self, ctx: RequestContext, req: Request) -> Response:
        """As Kafka's ControllerApis.createTopics: a name given twice is answered once, after the others, with
        INVALID_REQUEST; then __cluster_metadata and the topics the client may not create (CREATE on the
        cluster, else on each topic). The others are answered in request order, each checked as Kafka's
        controller does."""
        topics = self._topics
        validate_only = req.get("validate_only", False)
        counts: dict[str, int] = {}
        for topic in req.topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        cluster_create = ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
        refused: dict[str, tuple[ErrorCode, str]] = {}
        for name, count in counts.items():
            if count > 1:
                refused[name] = (ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            elif name == CLUSTER_METADATA_TOPIC:
                refused[name] = (ErrorCode.INVALID_REQUEST,
                                 f"Creation of internal topic {name} is prohibited.")
            elif not cluster_create and not ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name):
                refused[name] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        results = []
        plans: list[tuple[dict, TopicPlan]] = []
        for topic in req.topics:
            if topic.name in refused:
                continue
            result = _topic_result(topic.name)
            results.append(result)
            try:
                plans.append((result, topics.plan_topic(
                    topic.name,
                    num_partitions=topic.num_partitions,
                    replication_factor=topic.replication_factor,
                    assignments=[(a.partition_index, list(a.broker_ids)) for a in topic.assignments],
                    configs=[(c.name, c.value) for c in topic.configs],
                )))
            except TopicError as err:
                result.update(error_code=int(err.code), error_message=err.message)
        # duplicates first, then the others (Kafka: the order of its hash sets; here the request's)
        results += [_topic_result(name, int(code), message) for name, (code, message) in refused.items()
                    if code == ErrorCode.INVALID_REQUEST and counts[name] > 1]
        results += [_topic_result(name, int(code), message) for name, (code, message) in refused.items()
                    if counts[name] == 1]
        # Kafka's controller runs a request as one operation of at most 10 000 metadata records; past that the whole
        # request fails with POLICY_VIOLATION.
        if sum(plan.records for _result, plan in plans) > MAX_RECORDS_PER_USER_OP:
            for result in results:
                result.update(error_code=int(ErrorCode.POLICY_VIOLATION),
                              error_message=POLICY_VIOLATION_MESSAGE)
            return {"throttle_time_ms": 0, "topics": results}
        quota = self._mutation_quota(ctx, 6)
        for result, plan in plans:
            try:
                if not quota.record(plan.num_partitions):
                    raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
                if validate_only:  # Kafka's controller answers with the id it would have given the topic
                    info = TopicInfo(plan.name, uuid.uuid4(), plan.num_partitions, plan.configs)
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
                        for e in topics.topic_config_entries(info, raw=True)
                    ],
                )
            except TopicError as err:
                result.update(error_code=int(err.code), error_message=err.message)
        ctx.throttle_ms = quota.throttle_time_ms()
        return {"throttle_time_ms": ctx.throttle_ms, "topics": results}

    async def delete_topics(self, ctx: RequestContext, req: Request) -> Response:
        """Kafka's ControllerApis.deleteTopics checks, one result per topic in request order (Kafka shuffles them):
        a topic named (or an id given) twice is answered once with INVALID_REQUEST; a name with an id, or neither, is
        INVALID_REQUEST; an unknown id UNKNOWN_TOPIC_ID; then authorization (DELETE on the cluster, else DESCRIBE and
        DELETE on the topic) and deletion."""
        topics = self._topics
        wanted = ([(t.get("name"), t.get("topic_id", ZERO_UUID)) for t in req.topics] if ctx.api_version >= 6
                  else [(name, ZERO_UUID) for name in req.topic_names])
        names = [name for name, topic_id in wanted if name is not None and topic_id == ZERO_UUID]
        ids = [topic_id for name, topic_id in wanted if name is None and topic_id != ZERO_UUID]
        results = []
        answered: set[str | uuid.UUID] = set()
        cluster_delete = ctx.authorize(AclOperation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME)
        # Kafka answers a name whose topic's id was also given (once, and both deletable) with INVALID_REQUEST, and the
        # id not at all
        twice = {}
        for name in names:
            info = topics.registry.get(name)
            if info is not None and names.count(name) == 1 and ids.count(info.topic_id) == 1 and (
                    cluster_delete or (ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
                                       and ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name))):
                twice[info.topic_id] = name
        answered.update(twice)
        quota = self._mutation_quota(ctx, 5)
        for name, topic_id in wanted:
            result = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
            try:
                if name is None and topic_id == ZERO_UUID:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
                if name is not None and topic_id != ZERO_UUID:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
                key = name if name is not None else topic_id
                if key in answered:
                    continue
                answered.add(key)
                if name is not None and names.count(name) > 1:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                if name is None and ids.count(topic_id) > 1:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
                if name is None and topics.registry.by_id(topic_id) is None:
                    raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, NOT_HOSTED_ID)
                if not cluster_delete:
                    _check_deletable(ctx, topics, name, topic_id, result)
                found = topics.registry.get(name) if name is not None else topics.registry.by_id(topic_id)
                if name is not None and found is not None and twice.get(found.topic_id) == name:
                    result["topic_id"] = found.topic_id
                    raise TopicError(ErrorCode.INVALID_REQUEST,
                                     "The provided topic name maps to an ID that was already supplied.")
                if found is not None and not quota.record(found.num_partitions):
                    raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
                info = await topics.delete_topic(name=name, topic_id=topic_id if name is None else None)
                result.update(name=info.name, topic_id=info.topic_id)
            except TopicError as err:
                result.update(error_code=int(err.code), error_message=err.message)
            results.append(result)
        ctx.throttle_ms = quota.throttle_time_ms()
        return {"throttle_time_ms": ctx.throttle_ms, "responses": results}

    async def create_partitions(self, ctx: RequestContext, req: Request) -> Response:
        """As Kafka's ControllerApis.createPartitions: a topic named twice is answered once, first, with
        INVALID_REQUEST; then the topics the client may not ALTER; then the others (Kafka: in the order of its hash
        sets; here the request's)."""
        topics = self._topics
        counts: dict[str, int] = {}
        for topic in req.topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        results = [{"name": name, "error_code": int(ErrorCode.INVALID_REQUEST), "error_message": "Duplicate topic name."}
                   for name, count in counts.items() if count > 1]
        allowed = []
        for topic in req.topics:
            if counts[topic.name] > 1:
                continue
            if ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                allowed.append(topic)
            else:
                results.append({"name": topic.name, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                "error_message": None})
        planned: list[tuple[dict, str, int, int]] = []
        quota = self._mutation_quota(ctx, 3)
        for topic in allowed:
            result = {"name": topic.name, "error_code": 0, "error_message": None}
            results.append(result)
            try:
                assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
                _info, added = topics.plan_partitions(topic.name, topic.count, assignments)
                if not quota.record(added):
                    raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
                planned.append((result, topic.name, topic.count, added))
            except TopicError as err:
                result.update(error_code=int(err.code), error_message=err.message)
        # As CreateTopics: one controller operation of at most 10 000 records (one per new partition) in
        # Kafka.
        if sum(added for *_rest, added in planned) > MAX_RECORDS_PER_USER_OP:
            for result in results:
                result.update(error_code=int(ErrorCode.POLICY_VIOLATION),
                              error_message=POLICY_VIOLATION_MESSAGE)
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
        CREATE_TOPICS: create_topics,
        DELETE_TOPICS: delete_topics,
        CREATE_PARTITIONS: create_partitions,
    }
