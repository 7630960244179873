"""Initialize/Read/Write/Delete ShareGroupState and ReadShareGroupStateSummary (83-87), served by
`broker.share_coordinator` (records durable before the response).

Inter-broker APIs: as Kafka, they need CLUSTER_ACTION on the cluster; otherwise every partition is answered
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.security.acl import AUTHORIZATION_ERRORS, CLUSTER_NAME, AclOperation, ResourceType
from broker.share_coordinator.runtime import ShareCoordinatorRuntime

INITIALIZE_SHARE_GROUP_STATE = 83
READ_SHARE_GROUP_STATE = 84
WRITE_SHARE_GROUP_STATE = 85
DELETE_SHARE_GROUP_STATE = 86
READ_SHARE_GROUP_STATE_SUMMARY = 87


class ShareStateApis(Apis):
    """The share coordinator's inter-broker APIs, served by it."""

    def __init__(self, share_coordinator: ShareCoordinatorRuntime) -> None:
        self._share_coordinator = share_coordinator

    async def _serve(self, operation: str, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            code, message = AUTHORIZATION_ERRORS[ResourceType.CLUSTER]
            return {"results": [{"topic_id": topic.topic_id, "partitions": [
                {"partition": p.partition, "error_code": code, "error_message": message} for p in topic.partitions]}
                for topic in req.topics]}
        return await self._share_coordinator.serve(operation, req, ctx.api_version)

    async def initialize_share_group_state(self, ctx: RequestContext, req: Request) -> Response:
        return await self._serve("initialize_share_group_state", ctx, req)

    async def read_share_group_state(self, ctx: RequestContext, req: Request) -> Response:
        return await self._serve("read_share_group_state", ctx, req)

    async def write_share_group_state(self, ctx: RequestContext, req: Request) -> Response:
        return await self._serve("write_share_group_state", ctx, req)

    async def delete_share_group_state(self, ctx: RequestContext, req: Request) -> Response:
        return await self._serve("delete_share_group_state", ctx, req)

    async def read_share_group_state_summary(self, ctx: RequestContext, req: Request) -> Response:
        return await self._serve("read_share_group_state_summary", ctx, req)

    HANDLERS = {
        INITIALIZE_SHARE_GROUP_STATE: initialize_share_group_state,
        READ_SHARE_GROUP_STATE: read_share_group_state,
        WRITE_SHARE_GROUP_STATE: write_share_group_state,
        DELETE_SHARE_GROUP_STATE: delete_share_group_state,
        READ_SHARE_GROUP_STATE_SUMMARY: read_share_group_state_summary,
    }
