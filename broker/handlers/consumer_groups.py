"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): thin wrappers over the group coordinator.

Authorization as Kafka (KIP-848): READ on the group and DESCRIBE on every subscribed topic name to heartbeat (a
subscribed regular expression resolves only to topics the client may DESCRIBE: consumer/regex.py);
DESCRIBE on the group to describe it, and a group whose assignments name a topic the client may not DESCRIBE is
answered TOPIC_AUTHORIZATION_FAILED without members.
"""

from __future__ import annotations

from typing import Any

from broker.context import RequestContext
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers.apis import Apis, Request, Response
from broker.handlers.groups import NO_AUTHORIZED_OPERATIONS
from broker.handlers.share_groups import client_host
from broker.pacing import Pacer
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69


class ConsumerGroupApis(Apis):
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848), over the group coordinator."""

    def __init__(self, groups: GroupCoordinatorRuntime) -> None:
        self._groups = groups

    async def heartbeat(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
        denied = sorted(n for n in set(req.subscribed_topic_names or ())
                        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, n))
        if denied:
            # Kafka 4.4 answers the code alone, without naming the topics
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
        response = await self._groups.consumer_group_heartbeat(
            req, ctx.api_version, ctx.client_id or "", client_host(ctx.connection.peer),
            principal=ctx.principal, host=ctx.connection.host)
        return {"throttle_time_ms": 0, **response}

    async def describe(self, ctx: RequestContext, req: Request) -> Response:
        allowed = [g for g in req.group_ids if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
        described = iter(await self._groups.consumer_group_describe(allowed) if allowed else [])
        groups = []
        checked: dict[str, dict[str, Any]] = {}  # a repeated id's copies share one entry: it is checked once
        # membership in a set: 100 000 distinct ids made the list's tests quadratic
        allowed_ids = set(allowed)
        pacer = Pacer()
        for gid in req.group_ids:
            await pacer.pace()
            if gid not in allowed_ids:
                groups.append({"group_id": gid, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)})
                continue
            g = next(described)
            if gid in checked:
                groups.append(checked[gid])
                continue
            topics: set[str] = set()
            for m in g.get("members") or ():
                for key in ("assignment", "target_assignment"):
                    topics.update(tp["topic_name"] for tp in (m.get(key) or {}).get("topic_partitions") or ()
                                  if tp.get("topic_name"))
                await pacer.pace()
            if any(not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in topics):
                g = {"group_id": gid, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                     "error_message": "The group has described topic(s) that the client is not authorized to describe.",
                     "members": []}
            g["authorized_operations"] = (ctx.authorized_operations(ResourceType.GROUP, gid)
                                          if req.include_authorized_operations and g.get("error_code") == 0
                                          else NO_AUTHORIZED_OPERATIONS)
            checked[gid] = g
            groups.append(g)
        return {"throttle_time_ms": 0, "groups": groups}

    HANDLERS = {CONSUMER_GROUP_HEARTBEAT: heartbeat, CONSUMER_GROUP_DESCRIBE: describe}
