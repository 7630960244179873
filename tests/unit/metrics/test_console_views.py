"""The console's views bound their work: a share-partition window of millions of in-flight records is a handful of
ranges, one split into thousands of pieces is capped at MAX_RANGES, and topic lists are capped. Real ShareInFlight
state; the collaborators the views read are small stand-ins (the views are read-only functions of them)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from broker.cluster.topics import TopicInfo
from broker.config.group_config import GroupConfig
from broker.console import service
from broker.console.service import Console
from broker.share_partition.inflight import ACK_ACCEPT, ShareInFlight
from broker.share_partition.partition import SharePartition

TOPIC_ID = uuid.uuid4()


@dataclass
class Registry:
    infos: list[TopicInfo] = field(default_factory=list)

    def all(self) -> list[TopicInfo]:
        return list(self.infos)

    def get(self, name: str) -> TopicInfo | None:
        return next((i for i in self.infos if i.name == name), None)

    def by_id(self, tid: uuid.UUID) -> TopicInfo | None:
        return next((i for i in self.infos if i.topic_id == tid), None)


@dataclass
class Log:
    end: int
    log_start_offset: int = 0
    segments: list[object] = field(default_factory=lambda: [object()])

    @property
    def high_watermark(self) -> int:
        return self.end

    @property
    def log_end_offset(self) -> int:
        return self.end

    @property
    def size_bytes(self) -> int:
        return self.end


@dataclass
class Logs:
    end: int

    def find(self, topic: str, partition: int) -> Log:
        return Log(self.end)


@dataclass
class Topics:
    registry: Registry


@dataclass
class Groups:
    groups: dict[str, object] = field(default_factory=dict)


@dataclass
class GroupCoordinator:
    """The sans-IO group coordinator's parts the console reads: no groups."""

    classic: Groups = field(default_factory=Groups)
    consumer: Groups = field(default_factory=Groups)
    share: Groups = field(default_factory=Groups)


@dataclass
class GroupRuntime:
    coordinator: GroupCoordinator = field(default_factory=GroupCoordinator)


@dataclass
class Leader:
    """The share-partition leader's loaded share-partitions, at 1 s."""

    partitions: list[SharePartition]

    def loaded_partitions(self) -> list[SharePartition]:
        return list(self.partitions)

    def now_ms(self) -> int:
        return 1_000


def console(infos: list[TopicInfo], partitions: list[SharePartition], end: int) -> Console:
    return Console(topics=Topics(Registry(infos)), logs=Logs(end),  # type: ignore[arg-type]
                   group_coordinator=GroupRuntime(), share_partitions=Leader(partitions),  # type: ignore[arg-type]
                   group_configs=lambda _g: GroupConfig())


def share_partition(inflight: ShareInFlight) -> SharePartition:
    return SharePartition(key=("g", TOPIC_ID, 0), topic="t", inflight=inflight)


def test_millions_in_flight_are_a_few_ranges():
    n = 5_000_000
    f = ShareInFlight(0, max_in_flight_records=n)
    f.acquire("m1", [(0, n - 1)], n, now_ms=0)
    f.acknowledge("m1", [(0, 999_999, [ACK_ACCEPT])], now_ms=0)  # SPSO moves past them
    c = console([TopicInfo("t", TOPIC_ID, 1)], [share_partition(f)], n)
    started = time.process_time()  # CPU time: a loaded machine's scheduling does not count
    view = c.share_partition("g", "t", 0)
    assert time.process_time() - started < 0.5  # per record it would take seconds
    assert view is not None
    assert view["ranges"] == [{"first": 1_000_000, "last": n - 1, "state": "ACQUIRED", "delivery_count": 1,
                               "member": "m1", "lock_deadline_ms": f.lock_duration_ms}]
    assert (view["start_offset"], view["end_offset"], view["acquired"], view["lag"]) == (1_000_000, n, n - 1_000_000,
                                                                                       n - 1_000_000)
    assert not view["ranges_truncated"]
    assert c.share_partition("g", "t", 1) is None and c.share_partition("other", "t", 0) is None


def test_a_window_split_into_many_pieces_is_capped():
    n = 3 * service.MAX_RANGES
    f = ShareInFlight(0, max_in_flight_records=n)
    f.acquire("m1", [(0, n - 1)], n, now_ms=0)
    f.acknowledge("m1", [(i, i, [ACK_ACCEPT]) for i in range(1, n, 2)], now_ms=0)  # every other offset
    assert f.piece_count > service.MAX_RANGES
    view = console([TopicInfo("t", TOPIC_ID, 1)], [share_partition(f)], n).share_partition("g", "t", 0)
    assert view is not None and view["ranges_truncated"]
    assert len(view["ranges"]) == service.MAX_RANGES
    assert [r["first"] for r in view["ranges"]] == list(range(service.MAX_RANGES))  # from the start offset on
    assert view["acknowledged"] == n // 2  # counts are the whole window's


def test_topic_lists_are_capped():
    infos = [TopicInfo(f"t{i}", uuid.uuid4(), 100) for i in range(service.MAX_PARTITIONS // 100 + 5)]
    view = console(infos, [], 10).topics()
    assert view["truncated"]
    assert sum(len(t["partitions"]) for t in view["topics"]) == service.MAX_PARTITIONS
