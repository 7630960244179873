"""ElectLeaders (43), AlterPartitionReassignments (45) and ListPartitionReassignments (46) on one node.

Kafka's controller answers these (ReplicationControlManager); here every partition has one replica, this node,
which is its preferred leader and always leads, so:
- a PREFERRED election is ELECTION_NOT_NEEDED (`hasPreferredLeader`), and so is an UNCLEAN one (`hasLeader`);
  with TopicPartitions null every partition is tried and those answers are left out (each topic listed with no
  partitions, as the controller does);
- a reassignment to [this node] changes nothing: success; an empty list, a duplicate or another node id is
  INVALID_REPLICA_ASSIGNMENT with the controller's message (no other broker is registered); cancelling (replicas
  null) is NO_REASSIGNMENT_IN_PROGRESS;
- no reassignment is ever ongoing: ListPartitionReassignments lists none.
ACLs as ControllerApis: ALTER on the cluster for the first two, DESCRIBE for the listing; a refused request gets
the request's error response (CLUSTER_AUTHORIZATION_FAILED at the top and for every partition).
"""

from __future__ import annotations

from typing import Any

from broker.cluster.manager import TopicManager
from broker.cluster.topics import TopicInfo
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.security.acl import AUTHORIZATION_ERRORS, CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
PREFERRED, UNCLEAN = 0, 1
_CLUSTER_DENIED = AUTHORIZATION_ERRORS[ResourceType.CLUSTER]
NOT_NEEDED = (int(ErrorCode.ELECTION_NOT_NEEDED), "Leader election not needed for topic partition.")


def _allowed(ctx: RequestContext, operation: AclOperation) -> bool:
    return ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def _partition_error(info: TopicInfo | None, topic: str, partition: int) -> tuple[int, str | None] | None:
    if info is None:
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"No such topic as {topic}"
    if not 0 <= partition < info.num_partitions:
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"No such partition as {topic}-{partition}"
    return None


# --- ElectLeaders ----------------------------------------------------------------------------------------------
def _elect_all_failed(req, code: int, message: str | None) -> dict:
    results = [{"topic": t.topic, "partition_result": [
        {"partition_id": p, "error_code": code, "error_message": message} for p in t.partitions]}
        for t in req.topic_partitions or ()]
    return {"throttle_time_ms": 0, "error_code": code, "replica_election_results": results}


# --- AlterPartitionReassignments -------------------------------------------------------------------------------
def _assignment_error(node_id: int, replicas: list[int]) -> str | None:
    """The controller's validateManualPartitionAssignment, with this node the only registered broker."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != node_id:
            return f"The manual partition assignment includes broker {broker_id}, but no such broker is registered."
        if broker_id == previous:
            return f"The manual partition assignment includes the broker {previous} more than once."
        previous = broker_id
    return None


def _reassignment_error(info: TopicInfo | None, topic: str, partition: int, replicas: list[int] | None,
                        node_id: int) -> tuple[int, str] | None:
    if info is None:
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"Unable to find a topic named {topic}."
    if not 0 <= partition < info.num_partitions:
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"Unable to find partition {topic}:{partition}."
    if replicas is None:
        return int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), "No partition reassignment is in progress."
    message = _assignment_error(node_id, replicas)
    if message is not None:
        return int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), message
    return None  # [this node]: the partition is already there


class ElectionApis(Apis):
    """ElectLeaders and the partition reassignment APIs: one node leads every partition."""

    def __init__(self, topics: TopicManager, node_id: int) -> None:
        self._topics = topics
        self._node_id = node_id

    async def elect_leaders(self, ctx: RequestContext, req: Request) -> Response:
        if not _allowed(ctx, AclOperation.ALTER):
            return _elect_all_failed(req, *_CLUSTER_DENIED)
        election_type = req.election_type if ctx.api_version >= 1 else PREFERRED
        if election_type not in (PREFERRED, UNCLEAN):
            return _elect_all_failed(req, int(ErrorCode.INVALID_REQUEST), f"Unknown election type {election_type}")
        registry = self._topics.registry
        results: list[dict[str, Any]] = []
        if req.topic_partitions is None:
            # every partition already has its (preferred) leader: nothing to report but the topics
            results = [{"topic": info.name, "partition_result": []} for info in registry.all()]
        else:
            for topic in req.topic_partitions:
                info = registry.get(topic.topic)
                partitions = []
                for partition in topic.partitions:
                    error = _partition_error(info, topic.topic, partition) or NOT_NEEDED
                    partitions.append({"partition_id": partition, "error_code": error[0], "error_message": error[1]})
                results.append({"topic": topic.topic, "partition_result": partitions})
        return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": results}

    async def alter_partition_reassignments(self, ctx: RequestContext, req: Request) -> Response:
        version = ctx.api_version
        allow_rf_change = req.allow_replication_factor_change if version >= 1 else True
        if not _allowed(ctx, AclOperation.ALTER):
            code, message = _CLUSTER_DENIED
            return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change,
                    "error_code": code, "error_message": message, "responses": [
                        {"name": t.name, "partitions": [
                            {"partition_index": p.partition_index, "error_code": code,
                             "error_message": message} for p in t.partitions]}
                        for t in req.topics]}
        registry = self._topics.registry
        node_id = self._node_id
        responses = []
        for topic in req.topics:
            info = registry.get(topic.name)
            partitions = []
            for target in topic.partitions:
                error = _reassignment_error(info, topic.name, target.partition_index, target.replicas,
                                            node_id)
                error_code, error_message = error if error is not None else (0, None)
                partitions.append({"partition_index": target.partition_index, "error_code": error_code,
                                   "error_message": error_message})
            responses.append({"name": topic.name, "partitions": partitions})
        return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change, "error_code": 0,
                "error_message": None, "responses": responses}

    # --- ListPartitionReassignments --------------------------------------------------------------------------------
    async def list_partition_reassignments(self, ctx: RequestContext, req: Request) -> Response:
        if not _allowed(ctx, AclOperation.DESCRIBE):
            code, message = _CLUSTER_DENIED
            topics = [{"name": t.name, "partitions": [
                {"partition_index": p, "replicas": [], "adding_replicas": [], "removing_replicas": []}
                for p in t.partition_indexes]} for t in req.topics or ()]
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "topics": topics}
        # nothing is ever being reassigned on one node (the controller lists only reassigning partitions)
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}

    HANDLERS = {
        ELECT_LEADERS: elect_leaders,
        ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments,
        LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments,
    }
