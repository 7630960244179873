"""The console's views bound their work: a share-partition window of millions of in-flight records is a handful of
ranges, one split into thousands of pieces is capped at MAX_RANGES, and topic lists are capped. Real ShareInFlight
state; the collaborators the views read are small stand-ins (the views are read-only functions of them)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace

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


def log(end: int) -> SimpleNamespace:
    return SimpleNamespace(log_start_offset=0, high_watermark=end, log_end_offset=end, size_bytes=end,
                           segments=[object()])


def console(infos: list[TopicInfo], partitions: list[SharePartition], end: int) -> Console:
    manager = SimpleNamespace(loaded_partitions=lambda: list(partitions), now_ms=lambda: 1_000)
    coordinator = SimpleNamespace(classic=SimpleNamespace(groups={}), consumer=SimpleNamespace(groups={}),
                                  share=SimpleNamespace(groups={}))
    return Console(topics=SimpleNamespace(registry=Registry(infos)),  # type: ignore[arg-type]
                   logs=SimpleNamespace(find=lambda _t, _p: log(end)),  # type: ignore[arg-type]
                   group_coordinator=SimpleNamespace(coordinator=coordinator),  # type: ignore[arg-type]
                   share_partitions=manager, group_configs=lambda _g: GroupConfig())  # type: ignore[arg-type]


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
