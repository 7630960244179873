"""PartitionLog: offsets, rolling, recovery of torn tails, retention, timestamps, restarts; LogManager."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log import LogConfig, LogManager, OffsetOutOfRangeError, PartitionLog
from protocol import records as rec
from tests.helpers.record_batches import batch, batches_in


class Clock:
    def __init__(self, ms: int = 1_000_000) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def fill(plog: PartitionLog, n: int, *, count: int = 2, value_size: int = 100, ts: int = 1_000) -> None:
    for _ in range(n):
        plog.append(batch(count, value_size=value_size, ts=ts))


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_append_assigns_offsets_and_files_are_kafka_named(tmp_path: Path) -> None:
    fresh = PartitionLog(tmp_path / "f-0")
    assert segment_files(tmp_path / "f-0") == ["00000000000000000000.log"]  # index files come with entries
    fresh.close()
    plog = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    a = plog.append(batch(3))
    b = plog.append(batch(2) + batch(4))
    assert (a.base_offset, a.last_offset, b.base_offset, b.last_offset, b.batches) == (0, 2, 3, 8, 2)
    assert plog.log_end_offset == plog.high_watermark == 9
    headers = batches_in(plog.read(0, 1 << 20).data)
    assert [(h.base_offset, h.records_count) for h in headers] == [(0, 3), (3, 2), (5, 4)]
    assert segment_files(tmp_path / "t-0") == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"]
    with pytest.raises(rec.CorruptRecordError):
        plog.append(batch(1)[:-1])
    assert plog.log_end_offset == 9
    plog.close()


def test_log_append_time_and_leader_epoch(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", leader_epoch=3)
    info = plog.append(batch(2, ts=5), log_append_time=777)
    assert (info.log_append_time, info.max_timestamp) == (777, 777)
    data = plog.read(0, 1000).data
    h = rec.validate_batches(data)[0]
    assert h.is_log_append_time and h.max_timestamp == 777 and h.partition_leader_epoch == 3
    plog.close()


def test_a_read_reports_the_bounds_of_the_batches_it_returns(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    fill(plog, 10, count=3)
    plog.append(rec.build_batch([rec.Record(None, b"")], timestamp=1_000, control=True, transactional=True,
                                producer_id=1))
    fill(plog, 5, count=2)
    bounds: list = []
    got = plog.read(4, 700, bounds=bounds)  # from inside the second batch, cut by the byte limit
    assert bounds == [(pos, h.base_offset, h.last_offset, h.size, h.attributes)
                      for pos, h in rec.iter_batches(got.data)]
    assert bounds[0][1] == 3 and sum(size for *_, size, _ in bounds) == len(got.data) <= 700
    everything: list = []
    plog.read(0, 1 << 20, bounds=everything)
    assert [b[1] for b in everything] == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 33, 35, 37, 39]
    assert [bool(b[4] & rec.ATTR_CONTROL) for b in everything].index(True) == 10


def test_reads_of_large_batches_read_what_they_return(tmp_path: Path, monkeypatch) -> None:
    """With batches of ~200 KB a read finds its first batch and its cut from the headers, then reads exactly the
    batches it returns: it used to read two batches ahead of the index entry and up to max_bytes past the last whole
    batch as well, to be dropped (MBs for 1 MB producer batches)."""
    from broker.log import segment

    plog = PartitionLog(tmp_path / "t-0")
    fill(plog, 12, count=200, value_size=1000)  # offsets 0-2399, ~205 KB per batch
    size = plog.size_bytes // 12
    sizes: list[int] = []
    real = segment._pread_exact
    monkeypatch.setattr(segment, "_pread_exact", lambda fd, n, pos: sizes.append(n) or real(fd, n, pos))
    for offset in (0, 199, 200, 201, 1234, 2399):
        for max_bytes, min_one in ((1, True), (3 * size, False), (10 << 20, False)):
            sizes.clear()
            bounds: list = []
            got = plog.read(offset, max_bytes, min_one_batch=min_one, bounds=bounds)
            first = offset // 200 * 200
            want = [(i * 200, i * 200 + 199) for i in range(offset // 200, 12)][:max(1, max_bytes // size)]
            assert [(b[1], b[2]) for b in bounds] == want, (offset, max_bytes)
            assert [(p, h.base_offset) for p, h in rec.iter_batches(got.data)][0] == (0, first)
            # the batches returned, read once and exactly, plus a 4 KiB header chunk per batch looked at
            assert max(sizes) == len(got.data), (offset, max_bytes, sizes)
            assert sum(sizes) <= len(got.data) + (len(bounds) + 3) * 4096, (offset, max_bytes, sizes)
    assert plog.read(1234, size - 1, min_one_batch=False).data == b""  # the first batch does not fit


def test_roll_by_bytes_and_by_time(tmp_path: Path) -> None:
    clock = Clock()
    cfg = LogConfig(segment_bytes=1000, segment_ms=60_000)
    plog = PartitionLog(tmp_path / "t-0", cfg, clock=clock)
    fill(plog, 10, value_size=100)  # ~290 bytes each
    sizes = [s.size for s in plog.segments]
    assert len(sizes) > 2 and all(size <= 1000 for size in sizes)
    assert [s.base_offset for s in plog.segments] == sorted({s.base_offset for s in plog.segments})
    n = len(plog.segments)
    plog.append(batch(1, ts=1_000 + 30_000))
    assert len(plog.segments) == n
    # roll on record timestamps measured from the first batch of the segment (as Kafka)
    first_ts = plog.active.first_batch_timestamp
    plog.append(batch(1, ts=first_ts + 60_001))
    assert len(plog.segments) == n + 1 and plog.active.base_offset == plog.log_end_offset - 1
    plog.close()


def test_roll_by_wall_clock_without_timestamps(tmp_path: Path) -> None:
    clock = Clock()
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_ms=1000), clock=clock)
    plog.append(batch(1, ts=-1))
    plog.active.created_ms = clock.ms
    clock.ms += 1001
    plog.append(batch(1, ts=-1))
    assert [s.base_offset for s in plog.segments] == [0, 1]
    plog.close()


def test_segments_roll_their_jitter_before_segment_ms(tmp_path: Path) -> None:
    """segment.jitter.ms (Kafka's rollJitterMs): each segment draws a jitter below min(segment.jitter.ms,
    segment.ms) once and rolls that much earlier, by record timestamps and when idle alike."""
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_ms=60_000, segment_jitter_ms=20_000), clock=Clock())
    plog.append(batch(1, ts=1_000))
    jitter = plog.roll_jitter_ms()
    assert 0 <= jitter < 20_000 and plog.roll_jitter_ms() == jitter  # drawn once for the segment
    plog.append(batch(1, ts=1_000 + 60_000 - jitter))  # not past segment.ms minus the jitter yet
    assert len(plog.segments) == 1
    plog.append(batch(1, ts=1_000 + 60_000 - jitter + 1))
    assert len(plog.segments) == 2
    drawn = set()
    for _ in range(40):  # every new segment draws again (uniformly: the draws differ)
        first = plog.active.first_batch_timestamp
        assert plog.roll_if_idle(first + 60_001)
        plog.append(batch(1, ts=first))
        drawn.add(plog.roll_jitter_ms())
    assert len(drawn) > 30 and all(0 <= j < 20_000 for j in drawn)
    capped = PartitionLog(tmp_path / "t-1", LogConfig(segment_ms=1_000, segment_jitter_ms=20_000), clock=Clock())
    capped.append(batch(1, ts=1_000))
    assert 0 <= capped.roll_jitter_ms() < 1_000  # at most segment.ms
    none = PartitionLog(tmp_path / "t-2", LogConfig(segment_ms=1_000), clock=Clock())
    assert none.roll_jitter_ms() == 0
    for log in (plog, capped, none):
        log.close()


def test_restart_keeps_offsets_and_appends_continue(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=2000, index_interval_bytes=200)
    plog = PartitionLog(tmp_path / "t-0", cfg)
    fill(plog, 20)
    end, bases = plog.log_end_offset, [s.base_offset for s in plog.segments]
    plog.close()
    again = PartitionLog(tmp_path / "t-0", cfg)
    assert again.log_end_offset == end and [s.base_offset for s in again.segments] == bases
    assert again.append(batch(1)).base_offset == end
    assert again.max_timestamp_offset() is not None
    again.close()


@pytest.mark.parametrize("damage", ["truncate_mid_batch", "garbage_tail", "bad_crc_last", "zero_tail"])
def test_recovery_truncates_torn_tail(tmp_path: Path, damage: str) -> None:
    cfg = LogConfig(index_interval_bytes=300)
    directory = tmp_path / "t-0"
    plog = PartitionLog(directory, cfg)
    fill(plog, 12)
    last_pos = plog.active.size - len(batch(2, value_size=100))
    good_end = plog.log_end_offset
    plog.close()
    log_file = directory / "00000000000000000000.log"
    size = log_file.stat().st_size
    if damage == "truncate_mid_batch":
        os.truncate(log_file, size - 17)
        expect_end, expect_size = good_end - 2, last_pos
    elif damage == "garbage_tail":
        with open(log_file, "ab") as f:
            f.write(os.urandom(500))
        expect_end, expect_size = good_end, size
    elif damage == "zero_tail":
        with open(log_file, "ab") as f:
            f.write(b"\0" * 4096)
        expect_end, expect_size = good_end, size
    else:
        with open(log_file, "r+b") as f:
            f.seek(size - 3)
            f.write(b"\xff\xff\xff")
        expect_end, expect_size = good_end - 2, last_pos
    again = PartitionLog(directory, cfg)
    assert again.log_end_offset == expect_end
    assert log_file.stat().st_size == expect_size == again.active.size
    # index entries pointing into the removed tail are gone; appends continue at the right offset
    assert all(pos < expect_size for pos in again.active.offset_index.pos)
    assert again.append(batch(3)).base_offset == expect_end
    headers = batches_in(again.read(0, 1 << 20).data)
    assert [h.base_offset for h in headers] == list(range(0, expect_end + 3, 2))[: len(headers)]
    assert headers[-1].last_offset == expect_end + 2
    again.close()


def test_recovery_drops_stale_index_entries_and_rebuilds_missing_index(tmp_path: Path) -> None:
    cfg = LogConfig(index_interval_bytes=100)
    directory = tmp_path / "t-0"
    plog = PartitionLog(directory, cfg)
    fill(plog, 10)
    entries = len(plog.active.offset_index)
    plog.close()
    os.truncate(directory / "00000000000000000000.log", 400)  # keeps one batch (+ a partial one)
    again = PartitionLog(directory, cfg)
    assert again.log_end_offset == 2 and len(again.active.offset_index) < entries
    again.close()
    (directory / "00000000000000000000.index").unlink()
    (directory / "00000000000000000000.timeindex").unlink()
    third = PartitionLog(directory, cfg)
    assert third.log_end_offset == 2
    fill(third, 5)
    assert third.read(7, 1000).first_offset == 6
    third.close()


def _index_files(directory: Path, bases: list[int]) -> dict[str, tuple[bytes, int]]:
    """Contents and mtime (ns) of the index files of the segments starting at `bases`."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())
            if p.suffix in (".index", ".timeindex", ".txnindex") and int(p.stem) in bases}


@pytest.mark.parametrize("index_interval", [300, 100_000])  # index entries inside segments, or only the sealing one
def test_a_clean_restart_leaves_sealed_segments_index_files_as_they_are(tmp_path: Path, index_interval: int):
    directory = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=1200, index_interval_bytes=index_interval)
    plog = PartitionLog(directory, cfg)
    for i in range(20):  # timestamps that rise and fall, so the largest is not the last of a segment
        plog.append(batch(2, value_size=100, ts=10_000 + 100 * i + (500 if i % 3 == 0 else 0)))
    plog.close()
    sealed = [s.base_offset for s in plog.segments[:-1]]
    assert len(sealed) >= 3
    # an hour old: any write to a file would give it the current time
    for path in directory.iterdir():
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 3_600 * 10**9))
    before = _index_files(directory, sealed)
    assert any(name.endswith(".timeindex") for name in before)
    timestamps = range(9_900, 12_600, 50)
    for _restart in range(2):
        again = PartitionLog(directory, cfg)
        answers = [again.offset_for_timestamp(ts) for ts in timestamps]
        assert again.max_timestamp_offset() == (36, 12_300)  # i = 18: 10_000 + 1800 + 500
        again.close()
        assert _index_files(directory, sealed) == before
    # the answers are what the records themselves say
    assert answers == [_first_batch_reaching(directory, cfg, ts) for ts in timestamps]


def _first_batch_reaching(directory: Path, cfg: LogConfig, ts: int) -> tuple[int, int] | None:
    """offset_for_timestamp at batch granularity (the batches' records share one timestamp), without indexes."""
    plog = PartitionLog(directory, cfg)
    try:
        return next(((h.base_offset, h.max_timestamp) for h in plog.iter_batch_headers() if h.max_timestamp >= ts),
                    None)
    finally:
        plog.close()


def test_recovery_cuts_time_index_entries_past_a_torn_tail(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    cfg = LogConfig(index_interval_bytes=300)
    plog = PartitionLog(directory, cfg)
    for i in range(12):
        plog.append(batch(2, value_size=100, ts=1_000 + i))
    size = len(batch(2, value_size=100))
    plog.close()  # sealing adds (1011, 23) to the time index
    os.truncate(directory / "00000000000000000000.log", 9 * size + 7)  # 9 whole batches and a torn one
    again = PartitionLog(directory, cfg)
    assert again.log_end_offset == 18
    index = again.active.time_index
    assert len(index) and index.last[1] < 18 and index.last[0] <= 1_008
    assert again.max_timestamp_offset() == (16, 1_008)
    assert again.offset_for_timestamp(1_009) is None
    assert again.offset_for_timestamp(1_005) == (10, 1_005)
    again.append(batch(2, value_size=100, ts=2_000))
    assert again.offset_for_timestamp(1_009) == (18, 2_000)
    again.close()


def test_torn_older_segment_drops_later_segments(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=700)
    directory = tmp_path / "t-0"
    plog = PartitionLog(directory, cfg)
    fill(plog, 8)
    second = plog.segments[1]
    count = len(plog.segments)
    plog.close()
    os.truncate(second.log_path, second.size - 5)
    again = PartitionLog(directory, cfg)
    assert len(again.segments) == 2 < count
    assert again.log_end_offset == again.segments[1].next_offset == second.next_offset - 2
    again.close()


def test_retention_by_time_never_deletes_active(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=700, retention_ms=10_000)
    plog = PartitionLog(tmp_path / "t-0", cfg)
    for ts in (1_000, 2_000, 3_000, 50_000, 51_000):
        plog.append(batch(2, value_size=200, ts=ts))
    assert len(plog.segments) == 5
    assert plog.apply_retention(now_ms=12_500) == 2  # segments with max ts 1000 and 2000
    assert plog.log_start_offset == plog.segments[0].base_offset == 4
    assert plog.apply_retention(now_ms=10**9) == 2  # everything expired, but the active segment stays
    assert len(plog.segments) == 1 and plog.log_start_offset == 8
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(0, 100)
    plog.close()


def test_retention_by_bytes(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=700, retention_bytes=1500, retention_ms=-1)
    plog = PartitionLog(tmp_path / "t-0", cfg)
    fill(plog, 8, value_size=200)
    assert len(plog.segments) == 8  # one batch per segment
    seg_size, total = plog.segments[0].size, plog.size_bytes
    assert plog.apply_retention(now_ms=0) == (total - 1500) // seg_size
    assert plog.size_bytes - seg_size < 1500 <= plog.size_bytes
    assert plog.log_start_offset == plog.segments[0].base_offset
    plog.close()


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=800, index_interval_bytes=50))
    for i in range(20):
        records = [rec.Record(None, b"x" * 50, timestamp=1000 + 10 * i + j) for j in range(3)]
        plog.append(rec.build_batch(records))
    plog.append(rec.build_batch([rec.Record(None, b"late", timestamp=1005)]))  # out of order
    assert len(plog.segments) > 2
    assert plog.offset_for_timestamp(0) == (0, 1000)
    assert plog.offset_for_timestamp(1001) == (1, 1001)
    assert plog.offset_for_timestamp(1052) == (17, 1052)
    assert plog.offset_for_timestamp(1190) == (57, 1190)
    assert plog.offset_for_timestamp(1193) is None
    assert plog.max_timestamp_offset() == (59, 1192)
    plog.delete_records_before(20)
    assert plog.offset_for_timestamp(0) == (20, 1062)
    plog.close()


def test_delete_records_and_restart_keep_log_start_offset(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=700)
    manager = LogManager(tmp_path, cfg)
    manager.start()
    plog = manager.get_or_create("orders", 0)
    other = manager.get_or_create("orders", 1)
    fill(plog, 8)
    fill(other, 1)
    assert plog.delete_records_before(9) == 9
    assert plog.segments[0].base_offset <= 9 < plog.segments[0].next_offset
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(8, 100)
    assert plog.read(9, 1000).first_offset == 8  # the batch holding 9 is returned whole
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(10**6)
    manager.close()

    again = LogManager(tmp_path, cfg)
    again.start()
    assert sorted(again.partitions()) == [("orders", 0), ("orders", 1)]
    restored = again.get("orders", 0)
    assert (restored.log_start_offset, restored.log_end_offset) == (9, 16)
    assert again.get("orders", 1).log_end_offset == 2
    again.get_or_create("orders", 0, {"retention.ms": "5", "segment.bytes": "900"})
    assert restored.config.retention_ms == 5 and restored.config.segment_bytes == 900
    again.delete("orders", 1)
    assert not (tmp_path / "orders-1").exists() and again.partitions() == [("orders", 0)]
    again.close()

    lazy = LogManager(tmp_path, cfg)  # without start(): opening a partition still applies the checkpoint
    assert lazy.get_or_create("orders", 0).log_start_offset == 9
    lazy.close()


def test_manager_ignores_foreign_dirs_and_runs_retention(tmp_path: Path) -> None:
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "not_a_partition").mkdir()
    (tmp_path / "old-3-delete").mkdir()
    manager = LogManager(tmp_path, LogConfig(segment_bytes=700, retention_ms=1))
    manager.start()
    assert manager.partitions() == [] and not (tmp_path / "old-3-delete").exists()
    plog = manager.get_or_create("a-b", 2)
    fill(plog, 6, ts=1)
    assert len(plog.segments) > 1
    assert manager.apply_retention(now_ms=10_000) > 0
    assert len(plog.segments) == 1 and plog.log_start_offset == plog.segments[0].base_offset > 0
    manager.close()
    again = LogManager(tmp_path)
    again.start()
    assert again.partitions() == [("a-b", 2)]
    again.close()


def test_flush_is_cheap_when_clean_and_survives_deleted_segments(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=700, retention_bytes=0))
    plog.flush()
    assert not plog.dirty
    fill(plog, 6)
    assert plog.dirty
    plog.apply_retention(now_ms=0)  # deletes (and closes) dirty segments before the flush
    plog.flush()
    assert not plog.dirty
    plog.flush()
    plog.delete()
    assert not (tmp_path / "t-0").exists()


def test_flush_syncs_only_the_files_changed_since_the_last_flush(tmp_path: Path, monkeypatch) -> None:
    import broker.log.partition_log as partition_log

    synced: list[list[str]] = []
    real = partition_log.fsync_all

    def record(fds: list[int]) -> None:
        synced.append(sorted(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) for fd in fds))
        real(fds)

    monkeypatch.setattr(partition_log, "fsync_all", record)
    plog = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=300))  # batches of ~280 bytes
    fill(plog, 2)
    plog.flush()
    fill(plog, 1)  # the first entries of both indexes (more than index.interval.bytes since the last)
    plog.flush()
    fill(plog, 1)  # no index entry: only the log changed
    plog.flush()
    name = "00000000000000000000"
    # the first flush of a log also syncs its directory and the directory's entry in the log directory; a flush
    # that made index files syncs the directory again (their names)
    assert synced == [sorted([f"{name}.log", "t-0", tmp_path.name]),
                      [f"{name}.index", f"{name}.log", f"{name}.timeindex", "t-0"], [f"{name}.log"]]
    # a flush that could not open its files syncs them next time
    fill(plog, 1)
    plog.active.offset_index.unflushed = True
    monkeypatch.setattr(plog.files, "acquire", _failing_acquire(plog.files.acquire, f"{name}.log"))
    with pytest.raises(OSError):
        plog.flush()
    monkeypatch.undo()
    monkeypatch.setattr(partition_log, "fsync_all", record)
    plog.flush()
    assert synced[-1] == [f"{name}.index", f"{name}.log", f"{name}.timeindex"]
    plog.close()


def _failing_acquire(acquire, failing: str):
    def fail(path: str, flags: int) -> int:
        if path.endswith(failing):
            raise OSError(24, "Too many open files")
        return acquire(path, flags)
    return fail


@pytest.mark.parametrize("damage", ["truncate_mid_batch", "bad_crc_last", "zero_tail"])
def test_strict_recovery_truncates_only_a_torn_tail(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "j-0"
    plog = PartitionLog(directory, LogConfig(index_interval_bytes=300))
    fill(plog, 12)
    good_end = plog.log_end_offset
    plog.close()
    log_file = directory / "00000000000000000000.log"
    size = log_file.stat().st_size
    if damage == "truncate_mid_batch":
        os.truncate(log_file, size - 17)
    elif damage == "zero_tail":
        with open(log_file, "ab") as f:
            f.write(b"\0" * 4096)
    else:
        with open(log_file, "r+b") as f:
            f.seek(size - 3)
            f.write(b"\xff\xff\xff")
    again = PartitionLog(directory, LogConfig(index_interval_bytes=300), strict_recovery=True)
    assert again.log_end_offset == (good_end if damage == "zero_tail" else good_end - 2)
    again.close()


@pytest.mark.parametrize("where", ["first", "after_last_index_entry"])
def test_strict_recovery_refuses_corruption_before_the_tail(tmp_path: Path, where: str) -> None:
    from broker.log.segment import LogCorruptionError

    directory = tmp_path / "j-0"
    plog = PartitionLog(directory, LogConfig(index_interval_bytes=1000))
    fill(plog, 12)
    positions = [pos for pos, _h in rec.iter_batches(plog.read(0, 1 << 20).data)]
    last_indexed = max(plog.active.offset_index.pos)
    plog.close()
    pos = {"first": positions[0], "after_last_index_entry": next(p for p in positions if p > last_indexed)}[where]
    assert pos != positions[-1]
    log_file = directory / "00000000000000000000.log"
    with open(log_file, "r+b") as f:
        f.seek(pos + rec.HEADER_SIZE + 3)
        byte = f.read(1)
        f.seek(pos + rec.HEADER_SIZE + 3)
        f.write(bytes([byte[0] ^ 0xFF]))
    before = log_file.read_bytes()
    if where == "after_last_index_entry":
        with pytest.raises(LogCorruptionError, match="not a torn tail"):
            PartitionLog(directory, strict_recovery=True)
    else:
        # corruption below the last index entry is not scanned on open; the journal's replay checks every CRC
        PartitionLog(directory, strict_recovery=True).close()
    assert log_file.read_bytes() == before


def test_strict_recovery_refuses_to_drop_later_segments(tmp_path: Path) -> None:
    from broker.log.segment import LogCorruptionError

    directory = tmp_path / "j-0"
    plog = PartitionLog(directory, LogConfig(segment_bytes=700))
    fill(plog, 8)
    second = plog.segments[1]
    count = len(plog.segments)
    plog.close()
    os.truncate(second.log_path, second.size - 5)
    with pytest.raises(LogCorruptionError):
        PartitionLog(directory, LogConfig(segment_bytes=700), strict_recovery=True)
    assert len(list(directory.glob("*.log"))) == count
