"""A share acquisition takes the batches of a log read as one bound when none is a control batch and they fit the
records left (`PartitionLog.read(..., run_records=...)`): it acquires and serves exactly what a walk over each
batch would. Two managers over two logs with the same batches, one of them never allowed a run, must agree on
every acquisition."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.partition_log import PartitionLog
from broker.share_partition.inflight import ACK_ACCEPT
from protocol.control_records import build_end_txn_marker
from protocol.records import Record, build_batch, iter_batches
from tests.helpers.share_state import MemoryShareState
from tests.unit.share_partition.share_fakes import (
    EARLIEST,
    OneTopic,
    broker_config,
    group_configs,
    make_manager,
    served_bytes,
)

TOPIC_ID = uuid.uuid4()
CONFIG = {"group.share.max.share.sessions": 10, "group.share.partition.max.record.locks": 2000,
          "group.share.delivery.count.limit": 5, "group.share.record.lock.duration.ms": 30_000}


def make(path: Path, *, runs: bool) -> tuple:
    topics = OneTopic(path, TOPIC_ID)
    plog = topics.logs[0]
    reads: list[int] = []  # how many bounds each acquisition read reported
    real_read = plog.read

    def read(offset, max_bytes, **kwargs):
        got = real_read(offset, max_bytes, **kwargs)
        if kwargs.get("bounds") is not None:
            reads.append(len(kwargs["bounds"]))
        return got

    plog.read = read
    if not runs:
        plog.active._free_of_control = lambda start, end: False  # one segment (1 GiB): every read walks
    mgr = make_manager(
        config=broker_config(CONFIG),
        topics=topics,
        persister=MemoryShareState(),
        group_configs=group_configs(broker_config(CONFIG), EARLIEST))
    return mgr, plog, reads


def built(batches: list[tuple[str, int, int]]) -> list[tuple[bool, bytes]]:
    """The batches (kind, records, value size) as bytes, built once (both logs get the same bytes), each with
    whether it is a marker."""
    out = []
    for kind, n, size in batches:
        if kind == "marker":
            out.append((True, build_end_txn_marker(producer_id=7, producer_epoch=0, commit=True, coordinator_epoch=0,
                                                   timestamp=1_000)))
        elif kind == "txn":
            out.append((False, build_batch([Record(value=b"t" * size)] * n, timestamp=1_000, producer_id=7,
                                           producer_epoch=0, base_sequence=0, transactional=True)))
        else:
            out.append((False, build_batch([Record(value=b"p" * size)] * n, timestamp=1_000)))
    return out


def write(plog: PartitionLog, batches: list[tuple[bool, bytes]]) -> set[int]:
    """Append the batches; returns the offsets of the control batches (transaction markers)."""
    markers = set()
    for marker, data in batches:
        if marker:
            markers.add(plog.log_end_offset)
        plog.append(data)
    return markers


def acquisitions(mgr, plog: PartitionLog, max_records: int, max_bytes: int, strict: bool
                 ) -> list[tuple[list, bytes] | None]:
    """Acquire (accepting each acquisition) until the log is passed: the ranges and bytes of each (None for an
    acquisition that only archived markers)."""
    async def run() -> list[tuple[list, bytes] | None]:
        sp = await mgr.partition("g", TOPIC_ID, 0)
        out: list[tuple[list, bytes] | None] = []
        while sp.inflight.end_offset < plog.log_end_offset:
            assert len(out) <= plog.log_end_offset  # each acquisition passes one offset at least
            got = mgr.acquire(sp, "m", max_records, max_bytes, min_one=True, strict=strict)
            if got is None:
                out.append(None)
                continue
            ranges = [(r.first_offset, r.last_offset) for r in got.ranges]
            out.append((ranges, served_bytes(got.records)))
            assert await mgr.acknowledge_records(sp, "m", [(a, b, [ACK_ACCEPT]) for a, b in ranges]) == 0
        return out

    return asyncio.run(run())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.tuples(st.sampled_from(["plain", "plain", "txn", "marker"]), st.integers(1, 6),
                                  st.sampled_from([10, 50, 400])), min_size=1, max_size=30),
       max_records=st.integers(1, 40), max_bytes=st.sampled_from([1, 300, 1000, 1 << 20]), strict=st.booleans())
def test_runs_acquire_and_serve_what_batch_by_batch_reads_do(tmp_path_factory, batches, max_records, max_bytes,
                                                             strict):
    runs, plog, run_reads = make(tmp_path_factory.mktemp("runs") / "t-0", runs=True)
    walks, walk_log, walk_reads = make(tmp_path_factory.mktemp("walks") / "t-0", runs=False)
    data = built(batches)
    markers = write(plog, data)
    assert write(walk_log, data) == markers
    got = acquisitions(runs, plog, max_records, max_bytes, strict)
    assert got == acquisitions(walks, walk_log, max_records, max_bytes, strict)
    taken = [a for a in got if a is not None]
    delivered = [o for ranges, _ in taken for a, b in ranges for o in range(a, b + 1)]
    # each offset once, markers too (acquired as Kafka acquires them: the consumer skips their records)
    assert sorted(delivered) == list(range(plog.log_end_offset))
    served = {h.base_offset for _, data in taken for _, h in iter_batches(data)}
    assert markers <= served
    assert sum(run_reads) <= sum(walk_reads)


def test_a_read_of_data_batches_within_the_records_left_is_one_bound(tmp_path: Path) -> None:
    mgr, plog, reads = make(tmp_path / "t-0", runs=True)
    write(plog, built([("plain", 5, 50)] * 6))
    assert [a[0] for a in acquisitions(mgr, plog, 1000, 1 << 20, strict=False)] == [[(0, 29)]]
    assert reads == [1]  # six batches, one bound
    write(plog, built([("marker", 1, 0)] + [("plain", 5, 50)] * 2))
    assert [a[0] for a in acquisitions(mgr, plog, 1000, 1 << 20, strict=False)] == [[(30, 40)]]  # marker too
    assert reads[1:] == [3]  # the read holding the marker walks each batch
    write(plog, built([("plain", 5, 50)] * 2))
    # record_limit mode, 7 records: the two batches span more than that (each batch, the second one cut), then
    # the rest of the second one is one bound
    assert [a[0] for a in acquisitions(mgr, plog, 7, 1 << 20, strict=True)] == [[(41, 47)], [(48, 50)]]
    assert reads[2:] == [2, 1]


def test_each_read_of_an_acquisition_is_one_bound_only_within_the_records_still_left(tmp_path: Path) -> None:
    """An acquisition sizes its reads by the log's average bytes per offset; 200 small records consumed first make
    that estimate short for large batches, so one acquisition reads several times. A read spanning more offsets
    than the records still left (not the acquisition's whole MaxRecords) is walked batch by batch, and the
    acquisition stops at the batch reaching 30 records, as a walk over every batch does."""
    mgr, plog, reads = make(tmp_path / "t-0", runs=True)
    walks, walk_log, _ = make(tmp_path / "w-0", runs=False)
    for data in (built([("plain", 5, 10)] * 40), built([("plain", 5, 4000)] * 4 + [("plain", 5, 10)] * 3)):
        write(plog, data)
        write(walk_log, data)
        got = acquisitions(mgr, plog, 30, 1 << 20, strict=False)
        assert got == acquisitions(walks, walk_log, 30, 1 << 20, strict=False)
    assert [a[0] for a in got] == [[(200, 229)], [(230, 234)]]
    # three reads of one large batch each, then one of the last large batch and the small ones: 20 offsets, more
    # than the 15 records left, so each batch (the acquisition takes three of them); then the last small batch
    assert reads[-5:] == [1, 1, 1, 4, 1]
