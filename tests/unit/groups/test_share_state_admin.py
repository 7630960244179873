"""ShareStateAdmin with its collaborators faked: the share part (a real ShareGroupManager), a share coordinator
that keeps state in a dict, topics and a write that records what it was given."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from broker.groups.share.state_admin import ShareStateAdmin
from broker.share_coordinator import OpResult, Summary
from protocol.errors import ErrorCode
from tests.unit.groups.share_helpers import Topics, hb, make


class FakePersister:
    def __init__(self, fail: set[int] = frozenset()) -> None:
        self.state: dict[tuple[str, UUID, int], tuple[int, int]] = {}  # -> (state epoch, start offset)
        self.fail = fail
        self.initialized: list[tuple[UUID, int, int]] = []

    def has_state(self, group_id: str, topic_id: UUID, partition: int) -> bool:
        return (group_id, topic_id, partition) in self.state

    async def initialize(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                         start_offset: int = -1) -> OpResult:
        if partition in self.fail:
            return OpResult(ErrorCode.FENCED_STATE_EPOCH)
        self.state[(group_id, topic_id, partition)] = (state_epoch, start_offset)
        self.initialized.append((topic_id, partition, start_offset))
        return OpResult(ErrorCode.NONE)

    async def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> OpResult:
        self.state.pop((group_id, topic_id, partition), None)
        return OpResult(ErrorCode.NONE)

    async def read_state_summary(self, group_id: str, topic_id: UUID, partition: int
                                 ) -> tuple[ErrorCode, Summary | None, str | None]:
        found = self.state.get((group_id, topic_id, partition))
        if found is None:
            return ErrorCode.NONE, None, None
        return ErrorCode.NONE, Summary(found[0], 0, found[1], 0), None


@dataclass
class _Info:
    name: str
    topic_id: UUID
    num_partitions: int
    internal: bool = False


@dataclass
class _End:
    high_watermark: int


class FakeTopics:
    """The Topics view over share_helpers.Topics, every partition ending at offset 100."""

    def __init__(self, topics: Topics) -> None:
        self.topics = topics
        self.registry = self
        self.version = 0

    def get(self, name: str) -> _Info | None:
        found = self.topics.get(name)
        return None if found is None else _Info(name, *found)

    def by_id(self, topic_id: UUID) -> _Info | None:
        return next((i for n in self.topics.by_name if (i := self.get(n)).topic_id == topic_id), None)

    def all(self) -> list[_Info]:
        return [self.get(n) for n in self.topics.by_name]

    def log(self, topic: str, partition: int) -> _End:
        return _End(100)


def admin_for(topics: Topics, persister: FakePersister) -> tuple[Any, ShareStateAdmin, list]:
    svc = make(topics)
    written: list = []

    async def write(records, group_ids) -> bool:
        written.extend(records)
        return True

    def spawn(coro, name: str) -> asyncio.Task:
        return asyncio.get_running_loop().create_task(coro, name=name)

    return svc, ShareStateAdmin(persister, FakeTopics(topics), share=lambda: svc, write=write, spawn=spawn), written


async def test_heartbeat_initialization_keeps_existing_state_and_reports_failures() -> None:
    topics = Topics()
    tid = topics.create("t", 3)
    persister = FakePersister(fail={2})
    persister.state[("g", tid, 1)] = (0, 42)  # the share-partition leader got there first
    svc, admin, written = admin_for(topics, persister)
    res = hb(svc, "g", "m", 0, ["t"])
    [init] = res.initialize
    admin.initialize_later(init)
    assert admin.initializing("g")
    await admin.wait_initialized("g", 1.0)
    await asyncio.sleep(0)
    assert not admin.initializing("g")
    assert persister.initialized == [(tid, 0, -1)]
    md = svc.groups["g"].partition_metadata
    assert md.initialized[tid].partitions == {0, 1} and tid not in md.initializing
    assert written  # the outcome was written


async def test_alter_then_describe_offsets() -> None:
    topics = Topics()
    tid = topics.create("t", 2)
    persister = FakePersister(fail={1})
    svc, admin, _written = admin_for(topics, persister)
    resets: list = []
    admin.add_reset_listener(lambda g, parts: resets.append((g, {t: list(p) for t, p in parts.items()})))
    answer = await admin.alter_offsets("g", [("t", [(0, 7), (1, 3)])])
    assert answer["error_code"] == 0
    [topic] = answer["responses"]
    assert [(p["partition_index"], p["error_code"]) for p in topic["partitions"]] \
        == [(0, 0), (1, ErrorCode.FENCED_STATE_EPOCH)]
    assert resets == [("g", {tid: [0, 1]})]
    described = await admin.describe_offsets("g", None)
    [topic] = described["topics"]
    [part] = topic["partitions"]
    assert (topic["topic_name"], part["partition_index"], part["start_offset"], part["lag"]) == ("t", 0, 7, 93)
