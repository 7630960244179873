"""ShareGroupHeartbeat (76), ShareGroupDescribe (77), DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91)
and DeleteShareGroupOffsets (92): thin wrappers over the group coordinator.

Authorization as Kafka's KafkaApis (KIP-932): READ on the group to heartbeat, and DESCRIBE on every subscribed
topic; DESCRIBE on the group to describe it, and a group whose assignment names a topic the client may not
DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without members. Offsets: DESCRIBE group + DESCRIBE topics to
describe them (topics not DESCRIBE-able are refused, or left out of an all-topics answer), READ group + READ
topics to alter them, DELETE group + READ topics to delete them.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from broker.context import RequestContext
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers.apis import Apis, Request, Response
from broker.pacing import Pacer
from broker.security.acl import AUTHORIZATION_ERRORS, AclOperation, ResourceType
from protocol.errors import ErrorCode

SHARE_GROUP_HEARTBEAT = 76
SHARE_GROUP_DESCRIBE = 77
DESCRIBE_SHARE_GROUP_OFFSETS = 90
ALTER_SHARE_GROUP_OFFSETS = 91
DELETE_SHARE_GROUP_OFFSETS = 92

GROUP_DENIED = AUTHORIZATION_ERRORS[ResourceType.GROUP]
TOPIC_DENIED = AUTHORIZATION_ERRORS[ResourceType.TOPIC]
ZERO_UUID = UUID(int=0)


def valid_member_id(member_id: str | None) -> bool:
    """Kafka's KafkaApis.isMemberIdValid for the share APIs: a member id of 1 to 36 characters."""
    return member_id is not None and 0 < len(member_id) <= 36


def client_host(peer: str) -> str:
    """Kafka reports the client address as InetAddress.toString(): "/127.0.0.1"."""
    host = peer.rsplit(":", 1)[0] if peer.count(":") == 1 or peer.startswith("[") else peer
    return "/" + host.strip("[]")


def _assigned(member) -> list:
    assignment = member.get("assignment") or {}
    return list(assignment.get("topic_partitions") or ())


class ShareGroupApis(Apis):
    """ShareGroupHeartbeat, ShareGroupDescribe and the share-group offsets APIs, over the group
    coordinator."""

    def __init__(self, groups: GroupCoordinatorRuntime) -> None:
        self._groups = groups

    async def heartbeat(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
        if not valid_member_id(req.member_id):
            # Kafka checks this before the group coordinator, and its error response carries no message.
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_REQUEST)}
        if any(not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
               for name in set(req.subscribed_topic_names or ())):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
        response = await self._groups.share_heartbeat(req, ctx.client_id or "",
                                                      client_host(ctx.connection.peer))
        return {"throttle_time_ms": 0, **response}

    async def describe(self, ctx: RequestContext, req: Request) -> Response:
        allowed = [g for g in req.group_ids if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
        allowed_ids = set(allowed)  # membership in a set: distinct ids by the 100 000 stay linear
        refused = [{"group_id": g, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
                   for g in req.group_ids if g not in allowed_ids]
        described = await self._groups.share_describe(allowed) if allowed else []
        groups = []
        checked: dict[int, dict[str, Any]] = {}  # a repeated id's copies share one entry: it is checked once
        pacer = Pacer()
        for group in described:
            if id(group) in checked:
                groups.append(checked[id(group)])
                continue
            original = group
            if group.get("error_code", 0) == 0 and req.include_authorized_operations:
                group["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP,
                                                                           group["group_id"])
            topics: set[str] = set()
            for m in group.get("members") or ():
                topics.update(tp["topic_name"] for tp in _assigned(m) if tp.get("topic_name"))
                await pacer.pace()
            if any(not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in topics):
                group = {"group_id": group["group_id"],
                         "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                         "error_message": "The group has described topic(s) that the client is not authorized "
                                          "to describe.", "members": []}
            checked[id(original)] = group
            groups.append(group)
        # Kafka answers invalid (empty) group ids before the groups it looked up.
        groups.sort(key=lambda g: g["group_id"] != "")
        return {"throttle_time_ms": 0, "groups": refused + groups}

    async def describe_offsets(self, ctx: RequestContext, req: Request) -> Response:
        coordinator = self._groups
        groups = []
        for group in req.groups:
            gid = group.group_id
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, gid):
                groups.append({"group_id": gid, "topics": [], "error_code": GROUP_DENIED[0],
                               "error_message": None})  # Kafka's refusal has no message
                continue
            if group.topics is None:
                answer = await coordinator.describe_share_offsets(gid, None)
                # Topics the client may not describe are left out of an all-topics answer.
                answer["topics"] = [t for t in answer["topics"]
                                    if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic_name"], audit=False)]
                groups.append(answer)
                continue
            allowed = [(t.topic_name, list(t.partitions)) for t in group.topics
                       if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic_name)]
            allowed_names = {name for name, _ in allowed}
            refused = [{"topic_name": t.topic_name, "topic_id": ZERO_UUID, "partitions": [
                {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": TOPIC_DENIED[0],
                 "error_message": TOPIC_DENIED[1]} for p in t.partitions]}
                for t in group.topics if t.topic_name not in allowed_names]
            answer = await coordinator.describe_share_offsets(gid, allowed) if allowed else {
                "group_id": gid, "topics": [], "error_code": 0, "error_message": None}
            answer["topics"] = answer["topics"] + refused
            groups.append(answer)
        return {"throttle_time_ms": 0, "groups": groups}

    async def alter_offsets(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
            return {"throttle_time_ms": 0, "error_code": GROUP_DENIED[0], "error_message": GROUP_DENIED[1],
                    "responses": []}
        allowed, refused = [], []
        for topic in req.topics:
            if ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
                allowed.append((topic.topic_name, [(p.partition_index, p.start_offset) for p in topic.partitions]))
            else:
                refused.append({"topic_name": topic.topic_name, "topic_id": ZERO_UUID, "partitions": [
                    {"partition_index": p.partition_index, "error_code": TOPIC_DENIED[0], "error_message": TOPIC_DENIED[1]}
                    for p in topic.partitions]})
        answer = await self._groups.alter_share_offsets(req.group_id, allowed) if allowed else {
            "error_code": 0, "error_message": None, "responses": []}
        return {"throttle_time_ms": 0, **answer, "responses": answer["responses"] + refused}

    async def delete_offsets(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, req.group_id):
            return {"throttle_time_ms": 0, "error_code": GROUP_DENIED[0], "error_message": GROUP_DENIED[1],
                    "responses": []}
        names = list(dict.fromkeys(t.topic_name for t in req.topics))
        allowed = [n for n in names if ctx.authorize(AclOperation.READ, ResourceType.TOPIC, n)]
        allowed_names = set(allowed)
        refused = [{"topic_name": n, "topic_id": ZERO_UUID, "error_code": TOPIC_DENIED[0], "error_message": TOPIC_DENIED[1]}
                   for n in names if n not in allowed_names]
        answer = await self._groups.delete_share_offsets(req.group_id, allowed) if allowed else {
            "error_code": 0, "error_message": None, "responses": []}
        return {"throttle_time_ms": 0, **answer, "responses": answer["responses"] + refused}

    HANDLERS = {
        SHARE_GROUP_HEARTBEAT: heartbeat,
        SHARE_GROUP_DESCRIBE: describe,
        DESCRIBE_SHARE_GROUP_OFFSETS: describe_offsets,
        ALTER_SHARE_GROUP_OFFSETS: alter_offsets,
        DELETE_SHARE_GROUP_OFFSETS: delete_offsets,
    }
