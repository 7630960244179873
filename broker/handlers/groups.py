"""Classic group membership and group administration: thin wrappers over the group coordinator.

JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16),
DeleteGroups (42). Version differences (v0 rebalance timeout, single-member LeaveGroup before v3, ...) are
settled here; the rules live in `broker.groups`.

Authorization as Kafka's KafkaApis: READ on the group to join, sync, heartbeat or leave; DESCRIBE to describe it;
DELETE to delete it; ListGroups lists every group for DESCRIBE on the cluster, else only the groups the client
may DESCRIBE.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers.apis import Apis, Request, Response
from broker.handlers.share_groups import client_host
from broker.pacing import Pacer
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42

NO_AUTHORIZED_OPERATIONS = -2147483648
DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _may(ctx, operation: AclOperation, group_id: str, audit: bool = True) -> bool:
    return ctx.authorize(operation, ResourceType.GROUP, group_id, audit=audit)


class GroupApis(Apis):
    """The classic group APIs and group administration, over the group coordinator."""

    def __init__(self, groups: GroupCoordinatorRuntime) -> None:
        self._groups = groups

    async def join_group(self, ctx: RequestContext, req: Request) -> Response:
        if not _may(ctx, AclOperation.READ, req.group_id):
            return {"throttle_time_ms": 0, "error_code": DENIED, "generation_id": -1, "leader": "", "member_id": "",
                    "protocol_name": None if ctx.api_version >= 7 else "", "members": []}
        request = dict(req)
        if ctx.api_version == 0:
            request["rebalance_timeout_ms"] = req.session_timeout_ms  # v0 has one timeout for both
        response = await self._groups.join_group(
            request, ctx.api_version, ctx.client_id or "", client_host(ctx.connection.peer))
        response = dict(response)
        if ctx.api_version < 7 and response.get("protocol_name") is None:
            response["protocol_name"] = ""  # not nullable before v7
        if response.get("leader") is None:
            response["leader"] = ""
        return {"throttle_time_ms": 0, **response}

    async def sync_group(self, ctx: RequestContext, req: Request) -> Response:
        if ctx.api_version >= 5 and (req.get("protocol_type") is None or req.get("protocol_name") is None):
            # as Kafka: from v5 both are mandatory, checked before authorization
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL), "assignment": b""}
        if not _may(ctx, AclOperation.READ, req.group_id):
            return {"throttle_time_ms": 0, "error_code": DENIED, "assignment": b""}
        response = await self._groups.sync_group(req)
        return {"throttle_time_ms": 0, **response}

    async def heartbeat(self, ctx: RequestContext, req: Request) -> Response:
        if not _may(ctx, AclOperation.READ, req.group_id):
            return {"throttle_time_ms": 0, "error_code": DENIED}
        response = await self._groups.heartbeat(req)
        return {"throttle_time_ms": 0, **response}

    async def leave_group(self, ctx: RequestContext, req: Request) -> Response:
        if not _may(ctx, AclOperation.READ, req.group_id):
            return {"throttle_time_ms": 0, "error_code": DENIED, "members": []}
        if ctx.api_version < 3:
            members = [{"member_id": req.member_id, "group_instance_id": None, "reason": None}]
        else:
            members = list(req.members)
        response = await self._groups.leave_group(req.group_id, members)
        code = response.get("error_code", 0)
        if ctx.api_version < 3 and code == 0:
            # One member, no member list: its error is the answer.
            code = next((m["error_code"] for m in response.get("members", ()) if m["error_code"]), 0)
        return {"throttle_time_ms": 0, "error_code": code, "members": response.get("members", [])}

    async def list_groups(self, ctx: RequestContext, req: Request) -> Response:
        code, groups = await self._groups.list_groups(req.get("states_filter") or (),
                                                      req.get("types_filter") or ())
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False):
            groups = [g for g in groups if _may(ctx, AclOperation.DESCRIBE, g["group_id"], audit=False)]
        return {"throttle_time_ms": 0, "error_code": code, "groups": groups}

    async def describe_groups(self, ctx: RequestContext, req: Request) -> Response:
        allowed = [g for g in req.groups if _may(ctx, AclOperation.DESCRIBE, g)]
        # membership in a set, not the list: distinct ids by the 100 000 stay linear
        allowed_ids = set(allowed)
        refused = [{"group_id": g, "error_code": DENIED, "group_state": "", "protocol_type": "", "protocol_data": "",
                    "members": [], "authorized_operations": NO_AUTHORIZED_OPERATIONS}
                   for g in req.groups if g not in allowed_ids]
        groups = await self._groups.describe_groups(allowed, ctx.api_version) if allowed else []
        seen: set[int] = set()  # a repeated id's copies share one entry: it is completed once
        pacer = Pacer()
        for g in groups:
            await pacer.pace()
            if id(g) in seen:
                continue
            seen.add(id(g))
            g["authorized_operations"] = NO_AUTHORIZED_OPERATIONS
            if g.get("error_code") == 0 and req.get("include_authorized_operations"):
                g["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, g["group_id"])
        return {"throttle_time_ms": 0, "groups": refused + groups}

    async def delete_groups(self, ctx: RequestContext, req: Request) -> Response:
        names = list(req.groups_names)
        allowed = [g for g in dict.fromkeys(names) if _may(ctx, AclOperation.DELETE, g)]
        allowed_ids = set(allowed)
        results = await self._groups.delete_groups(allowed) if allowed else {}
        out = []
        for gid in dict.fromkeys(names):
            code = results.get(gid, int(ErrorCode.GROUP_ID_NOT_FOUND)) if gid in allowed_ids else DENIED
            # Kafka's v3 message stays null for these errors (it has one only for streams topology errors)
            out.append({"group_id": gid, "error_code": code, "error_message": None})
        return {"throttle_time_ms": 0, "results": out}

    HANDLERS = {
        JOIN_GROUP: join_group,
        HEARTBEAT: heartbeat,
        LEAVE_GROUP: leave_group,
        SYNC_GROUP: sync_group,
        DESCRIBE_GROUPS: describe_groups,
        LIST_GROUPS: list_groups,
        DELETE_GROUPS: delete_groups,
    }
