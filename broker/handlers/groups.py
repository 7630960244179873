"""Classic group membership and group administration: thin wrappers over the group coordinator.

JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16),
DeleteGroups (42). Version differences (v0 rebalance timeout, single-member LeaveGroup before v3, ...) are
settled here; the rules live in `broker.groups`.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.share_groups import client_host
from protocol.errors import ErrorCode

JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42

NO_AUTHORIZED_OPERATIONS = -2147483648
# READ, DELETE, DESCRIBE: every operation on a GROUP resource (no authorizer, as Kafka reports it).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)

_ERROR_MESSAGES = {
    ErrorCode.GROUP_ID_NOT_FOUND: "Group {} not found.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
}


async def handle_join_group(ctx, req) -> dict[str, Any]:
    request = dict(req)
    if ctx.api_version == 0:
        request["rebalance_timeout_ms"] = req.session_timeout_ms  # v0 has one timeout for both
    response = await ctx.broker.group_coordinator.join_group(
        request, ctx.api_version, ctx.client_id or "", client_host(ctx.connection.peer))
    response = dict(response)
    if ctx.api_version < 7 and response.get("protocol_name") is None:
        response["protocol_name"] = ""  # not nullable before v7
    if response.get("leader") is None:
        response["leader"] = ""
    return {"throttle_time_ms": 0, **response}


async def handle_sync_group(ctx, req) -> dict[str, Any]:
    response = await ctx.broker.group_coordinator.sync_group(req)
    return {"throttle_time_ms": 0, **response}


async def handle_heartbeat(ctx, req) -> dict[str, Any]:
    response = await ctx.broker.group_coordinator.heartbeat(req)
    return {"throttle_time_ms": 0, **response}


async def handle_leave_group(ctx, req) -> dict[str, Any]:
    if ctx.api_version < 3:
        members = [{"member_id": req.member_id, "group_instance_id": None, "reason": None}]
    else:
        members = list(req.members)
    response = await ctx.broker.group_coordinator.leave_group(req.group_id, members)
    code = response.get("error_code", 0)
    if ctx.api_version < 3 and code == 0:
        # One member, no member list: its error is the answer.
        code = next((m["error_code"] for m in response.get("members", ()) if m["error_code"]), 0)
    return {"throttle_time_ms": 0, "error_code": code, "members": response.get("members", [])}


async def handle_list_groups(ctx, req) -> dict[str, Any]:
    code, groups = await ctx.broker.group_coordinator.list_groups(req.get("states_filter") or (),
                                                                  req.get("types_filter") or ())
    return {"throttle_time_ms": 0, "error_code": code, "groups": groups}


async def handle_describe_groups(ctx, req) -> dict[str, Any]:
    groups = await ctx.broker.group_coordinator.describe_groups(list(req.groups), ctx.api_version)
    operations = GROUP_OPERATIONS if req.get("include_authorized_operations") else NO_AUTHORIZED_OPERATIONS
    for g in groups:
        g["authorized_operations"] = operations if g.get("error_code") == 0 else NO_AUTHORIZED_OPERATIONS
    return {"throttle_time_ms": 0, "groups": groups}


async def handle_delete_groups(ctx, req) -> dict[str, Any]:
    names = list(req.groups_names)
    results = await ctx.broker.group_coordinator.delete_groups(names)
    out = []
    for gid in dict.fromkeys(names):
        code = results.get(gid, int(ErrorCode.GROUP_ID_NOT_FOUND))
        message = _ERROR_MESSAGES.get(ErrorCode(code)) if code else None
        out.append({"group_id": gid, "error_code": code,
                    "error_message": message.format(gid) if message else None})
    return {"throttle_time_ms": 0, "results": out}


HANDLERS = {
    JOIN_GROUP: handle_join_group,
    HEARTBEAT: handle_heartbeat,
    LEAVE_GROUP: handle_leave_group,
    SYNC_GROUP: handle_sync_group,
    DESCRIBE_GROUPS: handle_describe_groups,
    LIST_GROUPS: handle_list_groups,
    DELETE_GROUPS: handle_delete_groups,
}
