"""OffsetForLeaderEpoch (api key 23, v2-v4): the end offset of a leader epoch (KIP-101, KIP-320).

Consumers use it to validate a position after a seek with a leader epoch or a leader change: the end offset of
the position's epoch tells them whether the log was truncated under them. As Kafka's KafkaApis: CLUSTER_ACTION on
the cluster (a broker) may ask about every topic, anyone else needs DESCRIBE on each topic (else
TOPIC_AUTHORIZATION_FAILED). ReplicaId (v3+) only tells a follower from a consumer: both are answered alike here.
"""

from __future__ import annotations

from broker.cluster.manager import TopicManager
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.replica_manager import NO_EPOCH, ReplicaManager
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

OFFSET_FOR_LEADER_EPOCH = 23


class LeaderEpochApis(Apis):
    """OffsetForLeaderEpoch, from the replica manager."""

    def __init__(self, topics: TopicManager, replicas: ReplicaManager) -> None:
        self._topics = topics
        self._replicas = replicas

    async def offset_for_leader_epoch(self, ctx: RequestContext, req: Request) -> Response:
        topics = self._topics
        replicas = self._replicas
        broker_peer = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME,
                                    audit=False)
        out = []
        for topic in req.topics:
            allowed = broker_peer or ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
            info = topics.registry.get(topic.topic)
            partitions = []
            for part in topic.partitions:
                if not allowed:
                    code, epoch, end = ErrorCode.TOPIC_AUTHORIZATION_FAILED, NO_EPOCH, NO_EPOCH
                elif info is None:
                    code, epoch, end = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_EPOCH, NO_EPOCH
                else:
                    code, epoch, end = replicas.end_offset_for_epoch(info, part.partition, part.current_leader_epoch,
                                                                     part.leader_epoch)
                partitions.append({"error_code": int(code), "partition": part.partition,
                                   "leader_epoch": epoch, "end_offset": end})
            out.append({"topic": topic.topic, "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": out}

    HANDLERS = {OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch}
