"""Initialize/Read/Write/Delete ShareGroupState and ReadShareGroupStateSummary (83-87), served by
`broker.share_coordinator` (records durable before the response).

Inter-broker APIs: as Kafka, they need CLUSTER_ACTION on the cluster; otherwise every partition is answered
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from broker.security.acl import AUTHORIZATION_ERRORS, CLUSTER_NAME, AclOperation, ResourceType

OPERATIONS = {
    83: "initialize_share_group_state",
    84: "read_share_group_state",
    85: "write_share_group_state",
    86: "delete_share_group_state",
    87: "read_share_group_state_summary",
}


def _handler(operation: str):
    async def handle(ctx, req) -> dict[str, Any]:
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            code, message = AUTHORIZATION_ERRORS[ResourceType.CLUSTER]
            return {"results": [{"topic_id": topic.topic_id, "partitions": [
                {"partition": p.partition, "error_code": code, "error_message": message} for p in topic.partitions]}
                for topic in req.topics]}
        return await ctx.broker.share_coordinator.serve(operation, req, ctx.api_version)

    handle.__name__ = f"handle_{operation}"
    return handle


HANDLERS = {api_key: _handler(operation) for api_key, operation in OPERATIONS.items()}
