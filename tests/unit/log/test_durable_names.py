"""Names in the log directory made durable: a new log's directory and its name, a rolled segment, index files,
removed and moved-aside partition directories (the fsyncs recorded in order, see tests/helpers/fs_events.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.log_manager import LogManager, delete_logs
from broker.log.partition_log import PartitionLog
from protocol import records as rec
from tests.helpers.fs_events import Events


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Events:
    return Events(monkeypatch)


def _batch() -> bytes:
    return rec.build_batch([rec.Record(key=None, value=b"v")], timestamp=1)


def test_a_new_log_syncs_its_directory_and_its_name_before_its_first_append_is_durable(
        tmp_path: Path, events: Events) -> None:
    manager = LogManager(tmp_path / "logs")
    manager.start()
    plog = manager.get_or_create("t", 0)
    plog.append(_batch())
    plog.flush()
    synced = {e[1] for e in events.log if e[0] == "fsync"}
    assert {str(plog.active.log_path), str(tmp_path / "logs" / "t-0"), str(tmp_path / "logs")} <= synced
    events.log.clear()
    plog.append(_batch())
    plog.flush()  # the names are durable already: only the data now
    assert [e for e in events.log if e[0] == "fsync"] == [("fsync", str(plog.active.log_path))]
    manager.close()


def test_a_roll_syncs_the_directory_with_the_new_segment(tmp_path: Path, events: Events) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    plog.append(_batch())
    plog.flush()
    plog.roll()
    plog.append(_batch())
    events.log.clear()
    plog.flush()
    synced = {e[1] for e in events.log if e[0] == "fsync"}
    assert {str(plog.active.log_path), str(tmp_path / "t-0")} <= synced
    plog.close()


def test_a_reopened_log_syncs_its_names_again_on_its_first_append(tmp_path: Path, events: Events) -> None:
    """A process killed after it made a directory, before any fsync, leaves names that may not be on disk: the
    next process cannot tell, so its first flush syncs them."""
    PartitionLog(tmp_path / "t-0").close()  # created, never written: nothing synced
    assert not [e for e in events.log if e[0] == "fsync"]
    plog = PartitionLog(tmp_path / "t-0")
    plog.append(_batch())
    plog.flush()
    synced = {e[1] for e in events.log if e[0] == "fsync"}
    assert {str(tmp_path / "t-0"), str(tmp_path)} <= synced
    plog.close()


def test_deleted_logs_are_gone_durably_with_one_sync_of_the_log_directory(tmp_path: Path, events: Events) -> None:
    manager = LogManager(tmp_path / "logs")
    manager.start()
    logs = [manager.get_or_create("t", p) for p in range(3)]
    for p in range(3):
        manager.detach("t", p)
    events.log.clear()
    delete_logs(logs)
    assert not any((tmp_path / "logs" / f"t-{p}").exists() for p in range(3))
    removed = [i for i, e in enumerate(events.log) if e[0] == "rmtree"]
    syncs = [i for i, e in enumerate(events.log) if e == ("fsync", str(tmp_path / "logs"))]
    assert len(removed) == 3 and len(syncs) == 1 and syncs[0] > max(removed)
    manager.close()


def test_a_log_moved_aside_is_renamed_durably(tmp_path: Path, events: Events) -> None:
    manager = LogManager(tmp_path / "logs")
    manager.start()
    manager.get_or_create("t", 0)
    events.log.clear()
    target = manager.move_aside("t", 0)
    renamed = events.index("rename", str(tmp_path / "logs" / "t-0"), str(target))
    assert ("fsync", str(tmp_path / "logs")) in events.log[renamed + 1:]
    manager.close()
