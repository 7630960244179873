"""DeleteRecords (api key 21, v0-v2): move partitions' log start offsets (the low watermark) forward.

As Kafka's KafkaApis.handleDeleteRecordsRequest: DELETE on the topic (else TOPIC_AUTHORIZATION_FAILED), then
UNKNOWN_TOPIC_OR_PARTITION for a partition not in the metadata; the replica manager answers the rest (internal
topics INVALID_TOPIC_EXCEPTION, compact-only topics POLICY_VIOLATION, an offset above the high watermark
OFFSET_OUT_OF_RANGE, -1 the high watermark). TimeoutMs bounds Kafka's wait for followers: a single node has none.
The answer waits for the log start offset checkpoint, so a crash after it keeps the records deleted.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

DELETE_RECORDS = 21


async def handle_delete_records(ctx: RequestContext, req) -> dict:
    topics = ctx.broker.topics
    replicas = ctx.broker.replicas
    results: list[tuple[str, list[dict]]] = []
    moved: list[dict] = []
    for topic in req.topics:
        info = topics.registry.get(topic.name)
        allowed = ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        partitions = []
        for part in topic.partitions:
            if not allowed:
                code, low = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            elif info is None or not 0 <= part.partition_index < info.num_partitions:
                code, low = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
            else:
                code, low = replicas.delete_records(info, part.partition_index, part.offset)
            entry = {"partition_index": part.partition_index, "low_watermark": low, "error_code": int(code)}
            if code == ErrorCode.NONE:
                moved.append(entry)
            partitions.append(entry)
        results.append((topic.name, partitions))
    if moved and not await replicas.log_start_durable():
        for entry in moved:
            entry.update(low_watermark=-1, error_code=int(ErrorCode.KAFKA_STORAGE_ERROR))
    return {"throttle_time_ms": 0, "topics": [{"name": name, "partitions": parts} for name, parts in results]}


HANDLERS = {DELETE_RECORDS: handle_delete_records}
