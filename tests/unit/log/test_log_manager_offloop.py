"""LogManager on a serving event loop: dropped segments are renamed `.deleted` at once and unlinked in a worker
thread; the log start offset checkpoint (two fsyncs) is written in a worker thread, moves coalesced."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from broker.log import LogConfig, LogManager, log_manager
from broker.log.log_manager import LOG_START_CHECKPOINT, read_checkpoint
from tests.helpers.record_batches import batch


def _fill(plog, n: int) -> None:
    for _ in range(n):
        plog.append(batch(2, value_size=100, ts=1))


def _guard_loop_thread(monkeypatch, names: tuple[str, ...]) -> list[str]:
    """Record calls of os functions by name, failing any made on the loop's thread."""
    loop_thread = threading.get_ident()
    calls: list[str] = []
    for name in names:
        real = getattr(log_manager.os, name)

        def guarded(*args, _real=real, _name=name, **kwargs):
            assert threading.get_ident() != loop_thread, f"os.{_name} on the event loop"
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(log_manager.os, name, guarded)
    return calls


def test_retention_renames_on_the_loop_and_unlinks_in_a_thread(tmp_path: Path, monkeypatch) -> None:
    manager = LogManager(tmp_path, LogConfig(segment_bytes=700, retention_ms=1))
    manager.start()
    plog = manager.get_or_create("t", 0)
    _fill(plog, 8)
    before = len(plog.segments)
    calls = _guard_loop_thread(monkeypatch, ("unlink",))

    async def scenario() -> None:
        deleted = manager.apply_retention(now_ms=10_000)
        assert deleted == before - 1 and len(plog.segments) == 1
        names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
        # gone from the log at once; on disk only under names the next start removes
        assert [n for n in names if n.endswith(".log")] == [plog.segments[0].log_path.name]
        assert any(n.endswith(".log.deleted") for n in names)
        await manager.wait_deletions()

    asyncio.run(scenario())
    assert calls and not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())
    manager.close()


def test_a_crash_before_the_unlink_does_not_bring_segments_back(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(segment_bytes=700, retention_ms=1))
    manager.start()
    plog = manager.get_or_create("t", 0)
    _fill(plog, 8)
    end = plog.log_end_offset

    async def scenario() -> int:
        manager.apply_retention(now_ms=10_000)
        return plog.log_start_offset  # the worker thread has not run yet: the files are only renamed

    start = asyncio.run(scenario())  # the loop ends before the unlink task runs (a crash, as far as files go)
    again = LogManager(tmp_path)
    again.start()
    reopened = again.get("t", 0)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (start, end)
    assert not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())
    again.close()


def test_checkpoint_is_written_off_the_loop_and_moves_coalesce(tmp_path: Path, monkeypatch) -> None:
    manager = LogManager(tmp_path, LogConfig(segment_bytes=700))
    manager.start()
    plog = manager.get_or_create("t", 0)
    _fill(plog, 8)
    calls = _guard_loop_thread(monkeypatch, ("fsync",))

    async def scenario() -> None:
        plog.delete_records_before(3)
        plog.delete_records_before(5)
        plog.delete_records_before(7)
        await manager.wait_deletions()

    asyncio.run(scenario())
    assert read_checkpoint(tmp_path / LOG_START_CHECKPOINT) == {("t", 0): 7}
    assert 0 < calls.count("fsync") <= 4  # file + directory, at most twice for three moves
    monkeypatch.undo()
    manager.close()
    again = LogManager(tmp_path)
    again.start()
    assert again.get("t", 0).log_start_offset == 7
    again.close()


def test_an_older_checkpoint_never_overwrites_a_newer_one(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(segment_bytes=700))
    manager.start()
    plog = manager.get_or_create("t", 0)
    _fill(plog, 8)
    plog.delete_records_before(3)  # no loop: written at once
    stale = manager._checkpoint_entries()
    plog.delete_records_before(6)
    manager._write_checkpoint(*stale)  # a worker's write that lost the race with a newer one
    assert read_checkpoint(tmp_path / LOG_START_CHECKPOINT) == {("t", 0): 6}
    manager.close()


def test_log_start_durable_waits_for_the_checkpoint_of_every_move(tmp_path: Path) -> None:
    """DeleteRecords answers after log_start_durable: by then the file holds the move (so a kill -9 keeps it)."""
    manager = LogManager(tmp_path, LogConfig(segment_bytes=700))
    manager.start()
    plog = manager.get_or_create("t", 0)
    _fill(plog, 8)

    async def scenario() -> tuple[bool, dict, bool]:
        plog.delete_records_before(3)
        first = await manager.log_start_durable()
        seen = read_checkpoint(tmp_path / LOG_START_CHECKPOINT)
        return first, seen, await manager.log_start_durable()  # nothing moved since: at once

    first, seen, again = asyncio.run(scenario())
    assert first and again and seen == {("t", 0): 3}
    manager.close()


def test_log_start_durable_reports_a_failed_write(tmp_path: Path, monkeypatch) -> None:
    manager = LogManager(tmp_path, LogConfig(segment_bytes=700))
    manager.start()
    plog = manager.get_or_create("t", 0)
    _fill(plog, 8)

    def full_disk(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log_manager, "write_checkpoint", full_disk)

    async def scenario() -> bool:
        plog.delete_records_before(5)
        return await manager.log_start_durable()

    assert asyncio.run(scenario()) is False
    monkeypatch.undo()
    manager.close()
