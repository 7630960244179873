"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89): thin wrappers over the group coordinator (KIP-1071).

Authorization as Kafka's KafkaApis: READ on the group to heartbeat, and DESCRIBE on every topic a joining member's
topology names; DESCRIBE on the group to describe it.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.share_groups import client_host
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

STREAMS_GROUP_HEARTBEAT = 88
STREAMS_GROUP_DESCRIBE = 89


def _topology_topics(topology: Any) -> set[str]:
    names: set[str] = set()
    for s in topology.subtopologies:
        names.update(s.source_topics)
        names.update(s.repartition_sink_topics)
        names.update(t.name for t in s.state_changelog_topics)
        names.update(t.name for t in s.repartition_source_topics)
    return names


async def handle_heartbeat(ctx, req) -> dict[str, Any]:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "status": []}
    if req.topology is not None and any(not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
                                        for name in _topology_topics(req.topology)):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "status": []}
    response = await ctx.broker.group_coordinator.streams_group_heartbeat(
        req, ctx.api_version, ctx.client_id or "", client_host(ctx.connection.peer))
    return {"throttle_time_ms": 0, **response}


async def handle_describe(ctx, req) -> dict[str, Any]:
    allowed = [g for g in req.group_ids if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
    described = iter(await ctx.broker.group_coordinator.streams_group_describe(allowed) if allowed else [])
    allowed_ids = set(allowed)
    groups = []
    for gid in req.group_ids:
        if gid not in allowed_ids:
            groups.append({"group_id": gid, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)})
            continue
        group = dict(next(described))
        if group.get("error_code", 0) == 0 and req.include_authorized_operations:
            group["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, gid)
        groups.append(group)
    return {"throttle_time_ms": 0, "groups": groups}


HANDLERS = {STREAMS_GROUP_HEARTBEAT: handle_heartbeat, STREAMS_GROUP_DESCRIBE: handle_describe}
