"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89): thin wrappers over the group coordinator (KIP-1071).

As Kafka's KafkaApis: READ on the group to heartbeat; a joining member's topology may not name Kafka's internal
topics nor invalid topic names (STREAMS_INVALID_TOPOLOGY), and needs DESCRIBE on every topic it names; the
internal topics the group is missing are created only with CREATE on the cluster or on each topic, the others
named in the answer's status. DESCRIBE on the group to describe it.
"""

from __future__ import annotations

from typing import Any

from broker.cluster.topics import INTERNAL_TOPICS, TopicError, validate_topic_name
from broker.context import RequestContext
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers.apis import Apis, Request, Response
from broker.handlers.share_groups import client_host
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

STREAMS_GROUP_HEARTBEAT = 88
STREAMS_GROUP_DESCRIBE = 89


def _topology_topics(topology: Any) -> list[str]:
    """The topics a topology names, in Kafka's order (per subtopology: sources, repartition sinks, repartition
    sources, changelogs), each once."""
    names: dict[str, None] = {}
    for s in topology.subtopologies:
        names.update(dict.fromkeys(s.source_topics))
        names.update(dict.fromkeys(s.repartition_sink_topics))
        names.update(dict.fromkeys(t.name for t in s.repartition_source_topics))
        names.update(dict.fromkeys(t.name for t in s.state_changelog_topics))
    return list(names)


def _valid(name: str) -> bool:
    try:
        validate_topic_name(name)
    except TopicError:
        return False
    return True


def _invalid_topology(message: str) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(ErrorCode.STREAMS_INVALID_TOPOLOGY), "error_message": message,
            "status": []}


class StreamsGroupApis(Apis):
    """StreamsGroupHeartbeat and StreamsGroupDescribe, over the group coordinator."""

    def __init__(self, groups: GroupCoordinatorRuntime) -> None:
        self._groups = groups

    async def heartbeat(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                    "status": []}
        if req.topology is not None:
            topics = _topology_topics(req.topology)
            prohibited = [t for t in topics if t in INTERNAL_TOPICS]
            if prohibited:
                return _invalid_topology(f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka Streams "
                                         "topology is prohibited.")
            invalid = [t for t in topics if not _valid(t)]
            if invalid:
                return _invalid_topology(f"Topic names {','.join(invalid)} are not valid topic names.")
            if any(not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in topics):
                return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                        "status": []}

        def may_create(topic: str) -> bool:
            return ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False) \
                or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, topic)

        response = await self._groups.streams_group_heartbeat(
            req, ctx.api_version, ctx.client_id or "", client_host(ctx.connection.peer), may_create=may_create)
        return {"throttle_time_ms": 0, **response}

    async def describe(self, ctx: RequestContext, req: Request) -> Response:
        allowed = [g for g in req.group_ids if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
        described = iter(await self._groups.streams_group_describe(allowed) if allowed else [])
        allowed_ids = set(allowed)
        # As Kafka's KafkaApis: the groups the client may not describe first, then the described ones.
        groups = [{"group_id": gid, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
                  for gid in req.group_ids if gid not in allowed_ids]
        for gid in allowed:
            group = dict(next(described))
            if group.get("error_code", 0) == 0 and req.include_authorized_operations:
                group["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, gid)
            groups.append(group)
        return {"throttle_time_ms": 0, "groups": groups}

    HANDLERS = {STREAMS_GROUP_HEARTBEAT: heartbeat, STREAMS_GROUP_DESCRIBE: describe}
