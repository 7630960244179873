"""The log cleaner: Kafka's compaction semantics on real segment files, checked against a reference model
(the latest value per key), plus the dirty-ratio and lag rules, grouping, batch properties and checkpoints."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import swap
from broker.log.clean import CleaningSession
from broker.log.cleaner import CLEANER_CHECKPOINT, LogCleaner, ProcessWorker, cleanable_range
from broker.log.dir_failure import KafkaStorageError
from broker.log.log_manager import read_checkpoint
from protocol import records as rec
from tests.helpers.waiting import async_wait_until
from tests.unit.log.cleaner_helpers import (
    START_MS,
    Harness,
    append,
    compact_config,
    latest_view,
    read_all,
    records,
)

CODECS = [rec.COMPRESSION_NONE, rec.COMPRESSION_GZIP, rec.COMPRESSION_SNAPPY, rec.COMPRESSION_LZ4,
          rec.COMPRESSION_ZSTD]
DAY = 86_400_000


def updates(keys: int, rounds: int, size: int = 30) -> list[tuple[bytes, bytes]]:
    return [(b"key-%d" % k, b"v%d-%d-" % (k, r) + b"x" * size) for r in range(rounds) for k in range(keys)]


def cleaned_keys_once(plog, end: int) -> None:
    """Below `end` (the cleaned part) every key appears at most once."""
    seen: set[bytes] = set()
    for r in records(plog):
        if r.offset >= end:
            break
        assert r.key not in seen, f"key {r.key!r} twice below {end}"
        seen.add(r.key)


@pytest.mark.parametrize("codec", CODECS)
def test_one_round_keeps_the_latest_value_per_key_and_the_offsets(tmp_path: Path, codec: int) -> None:
    h = Harness(tmp_path)
    items = updates(20, 10)
    for i in range(0, len(items), 5):
        append(h.log, items[i:i + 5], compression=codec)
    h.log.roll()
    before = records(h.log)
    end = h.log.log_end_offset
    size_before = h.log.size_bytes
    assert h.clean()
    after = records(h.log)
    assert latest_view(after) == latest_view(before)
    assert len(after) == 20 and h.log.size_bytes < size_before / 4
    by_offset = {r.offset: (r.key, r.value, r.timestamp) for r in before}
    assert all(by_offset[r.offset] == (r.key, r.value, r.timestamp) for r in after)  # offsets kept, gaps allowed
    assert h.log.log_end_offset == end and h.log.log_start_offset == 0
    cleaned_keys_once(h.log, end)
    assert {hd.compression for hd, _ in read_all(h.log)} == {codec}
    assert read_checkpoint(tmp_path / CLEANER_CHECKPOINT) == {("t", 0): end}


def test_the_active_segment_is_never_cleaned(tmp_path: Path) -> None:
    h = Harness(tmp_path, compact_config(segment_bytes=1 << 30))
    for i in range(50):
        append(h.log, [(b"k", b"%d" % i)])
    assert not h.clean()
    assert len(records(h.log)) == 50


def test_a_quiet_topic_rolls_after_segment_ms_and_gets_cleaned(tmp_path: Path) -> None:
    h = Harness(tmp_path, compact_config(segment_bytes=1 << 30, segment_ms=60_000))
    for i in range(50):
        append(h.log, [(b"k", b"%d" % i)])
    h.clock.ms += 30_000
    assert not h.clean()
    h.clock.ms += 31_000
    assert h.clean()
    assert [(r.offset, r.value) for r in records(h.log)] == [(49, b"49")]
    assert len(h.log.segments) == 2 and h.log.active.empty


def test_max_compaction_lag_rolls_and_forces_cleaning_below_the_dirty_ratio(tmp_path: Path) -> None:
    cfg = compact_config(segment_bytes=1 << 30, min_cleanable_ratio=0.99, max_compaction_lag_ms=10_000)
    h = Harness(tmp_path, cfg)
    for i in range(20):
        append(h.log, [(b"k%d" % (i % 2), b"%d" % i)])
    h.clock.ms += 11_000  # the active segment is older than max.compaction.lag.ms: rolled, then due
    assert h.clean()
    assert [r.value for r in records(h.log)] == [b"18", b"19"]


def test_min_cleanable_ratio_decides(tmp_path: Path) -> None:
    h = Harness(tmp_path, compact_config(min_cleanable_ratio=0.5))
    items = updates(10, 20)
    for i in range(0, len(items), 10):
        append(h.log, items[i:i + 10])
    h.log.roll()
    assert h.clean()
    end = h.log.log_end_offset
    append(h.log, [(b"key-0", b"new")])  # a tiny dirty section
    h.log.roll()
    todo = cleanable_range(("t", 0), h.log, end, START_MS)
    assert 0 < todo.cleanable_ratio < 0.5
    assert not h.clean()
    h.log.reconfigure(replace(h.log.config, min_cleanable_ratio=0.01))  # live, as an AlterConfigs would
    assert h.clean()


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    h = Harness(tmp_path, compact_config(min_compaction_lag_ms=60_000))
    append(h.log, updates(5, 4), ts=START_MS - 120_000)
    h.log.roll()
    recent = append(h.log, updates(5, 4), ts=START_MS)
    h.log.roll()
    assert h.clean()
    offsets = [r.offset for r in records(h.log)]
    assert offsets[:5] == [15, 16, 17, 18, 19]  # the old segment is compacted on its own
    assert offsets[5:] == list(range(recent[0], recent[1] + 1))  # the recent one is untouched
    h.clock.ms += 61_000
    assert h.clean()
    assert [r.offset for r in records(h.log)] == list(range(recent[1] - 4, recent[1] + 1))


def test_tombstones_survive_their_first_cleaning_then_go_after_delete_retention(tmp_path: Path) -> None:
    h = Harness(tmp_path, compact_config(delete_retention_ms=DAY))
    append(h.log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
    append(h.log, [(b"a", None), (b"b", b"2")])
    h.log.roll()
    assert h.clean()
    batches = read_all(h.log)
    tombstone = [(hd, r) for hd, rs in batches for r in rs if r.value is None]
    assert len(tombstone) == 1
    hd, r = tombstone[0]
    assert r.key == b"a" and hd.has_delete_horizon and hd.base_timestamp == START_MS + DAY
    assert r.timestamp == START_MS  # the record keeps its timestamp (its delta is from the horizon)
    assert latest_view(records(h.log)) == {b"b": b"2", b"c": b"1"}
    append(h.log, [(b"d", b"1")])
    h.log.roll()
    h.clock.ms += DAY - 1
    assert h.clean()
    assert any(r.value is None for r in records(h.log))  # not yet
    append(h.log, [(b"e", b"1")])
    h.log.roll()
    h.clock.ms += 2
    assert h.clean()
    assert [r.key for r in records(h.log)] == [b"c", b"b", b"d", b"e"]


def test_rewritten_batches_keep_kafkas_batch_properties(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    # an idempotent producer's batch, LogAppendTime, a leader epoch
    h.log.leader_epoch = 7
    h.log.append(rec.build_batch([rec.Record(b"a", b"1"), rec.Record(b"b", b"1"), rec.Record(b"a", b"2")],
                                 timestamp=START_MS, producer_id=42, producer_epoch=3, base_sequence=10,
                                 compression=rec.COMPRESSION_LZ4), log_append_time=START_MS + 5)
    append(h.log, [(b"b", b"2")], producer_id=42, producer_epoch=3, base_sequence=13)
    append(h.log, [(b"z", b"z")])
    h.log.roll()
    assert h.clean()
    first, _second, _third = read_all(h.log)
    header, recs = first
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 2, 1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 10)
    assert header.partition_leader_epoch == 7 and header.compression == rec.COMPRESSION_LZ4
    assert header.is_log_append_time and header.max_timestamp == START_MS + 5
    assert [(r.offset, r.key, r.value, r.timestamp) for r in recs] == [(2, b"a", b"2", START_MS + 5)]


def test_the_last_batch_of_an_active_producer_stays_as_an_empty_batch(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    append(h.log, [(b"a", b"1"), (b"b", b"1")], producer_id=5, producer_epoch=0, base_sequence=0)
    append(h.log, [(b"a", b"2"), (b"b", b"2")], producer_id=6, producer_epoch=0, base_sequence=0)
    append(h.log, [(b"a", b"3"), (b"b", b"3")])
    append(h.log, [(b"z", b"1")])
    h.log.roll()
    assert h.clean()
    shape = [(hd.base_offset, hd.last_offset_delta, hd.records_count, hd.producer_id, hd.base_sequence)
             for hd, _ in read_all(h.log)]
    # producers 5 and 6 keep an empty batch each with their sequence numbers; the plain batch in between goes
    assert shape == [(0, 1, 0, 5, 0), (2, 1, 0, 6, 0), (4, 1, 2, -1, -1), (6, 0, 1, -1, -1)]
    assert records(h.log)[0].offset == 4
    # rebuilt from the headers after a restart, the producer state still knows both producers
    from broker.log.producer_state import ProducerStateTable  # noqa: PLC0415
    table = ProducerStateTable()
    for hd, _ in read_all(h.log):
        if hd.producer_id >= 0:
            from broker.log.producer_state import BatchMetadata  # noqa: PLC0415
            table.record(hd.producer_id, hd.producer_epoch, BatchMetadata(
                hd.base_sequence, hd.base_sequence + hd.last_offset_delta, hd.base_offset, hd.last_offset, 0))
    assert table.entry(5).last_seq == 1 and table.entry(6).last_seq == 1


def test_expired_producers_lose_their_last_batch(tmp_path: Path) -> None:
    h = Harness(tmp_path, broker={"producer.id.expiration.ms": "1000"})
    append(h.log, [(b"a", b"1")], producer_id=5, producer_epoch=0, base_sequence=0, ts=START_MS - 5000)
    append(h.log, [(b"a", b"2")])
    append(h.log, [(b"z", b"1")])
    h.log.roll()
    assert h.clean()
    assert [hd.producer_id for hd, _ in read_all(h.log)] == [-1, -1]


def test_the_broker_producer_state_decides_when_it_is_known(tmp_path: Path) -> None:
    seen = []

    def known(topic, partition, newer_than):
        seen.append((topic, partition, newer_than))
        return {}  # the broker knows producer 5 has expired (or never was): its batch may go

    h = Harness(tmp_path, producers=known)
    append(h.log, [(b"a", b"1")], producer_id=5, producer_epoch=0, base_sequence=0)
    append(h.log, [(b"a", b"2")])
    append(h.log, [(b"z", b"1")])
    h.log.roll()
    assert h.clean()
    assert seen == [("t", 0, START_MS - DAY)]
    assert [hd.producer_id for hd, _ in read_all(h.log)] == [-1, -1]


def test_cleaned_segments_are_grouped_instead_of_shrinking(tmp_path: Path) -> None:
    h = Harness(tmp_path, compact_config(segment_bytes=2000))
    for i in range(300):
        append(h.log, [(b"k%d" % (i % 40), b"v" * 60)])
    h.log.roll()
    many = len(h.log.segments)
    assert many > 15
    assert h.clean()  # the first round groups by the sizes before cleaning (as Kafka): mostly emptied segments
    assert len(h.log.segments) == many
    append(h.log, [(b"k0", b"new")])
    h.log.roll()
    assert h.clean()  # the next round merges the small cleaned segments
    segments = h.log.segments
    assert len(segments) <= 5, [s.size for s in segments]  # from 21
    assert all(s.size <= 2000 for s in segments)
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix == ".log")
    assert names == [f"{s.base_offset:020d}.log" for s in segments]
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]


def test_a_full_map_ends_the_round_early_and_later_rounds_finish(tmp_path: Path) -> None:
    # 120 bytes per key: a 1 MiB buffer maps ~7800 keys; 20 000 distinct keys take three rounds
    h = Harness(tmp_path, compact_config(segment_bytes=64 * 1024),
                broker={"log.cleaner.dedupe.buffer.size": str(1 << 20)})
    for i in range(0, 20_000, 100):
        append(h.log, [(b"key-%05d" % k, b"a") for k in range(i, i + 100)])
    for i in range(0, 20_000, 100):
        append(h.log, [(b"key-%05d" % k, b"b") for k in range(i, i + 100)])
    h.log.roll()
    end = h.log.log_end_offset
    ends = []
    while h.clean():
        ends.append(read_checkpoint(tmp_path / CLEANER_CHECKPOINT)[("t", 0)])
    assert len(ends) >= 3 and ends[-1] == end and ends == sorted(ends)
    after = records(h.log)
    assert len(after) == 20_000 and {r.value for r in after} == {b"b"}


def test_records_without_a_key_are_dropped(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    append(h.log, [(None, b"old"), (b"a", b"1")])  # written while the topic was not compacted
    append(h.log, [(b"z", b"1")])
    h.log.roll()
    assert h.clean()
    assert [(r.key, r.value) for r in records(h.log)] == [(b"a", b"1"), (b"z", b"1")]


def test_transaction_markers_go_once_their_transaction_has_no_batch_left(tmp_path: Path) -> None:
    # producer 9 has expired (an active producer's last data batch would stay, and its marker with it)
    h = Harness(tmp_path, compact_config(delete_retention_ms=1000), broker={"producer.id.expiration.ms": "1000"})
    old = START_MS - 5000
    append(h.log, [(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True, ts=old)
    commit = rec.Record(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")
    h.log.append(rec.build_batch([commit], timestamp=old, producer_id=9, producer_epoch=0, control=True,
                                 transactional=True))
    append(h.log, [(b"a", b"2")])
    append(h.log, [(b"z", b"1")])
    h.log.roll()
    assert h.clean()  # the data batch goes (a=2 supersedes it); the marker saw it, so it stays
    controls = [hd for hd, _ in read_all(h.log) if hd.is_control]
    assert len(controls) == 1 and not controls[0].has_delete_horizon
    append(h.log, [(b"y", b"1")])
    h.log.roll()
    assert h.clean()  # no batch of its transaction left: it gets a delete horizon
    controls = [hd for hd, _ in read_all(h.log) if hd.is_control]
    assert len(controls) == 1 and controls[0].has_delete_horizon
    h.clock.ms += 2000
    append(h.log, [(b"x", b"1")])
    h.log.roll()
    assert h.clean()
    assert not [hd for hd, _ in read_all(h.log) if hd.is_control]


def test_a_fetch_in_a_removed_gap_gets_the_next_batch(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(30):
        append(h.log, [(b"k%d" % (i % 3), b"%d" % i)])
    h.log.roll()
    assert h.clean()
    assert [r.offset for r in records(h.log)] == [27, 28, 29]
    for offset in (0, 5, 26, 27):
        header = rec.read_header(h.log.read(offset, 1000).data)
        assert header.base_offset == 27
    assert h.log.offset_for_timestamp(0) == (27, START_MS)


settings_ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ops = st.lists(st.tuples(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 12)),
                                            st.one_of(st.none(), st.binary(min_size=1, max_size=40))),
                                  min_size=1, max_size=8),
                         st.sampled_from(CODECS), st.booleans()), min_size=1, max_size=40)


@settings_
@given(ops, st.integers(1, 3))
def test_any_history_reads_back_as_the_latest_value_per_key(tmp_path_factory, history, rounds) -> None:
    tmp = tmp_path_factory.mktemp("c")
    h = Harness(tmp, compact_config(segment_bytes=600, delete_retention_ms=0))
    appended: list[rec.Record] = []
    for items, codec, roll in history:
        batch = [(None if k is None else b"k%d" % k, v) for k, v in items]
        base, _last = append(h.log, batch, compression=codec)
        appended += [rec.Record(k, v, offset=base + i) for i, (k, v) in enumerate(batch)]
        if roll:
            h.log.roll()
    h.log.roll()
    end = h.log.log_end_offset
    expected = latest_view(appended)
    for _ in range(rounds):
        h.clean()
        h.clock.ms += 1
        after = records(h.log)
        assert latest_view(after) == expected
        original = {r.offset: (r.key, r.value) for r in appended}
        assert all(original[r.offset] == (r.key, r.value) for r in after)
        assert [r.offset for r in after] == sorted({r.offset for r in after})
        cleaned_keys_once(h.log, end)
    # two more rounds (something new makes the log dirty): no tombstone (delete.retention.ms=0) is left
    for _ in range(2):
        append(h.log, [(b"fresh", b"1")])
        h.log.roll()
        assert h.clean()
        h.clock.ms += 1
    final = records(h.log)
    assert all(r.value is not None and r.key is not None for r in final)
    assert {r.key: r.value for r in final} == {**expected, b"fresh": b"1"}


def test_a_round_in_a_cleaner_process(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(0, 400, 4):
        append(h.log, updates(4, 1)[:4] if i % 8 else [(b"k%d" % (i % 13), b"%d" % i)] * 4)
    h.log.roll()
    expected = latest_view(records(h.log))

    async def run() -> tuple[bool, int | None]:
        cleaner = LogCleaner(h.manager, h.cleaner_config, clock=h.clock, worker=ProcessWorker)
        cleaned = await cleaner.clean_once()
        pid = cleaner._workers[0].pid
        await cleaner.close()
        return cleaned, pid

    cleaned, pid = asyncio.run(run())
    assert cleaned and pid is not None and pid != os.getpid()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    assert latest_view(records(h.log)) == expected and len(records(h.log)) == len(expected)


def test_closing_stops_a_round_in_progress_and_leaves_nothing_behind(tmp_path: Path) -> None:
    # 200 KB/s: cleaning these ~2 MB takes ~10 s, so close() lands in the middle
    h = Harness(tmp_path, compact_config(segment_bytes=256 * 1024),
                broker={"log.cleaner.io.max.bytes.per.second": "200000", "log.cleaner.io.buffer.size": "16384"})
    for i in range(2000):
        append(h.log, [(b"key-%d" % (i % 100), b"x" * 1000)])
    h.log.roll()
    expected = latest_view(records(h.log))

    async def run() -> tuple[bool, float]:
        cleaner = LogCleaner(h.manager, h.cleaner_config, clock=h.clock, worker=ProcessWorker)
        task = asyncio.create_task(cleaner.clean_once())
        await async_wait_until(lambda: cleaner._workers and cleaner._workers[0].pid, 20, "the cleaner's worker",
                               interval=0.02)
        # Not a wait for a state: the round runs ~10 s from here and close() must stop it at any point; this only
        # lets the worker get past its start-up into the reading.
        await asyncio.sleep(0.5)
        started = time.monotonic()
        await cleaner.close()
        return await task, time.monotonic() - started

    cleaned, took = asyncio.run(run())
    assert cleaned is False and took < 5
    assert not [p for p in h.log.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert latest_view(records(h.log)) == expected


def test_compact_delete_topics_are_also_trimmed_by_retention_but_not_while_cleaned(tmp_path: Path) -> None:
    cfg = replace(compact_config(segment_bytes=600), delete=True, retention_ms=60_000)
    h = Harness(tmp_path, cfg)
    for i in range(40):
        append(h.log, [(b"k%d" % (i % 4), b"%d" % i + b"-" * 40)], ts=START_MS - 120_000 if i < 20 else START_MS)
    h.log.roll()
    old_segments = [s for s in h.log.segments if 0 <= s.max_timestamp < START_MS - 60_000]
    assert len(old_segments) >= 2
    h.log.cleaning = True  # the cleaner is replacing segments: retention waits for the next pass
    assert h.manager.apply_retention(START_MS) == 0
    h.log.cleaning = False
    assert h.manager.apply_retention(START_MS) == len(old_segments)
    assert h.log.log_start_offset == 20
    assert h.clean()
    assert latest_view(records(h.log)) == {b"k%d" % k: b"%d" % (36 + k) + b"-" * 40 for k in range(4)}


def test_an_unexpected_failure_makes_the_log_uncleanable_not_the_cleaner(tmp_path: Path, monkeypatch) -> None:
    h = Harness(tmp_path)
    for i in range(20):
        append(h.log, [(b"k", b"%d" % i)])
    h.log.roll()

    def broken(self, index):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CleaningSession, "clean_group", broken)

    async def run() -> tuple[bool, bool]:
        cleaner = h.new_cleaner()
        first = await cleaner.clean_once()
        second = await cleaner.clean_once()  # the log is skipped now
        await cleaner.close()
        return first, second

    assert asyncio.run(run()) == (False, False)
    assert len(records(h.log)) == 20 and not h.log.cleaning
    monkeypatch.undo()
    assert h.clean()  # after a restart (a new cleaner) it is tried again


def test_a_failed_swap_takes_the_log_directory_offline(tmp_path: Path, monkeypatch) -> None:
    """As Kafka's cleaner on an IOException: once the swap has started, a failed rename/delete/fsync leaves the
    directory in a state only recovery can finish, so the directory goes offline (a full disk does not: see
    test_an_unexpected_failure_makes_the_log_uncleanable_not_the_cleaner)."""
    h = Harness(tmp_path)
    for i in range(20):
        append(h.log, [(b"k", b"%d" % i)])
    h.log.roll()

    def broken(*_args):
        raise OSError(28, "No space left on device")  # even a full disk, once the swap is under way

    monkeypatch.setattr(swap, "finish_swap", broken)
    assert not h.clean()
    monkeypatch.undo()
    assert h.log.failures.offline
    with pytest.raises(KafkaStorageError):
        append(h.log, [(b"k", b"after")])
