"""OffsetCommit (8), OffsetFetch (9), OffsetDelete (47): thin wrappers over the group coordinator.

OffsetFetch asks for one group before v8 and for several from v8 (each answered on its own); from v9 a member
id and epoch come with each group, from v10 topics are named by id.

Authorization as Kafka's KafkaApis: OffsetCommit needs READ on the group and on each topic; OffsetFetch DESCRIBE on
the group, and its topics the client may not DESCRIBE are refused (named) or left out (all offsets asked for);
OffsetDelete DELETE on the group and READ on each topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from broker.cluster.manager import TopicManager
from broker.context import RequestContext
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers.apis import Apis, Request, Response
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
OFFSET_DELETE = 47


GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _refused_partitions(topics, code: int, key: str = "partitions", fetch: bool = False) -> list[dict]:
    out = []
    for topic in topics:
        indexes = topic["partition_indexes"] if fetch else [p["partition_index"] for p in topic[key]]
        partitions = [{"partition_index": i, "error_code": code} for i in indexes]
        if fetch:
            for p in partitions:
                p.update(committed_offset=-1, committed_leader_epoch=-1, metadata="")
        out.append({"name": topic.get("name"), "topic_id": topic.get("topic_id"), "partitions": partitions})
    return out


class OffsetApis(Apis):
    """OffsetCommit, OffsetFetch and OffsetDelete: committed offsets, in the group coordinator."""

    def __init__(self, groups: GroupCoordinatorRuntime, topics: TopicManager) -> None:
        self._groups = groups
        self._topics = topics

    def _topic_name(self, ctx, topic) -> str | None:
        """The topic's name, from its id where the request names topics by id (v10+; None: an unknown id, the
        zero id included, which Kafka answers UNKNOWN_TOPIC_ID before any ACL)."""
        topic_id = topic.get("topic_id")
        if ctx.api_version >= 10 or (topic_id and topic_id != uuid.UUID(int=0)):
            info = self._topics.registry.by_id(topic_id) if topic_id else None
            return info.name if info is not None else None
        return topic.get("name")

    def _split(self, ctx, topics, operation: AclOperation) -> tuple[list, list]:
        """(topics the client may `operation`, refused topics); unknown ids stay for the coordinator to
        answer."""
        allowed: list[Any] = []
        refused: list[Any] = []
        for topic in topics:
            name = self._topic_name(ctx, topic)
            (refused if name is not None and not ctx.authorize(operation, ResourceType.TOPIC, name) else allowed).append(
                topic)
        return allowed, refused

    async def offset_commit(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
            return {"throttle_time_ms": 0, "topics": _refused_partitions(req.topics, GROUP_DENIED)}
        allowed, refused = self._split(ctx, req.topics, AclOperation.READ)
        request: Mapping[str, Any] = {**req, "topics": allowed} if refused else req
        response = await self._groups.commit_offsets(request, ctx.api_version) if allowed or not refused \
            else {"topics": []}
        response = dict(response)
        response["topics"] = list(response.get("topics", [])) + _refused_partitions(refused, TOPIC_DENIED)
        return {"throttle_time_ms": 0, **response}

    async def _fetch_group(self, ctx, group: dict, version: int, require_stable: bool) -> dict[str, Any]:
        """One group's OffsetFetch answer with Kafka's checks: DESCRIBE on the group, then on each topic."""
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group["group_id"]):
            return {"group_id": group["group_id"], "topics": [], "error_code": GROUP_DENIED}
        topics = group["topics"]
        refused: list = []
        if topics is not None:
            topics, refused = self._split(ctx, topics, AclOperation.DESCRIBE)
        [answer] = await self._groups.fetch_offsets([{**group, "topics": topics}], version,
                                                    require_stable)
        answer = dict(answer)
        if group["topics"] is None:  # all offsets: topics the client may not see are left out
            answer["topics"] = [t for t in answer.get("topics", [])
                                if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t["name"], audit=False)]
        elif refused:
            answer["topics"] = list(answer.get("topics", [])) + _refused_partitions(refused, TOPIC_DENIED, fetch=True)
        return answer

    async def offset_fetch(self, ctx: RequestContext, req: Request) -> Response:
        version = ctx.api_version
        if version < 8:
            topics = None if req.topics is None else list(req.topics)
            group = await self._fetch_group(ctx, {"group_id": req.group_id, "topics": topics}, version,
                                            bool(req.get("require_stable")))
            code = group["error_code"]
            out_topics = group["topics"]
            if version < 2 and code:
                # No group-level error before v2: every partition carries it.
                out_topics = [{"name": t["name"], "partitions": [
                    {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": code}
                    for p in t["partition_indexes"]]} for t in (topics or ())]
            return {"throttle_time_ms": 0, "topics": out_topics, "error_code": code}
        groups = [{"group_id": g.group_id, "member_id": g.get("member_id"), "member_epoch": g.get("member_epoch", -1),
                   "topics": None if g.topics is None else list(g.topics)} for g in req.groups]
        answers = [await self._fetch_group(ctx, g, version, bool(req.get("require_stable"))) for g in groups]
        return {"throttle_time_ms": 0, "groups": answers}

    async def offset_delete(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, req.group_id):
            return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "topics": []}
        allowed, refused = self._split(ctx, req.topics, AclOperation.READ)
        response: dict[str, Any] = dict(await self._groups.delete_offsets(req.group_id, allowed)) \
            if allowed or not refused else {"error_code": 0, "topics": []}
        response["topics"] = list(response.get("topics", [])) + _refused_partitions(refused, TOPIC_DENIED)
        return {"throttle_time_ms": 0, **response}

    HANDLERS = {OFFSET_COMMIT: offset_commit, OFFSET_FETCH: offset_fetch,
                OFFSET_DELETE: offset_delete}
