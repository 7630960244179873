"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): thin wrappers over the group coordinator.

Authorization as Kafka (KIP-932): READ on the group to heartbeat, and DESCRIBE on every subscribed topic;
DESCRIBE on the group to describe it, and a group whose assignment names a topic the client may not DESCRIBE is
answered TOPIC_AUTHORIZATION_FAILED without members.
"""

from __future__ import annotations

from typing import Any

from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

SHARE_GROUP_HEARTBEAT = 76
SHARE_GROUP_DESCRIBE = 77


def client_host(peer: str) -> str:
    """Kafka reports the client address as InetAddress.toString(): "/127.0.0.1"."""
    host = peer.rsplit(":", 1)[0] if peer.count(":") == 1 or peer.startswith("[") else peer
    return "/" + host.strip("[]")


async def handle_heartbeat(ctx, req) -> dict[str, Any]:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    if any(not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
           for name in set(req.subscribed_topic_names or ())):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
    response = await ctx.broker.group_coordinator.share_heartbeat(req, ctx.client_id or "", client_host(ctx.connection.peer))
    return {"throttle_time_ms": 0, **response}


async def handle_describe(ctx, req) -> dict[str, Any]:
    allowed = [g for g in req.group_ids if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
    refused = [{"group_id": g, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
               for g in req.group_ids if g not in allowed]
    described = await ctx.broker.group_coordinator.share_describe(allowed) if allowed else []
    groups = []
    for group in described:
        if group.get("error_code", 0) == 0 and req.include_authorized_operations:
            group["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, group["group_id"])
        topics = {tp["topic_name"] for m in group.get("members") or () for tp in _assigned(m) if tp.get("topic_name")}
        if any(not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in topics):
            group = {"group_id": group["group_id"], "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                     "error_message": "The group has described topic(s) that the client is not authorized to "
                                      "describe.", "members": []}
        groups.append(group)
    return {"throttle_time_ms": 0, "groups": refused + groups}


def _assigned(member) -> list:
    assignment = member.get("assignment") or {}
    return list(assignment.get("topic_partitions") or ())


HANDLERS = {SHARE_GROUP_HEARTBEAT: handle_heartbeat, SHARE_GROUP_DESCRIBE: handle_describe}
