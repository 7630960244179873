"""DescribeQuorum (55): the KRaft quorum of one node, this one, voter and leader of `__cluster_metadata`.

As KafkaRaftClient answers a leader's DescribeQuorum: the request must name exactly `__cluster_metadata`
partition 0 (else UNKNOWN_TOPIC_OR_PARTITION on each partition asked for); the leader's own replica state has
its log end offset and the current time as both timestamps; no observers (no other broker fetches the journal).
The high watermark is the metadata journal's end offset: a journal record is applied only after its fsync, so
everything in it is committed (one voter is the majority). The leader epoch is 1, the epoch a single voter
elects itself in on its first start: Shoal runs no elections, and Kafka's bump on each restart tells a client
nothing here. The directory id is Kafka's NO_DIRECTORY_ID (a static quorum, kraft.version 0), and the voter's
endpoints (v2) are the broker's advertised listeners: the one node is also the controller.
Kafka forwards this API from the broker listener to the controller, which checks DESCRIBE on the cluster.
"""

from __future__ import annotations

import time
import uuid

from broker.cluster.topics import CLUSTER_METADATA_TOPIC
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.log import PartitionLog
from broker.node import Endpoints
from broker.security.acl import AUTHORIZATION_ERRORS, CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

DESCRIBE_QUORUM = 55
LEADER_EPOCH = 1
NO_DIRECTORY_ID = uuid.UUID(int=0)
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


def _names_the_journal(req) -> bool:
    return (len(req.topics) == 1 and req.topics[0].topic_name == CLUSTER_METADATA_TOPIC
            and len(req.topics[0].partitions) == 1 and req.topics[0].partitions[0].partition_index == 0)


class QuorumApis(Apis):
    """DescribeQuorum, from the metadata journal."""

    def __init__(self, metadata_log: PartitionLog, endpoints: Endpoints) -> None:
        self._metadata_log = metadata_log
        self._endpoints = endpoints

    async def describe_quorum(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            code, message = AUTHORIZATION_ERRORS[ResourceType.CLUSTER]
            return {"error_code": code, "error_message": message, "topics": [], "nodes": []}
        if not _names_the_journal(req):
            return {"error_code": 0, "error_message": None, "nodes": [], "topics": [
                {"topic_name": t.topic_name, "partitions": [
                    {"partition_index": p.partition_index, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                     "error_message": UNKNOWN_PARTITION_MESSAGE, "leader_id": 0, "leader_epoch": 0,
                     "high_watermark": 0, "current_voters": [], "observers": []} for p in t.partitions]}
                for t in req.topics]}
        node_id = self._endpoints.node_id
        end_offset = self._metadata_log.log_end_offset
        now_ms = int(time.time() * 1000)
        voter = {"replica_id": node_id, "replica_directory_id": NO_DIRECTORY_ID, "log_end_offset": end_offset,
                 "last_fetch_timestamp": now_ms, "last_caught_up_timestamp": now_ms}
        return {
            "error_code": 0,
            "error_message": None,
            "topics": [{"topic_name": CLUSTER_METADATA_TOPIC, "partitions": [{
                "partition_index": 0, "error_code": 0, "error_message": None, "leader_id": node_id,
                "leader_epoch": LEADER_EPOCH, "high_watermark": end_offset, "current_voters": [voter],
                "observers": []}]}],
            "nodes": [{"node_id": node_id, "listeners": [
                {"name": name, "host": node.host, "port": node.port}
                for name, node in self._endpoints.nodes.items()]}],
        }

    HANDLERS = {DESCRIBE_QUORUM: describe_quorum}
