"""Test harness for the share-group coordinator: a mutable topic table and heartbeat helpers."""

from __future__ import annotations

import uuid
from typing import Any

from broker.groups.result import GroupResult
from broker.groups.share.config import ShareGroupConfig
from broker.groups.share.manager import ShareGroupManager
from protocol.codec import request_codec, response_codec

HB = 76


class Topics:
    def __init__(self) -> None:
        self.by_name: dict[str, tuple[uuid.UUID, int]] = {}

    def create(self, name: str, partitions: int) -> uuid.UUID:
        tid = uuid.uuid5(uuid.NAMESPACE_OID, f"{name}-{len(self.by_name)}")
        self.by_name[name] = (tid, partitions)
        return tid

    def grow(self, name: str, partitions: int) -> None:
        self.by_name[name] = (self.by_name[name][0], partitions)

    def delete(self, name: str) -> uuid.UUID:
        return self.by_name.pop(name)[0]

    def get(self, name: str) -> tuple[uuid.UUID, int] | None:
        return self.by_name.get(name)


def make(topics: Topics, **config: Any) -> ShareGroupManager:
    """A coordinator computing assignments on every heartbeat that needs one (assignment_interval_ms=0) unless
    the test sets the interval."""
    return ShareGroupManager(ShareGroupConfig(**{"assignment_interval_ms": 0, **config}), topic_info=topics.get)


def request(group: str, member: str, epoch: int, topics: list[str] | None = None,
            rack: str | None = None) -> Any:
    """A decoded ShareGroupHeartbeat v1 request, as the handler would pass it."""
    codec = request_codec(HB, 1)
    return codec.decode(codec.encode({"group_id": group, "member_id": member, "member_epoch": epoch,
                                      "rack_id": rack, "subscribed_topic_names": topics}))


def hb(svc: ShareGroupManager, group: str, member: str, epoch: int, topics: list[str] | None = None,
       now: int = 0, rack: str | None = None) -> GroupResult:
    res = svc.heartbeat(request(group, member, epoch, topics, rack), now)
    response_codec(HB, 1).encode(res.response)  # every response must be encodable
    return res


def complete_init(svc: ShareGroupManager, res: GroupResult) -> list[Any]:
    """Play the share coordinator: report every requested initialization as done."""
    out = []
    for req in res.initialize:
        for tid, parts in req.topics.items():
            out += svc.initialized(req.group_id, tid, parts)
    return out


def assigned(res: GroupResult) -> dict[uuid.UUID, set[int]] | None:
    a = res.response["assignment"]
    return None if a is None else {tp["topic_id"]: set(tp["partitions"]) for tp in a["topic_partitions"]}
