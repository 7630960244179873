"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): thin wrappers over the group coordinator."""

from __future__ import annotations

from typing import Any

SHARE_GROUP_HEARTBEAT = 76
SHARE_GROUP_DESCRIBE = 77


def client_host(peer: str) -> str:
    """Kafka reports the client address as InetAddress.toString(): "/127.0.0.1"."""
    host = peer.rsplit(":", 1)[0] if peer.count(":") == 1 or peer.startswith("[") else peer
    return "/" + host.strip("[]")


async def handle_heartbeat(ctx, req) -> dict[str, Any]:
    response = await ctx.broker.group_coordinator.share_heartbeat(req, ctx.client_id or "", client_host(ctx.connection.peer))
    return {"throttle_time_ms": 0, **response}


async def handle_describe(ctx, req) -> dict[str, Any]:
    groups = await ctx.broker.group_coordinator.share_describe(list(req.group_ids))
    return {"throttle_time_ms": 0, "groups": groups}


HANDLERS = {SHARE_GROUP_HEARTBEAT: handle_heartbeat, SHARE_GROUP_DESCRIBE: handle_describe}
