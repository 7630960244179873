"""DeleteRecords (api key 21, v0-v2): move partitions' log start offsets (the low watermark) forward.

As Kafka's KafkaApis.handleDeleteRecordsRequest: DELETE on the topic (else TOPIC_AUTHORIZATION_FAILED), then
UNKNOWN_TOPIC_OR_PARTITION for a partition not in the metadata; the replica manager answers the rest (internal
topics INVALID_TOPIC_EXCEPTION, compact-only topics POLICY_VIOLATION, an offset above the high watermark
OFFSET_OUT_OF_RANGE, -1 the high watermark). TimeoutMs bounds Kafka's wait for followers: a single node has none. A partition named twice is moved once, to
the offset named last (Kafka keys the request by partition).
The answer waits for the log start offset checkpoint, so a crash after it keeps the records deleted.
"""

from __future__ import annotations

from broker.cluster.manager import TopicManager
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.replica_manager import ReplicaManager
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

DELETE_RECORDS = 21


class DeleteRecordsApis(Apis):
    """DeleteRecords, through the replica manager."""

    def __init__(self, topics: TopicManager, replicas: ReplicaManager) -> None:
        self._topics = topics
        self._replicas = replicas

    async def delete_records(self, ctx: RequestContext, req: Request) -> Response:
        topics = self._topics
        replicas = self._replicas
        # Kafka keys the request by partition: a partition named twice (in one topic entry or two) is one partition,
        # moved to the offset named last, and a topic named twice is one topic of the response
        requested: dict[tuple[str, int], int] = {}
        for topic in req.topics:
            for part in topic.partitions:
                requested[(topic.name, part.partition_index)] = part.offset
        results: dict[str, list[dict]] = {}
        allowed: dict[str, bool] = {}
        moved: list[dict] = []
        for (name, index), offset in requested.items():
            info = topics.registry.get(name)
            if name not in allowed:
                allowed[name] = ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name)
            if not allowed[name]:
                code, low = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            elif info is None or not 0 <= index < info.num_partitions:
                code, low = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
            else:
                code, low = replicas.delete_records(info, index, offset)
            entry = {"partition_index": index, "low_watermark": low, "error_code": int(code)}
            if code == ErrorCode.NONE:
                moved.append(entry)
            results.setdefault(name, []).append(entry)
        if moved and not await replicas.log_start_durable():
            for entry in moved:
                entry.update(low_watermark=-1, error_code=int(ErrorCode.KAFKA_STORAGE_ERROR))
        return {"throttle_time_ms": 0, "topics": [{"name": name, "partitions": parts} for name, parts in results.items()]}

    HANDLERS = {DELETE_RECORDS: delete_records}
