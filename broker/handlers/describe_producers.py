"""DescribeProducers (api key 61, v0): the active producers of partitions, from their producer and transaction
state (Kafka's ReplicaManager.activeProducerState). As Kafka's KafkaApis, a topic with an illegal name, one the
client may not READ and one that does not exist answer each of their partitions with the topic's error and its
message; a partition past the topic's count answers UNKNOWN_TOPIC_OR_PARTITION without one."""

from __future__ import annotations

from broker.cluster.manager import TopicManager
from broker.cluster.topics import TopicError, validate_topic_name
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.log.dir_failure import KafkaStorageError
from broker.pacing import Pacer
from broker.replica_manager import ReplicaManager
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

DESCRIBE_PRODUCERS = 61


def _partition(index: int, code: ErrorCode, producers=(), message: str | None = None) -> dict:
    return {"partition_index": index, "error_code": int(code), "error_message": message, "active_producers": [
        {"producer_id": d.producer_id, "producer_epoch": d.producer_epoch, "last_sequence": d.last_sequence,
         "last_timestamp": d.last_timestamp, "coordinator_epoch": d.coordinator_epoch,
         "current_txn_start_offset": d.current_txn_start_offset} for d in producers]}


class DescribeProducersApis(Apis):
    """DescribeProducers, from the replica manager's producer state."""

    def __init__(self, topics: TopicManager, replicas: ReplicaManager) -> None:
        self._topics = topics
        self._replicas = replicas

    def _topic_error(self, ctx, name: str) -> TopicError | None:
        """Why a topic's partitions are not described, with Kafka's message, checked in Kafka's order: an
        illegal name, then READ, then a topic that does not exist (a partition past its count has no message).
        """
        try:
            validate_topic_name(name)
        except TopicError as e:
            return e
        if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
            return TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
        if self._topics.registry.get(name) is None:
            return TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return None

    async def describe_producers(self, ctx: RequestContext, req: Request) -> Response:
        topics = self._topics
        replicas = self._replicas
        refused = {t.name: self._topic_error(ctx, t.name) for t in req.topics}
        wanted = [(info.name, p) for t in req.topics if refused[t.name] is None and (info := topics.registry.get(t.name))
                  for p in t.partition_indexes if 0 <= p < info.num_partitions]
        await replicas.ensure_loaded(wanted)  # off the loop on a partition's first use after a start
        out = []
        pacer = Pacer()
        for t in req.topics:
            info = topics.registry.get(t.name)
            partitions = []
            error = refused[t.name]
            for p in t.partition_indexes:
                await pacer.pace()  # thousands of partitions: yield to the loop between them
                if error is not None:
                    partitions.append(_partition(p, error.code, message=error.message))
                elif info is None or not 0 <= p < info.num_partitions or (plog := topics.find_log(info.name, p)) is None:
                    # (no log: the topic was deleted while this request yielded to the loop)
                    partitions.append(_partition(p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                elif plog.failures.offline:
                    partitions.append(_partition(p, ErrorCode.KAFKA_STORAGE_ERROR))
                else:
                    try:
                        partitions.append(_partition(p, ErrorCode.NONE, replicas.describe_producers(info.name, p)))
                    except (OSError, KafkaStorageError):
                        partitions.append(_partition(p, ErrorCode.KAFKA_STORAGE_ERROR))
            out.append({"name": t.name, "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": out}

    HANDLERS = {DESCRIBE_PRODUCERS: describe_producers}
