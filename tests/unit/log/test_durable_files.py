"""broker.durable_files: the order of writes, fsyncs and renames that makes a change survive a power loss, and the
files replaced through it (meta.properties, the log start offset checkpoint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker import durable_files
from broker.config import ensure_meta_properties
from broker.log.log_manager import write_checkpoint
from tests.helpers.fs_events import Events, assert_replaced_durably


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Events:
    return Events(monkeypatch)


def test_write_file_syncs_the_file_before_the_rename_and_the_directory_after(tmp_path: Path, events: Events):
    target = tmp_path / "state"
    target.write_bytes(b"old")
    durable_files.write_file(target, b"new contents")
    assert target.read_bytes() == b"new contents"
    assert not (tmp_path / "state.tmp").exists()
    assert events.log == [("write", str(tmp_path / "state.tmp")), ("fsync", str(tmp_path / "state.tmp")),
                          ("replace", str(tmp_path / "state.tmp"), str(target)), ("fsync", str(tmp_path))]


def test_write_file_overwrites_a_leftover_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "state.tmp").write_bytes(b"a much longer leftover of a crash")
    durable_files.write_file(tmp_path / "state", b"x")
    assert (tmp_path / "state").read_bytes() == b"x"


def test_make_dirs_syncs_each_new_directory_in_its_parent_top_down(tmp_path: Path, events: Events) -> None:
    durable_files.make_dirs(tmp_path / "a" / "b")
    a, b = tmp_path / "a", tmp_path / "a" / "b"
    assert events.log == [("mkdir", str(a)), ("fsync", str(tmp_path)), ("mkdir", str(b)), ("fsync", str(a))]
    events.log.clear()
    durable_files.make_dirs(b)  # nothing new: nothing done
    assert events.log == []


def test_make_dirs_refuses_a_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(OSError):
        durable_files.make_dirs(tmp_path / "f" / "d")


def test_rename_syncs_both_directories(tmp_path: Path, events: Events) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    (tmp_path / "x" / "f").write_bytes(b"1")
    events.log.clear()
    durable_files.rename(tmp_path / "x" / "f", tmp_path / "y" / "g")
    assert events.log[0] == ("rename", str(tmp_path / "x" / "f"), str(tmp_path / "y" / "g"))
    assert sorted(events.log[1:]) == [("fsync", str(tmp_path / "x")), ("fsync", str(tmp_path / "y"))]


def test_remove_tree_syncs_the_parent_after_the_removal(tmp_path: Path, events: Events) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "f").write_bytes(b"1")
    durable_files.remove_tree(tmp_path / "t-0")
    assert not (tmp_path / "t-0").exists()
    assert events.log[-2:] == [("rmtree", str(tmp_path / "t-0")), ("fsync", str(tmp_path))]


def test_meta_properties_is_written_durably(tmp_path: Path, events: Events) -> None:
    data = tmp_path / "data"
    cluster_id = ensure_meta_properties(data, 1, None)
    assert f"cluster.id={cluster_id}" in (data / "meta.properties").read_text()
    assert events.index("mkdir", str(data)) < events.index("fsync", str(tmp_path))  # the data directory's name
    assert_replaced_durably(events, data / "meta.properties")


def test_log_start_checkpoint_is_written_durably(tmp_path: Path, events: Events) -> None:
    write_checkpoint(tmp_path / "log-start-offset-checkpoint", {("t", 0): 5})
    assert_replaced_durably(events, tmp_path / "log-start-offset-checkpoint")
