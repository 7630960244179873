"""DescribeProducers (api key 61, v0): the active producers of partitions, from their producer and transaction
state (Kafka's ReplicaManager.activeProducerState). READ on the topic, as Kafka's KafkaApis: a topic the client
may not read answers TOPIC_AUTHORIZATION_FAILED for each of its partitions."""

from __future__ import annotations

from broker.log.dir_failure import KafkaStorageError
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

DESCRIBE_PRODUCERS = 61


def _partition(index: int, code: ErrorCode, producers=(), message: str | None = None) -> dict:
    return {"partition_index": index, "error_code": int(code), "error_message": message, "active_producers": [
        {"producer_id": d.producer_id, "producer_epoch": d.producer_epoch, "last_sequence": d.last_sequence,
         "last_timestamp": d.last_timestamp, "coordinator_epoch": d.coordinator_epoch,
         "current_txn_start_offset": d.current_txn_start_offset} for d in producers]}


async def handle_describe_producers(ctx, req) -> dict:
    topics = ctx.broker.topics
    replicas = ctx.broker.replicas
    allowed = {t.name: ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name) for t in req.topics}
    wanted = [(info.name, p) for t in req.topics if allowed[t.name] and (info := topics.registry.get(t.name))
              for p in t.partition_indexes if 0 <= p < info.num_partitions]
    await replicas.ensure_loaded(wanted)  # off the loop on a partition's first use after a start
    out = []
    for t in req.topics:
        info = topics.registry.get(t.name)
        partitions = []
        for p in t.partition_indexes:
            if not allowed[t.name]:
                partitions.append(_partition(p, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif info is None or not 0 <= p < info.num_partitions:
                partitions.append(_partition(p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            elif topics.log(info.name, p).failures.offline:
                partitions.append(_partition(p, ErrorCode.KAFKA_STORAGE_ERROR))
            else:
                try:
                    partitions.append(_partition(p, ErrorCode.NONE, replicas.describe_producers(info.name, p)))
                except (OSError, KafkaStorageError):
                    partitions.append(_partition(p, ErrorCode.KAFKA_STORAGE_ERROR))
        out.append({"name": t.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": out}


HANDLERS = {DESCRIBE_PRODUCERS: handle_describe_producers}
