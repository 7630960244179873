"""OffsetCommit (8), OffsetFetch (9), OffsetDelete (47): thin wrappers over the group coordinator.

OffsetFetch asks for one group before v8 and for several from v8 (each answered on its own); from v9 a member
id and epoch come with each group, from v10 topics are named by id.
"""

from __future__ import annotations

from typing import Any

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
OFFSET_DELETE = 47


async def handle_offset_commit(ctx, req) -> dict[str, Any]:
    response = await ctx.broker.group_coordinator.commit_offsets(req, ctx.api_version)
    return {"throttle_time_ms": 0, **response}


async def handle_offset_fetch(ctx, req) -> dict[str, Any]:
    version = ctx.api_version
    coordinator = ctx.broker.group_coordinator
    if version < 8:
        topics = None if req.topics is None else list(req.topics)
        [group] = await coordinator.fetch_offsets([{"group_id": req.group_id, "topics": topics}], version,
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
    answers = await coordinator.fetch_offsets(groups, version, bool(req.get("require_stable")))
    return {"throttle_time_ms": 0, "groups": answers}


async def handle_offset_delete(ctx, req) -> dict[str, Any]:
    response = await ctx.broker.group_coordinator.delete_offsets(req.group_id, list(req.topics))
    return {"throttle_time_ms": 0, **response}


HANDLERS = {OFFSET_COMMIT: handle_offset_commit, OFFSET_FETCH: handle_offset_fetch,
            OFFSET_DELETE: handle_offset_delete}
