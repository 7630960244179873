"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): thin wrappers over the group coordinator."""

from __future__ import annotations

from typing import Any

from broker.handlers.groups import GROUP_OPERATIONS, NO_AUTHORIZED_OPERATIONS
from broker.handlers.share_groups import client_host

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69


async def handle_heartbeat(ctx, req) -> dict[str, Any]:
    response = await ctx.broker.group_coordinator.consumer_group_heartbeat(
        req, ctx.api_version, ctx.client_id or "", client_host(ctx.connection.peer))
    return {"throttle_time_ms": 0, **response}


async def handle_describe(ctx, req) -> dict[str, Any]:
    groups = await ctx.broker.group_coordinator.consumer_group_describe(list(req.group_ids))
    operations = GROUP_OPERATIONS if req.include_authorized_operations else NO_AUTHORIZED_OPERATIONS
    for g in groups:
        g["authorized_operations"] = operations if g.get("error_code") == 0 else NO_AUTHORIZED_OPERATIONS
    return {"throttle_time_ms": 0, "groups": groups}


HANDLERS = {CONSUMER_GROUP_HEARTBEAT: handle_heartbeat, CONSUMER_GROUP_DESCRIBE: handle_describe}
