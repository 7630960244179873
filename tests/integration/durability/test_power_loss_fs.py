"""The power-loss file system (tests/helpers/powerloss_fs.py) itself: what a loss keeps is exactly what was
fsynced, directory entries included, so the broker's power-loss tests can fail."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

from tests.helpers.powerloss_mount import PowerLossMount, fuse_available
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def fs(tmp_path: Path):
    why = fuse_available()
    if why is not None:
        pytest.fail(f"the power-loss file system needs FUSE: {why}")
    mount = PowerLossMount(tmp_path / "backing", tmp_path / "mnt", tmp_path / "fs.log").mount()
    try:
        yield mount
    finally:
        mount.unmount()


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_unsynced_data_is_lost_and_synced_data_kept(fs):
    m = fs.mountpoint
    write_file(m / "a", b"durable", sync=True)
    fsync_path(m)
    write_file(m / "a", b" lost", sync=False)
    assert (m / "a").read_bytes() == b"durable lost"  # the page cache would keep it through a kill -9
    loss = fs.power_loss("drop")
    assert loss["bytes"] == 5
    assert (m / "a").read_bytes() == b"durable"


def test_a_create_not_followed_by_a_directory_fsync_is_lost(fs):
    m = fs.mountpoint
    write_file(m / "synced-file-unsynced-entry", b"data", sync=True)
    (m / "dir").mkdir()
    fs.power_loss("drop")
    assert sorted(os.listdir(m)) == []


def test_renames_and_unlinks_need_a_directory_fsync(fs):
    m = fs.mountpoint
    for name in ("old", "gone"):
        write_file(m / name, name.encode(), sync=True)
    fsync_path(m)
    os.rename(m / "old", m / "new")
    os.unlink(m / "gone")
    assert sorted(os.listdir(m)) == ["new"]
    fs.power_loss("drop")
    assert sorted(os.listdir(m)) == ["gone", "old"]  # both undone
    assert (m / "old").read_bytes() == b"old"
    os.rename(m / "old", m / "new")
    fsync_path(m)
    fs.power_loss("drop")
    assert sorted(os.listdir(m)) == ["gone", "new"]
    assert (m / "new").read_bytes() == b"old"


def test_a_truncate_needs_an_fsync(fs):
    m = fs.mountpoint
    write_file(m / "f", b"0123456789", sync=True)
    fsync_path(m)
    os.truncate(m / "f", 3)
    fs.power_loss("drop")
    assert (m / "f").read_bytes() == b"0123456789"


def test_a_torn_loss_keeps_a_prefix_of_the_pending_writes_or_zeros(fs):
    m = fs.mountpoint
    write_file(m / "f", b"base:", sync=True)
    fsync_path(m)
    kept = set()
    zeroed = 0
    for seed in range(30):
        write_file(m / "f", b"abcdefghij" * 10, sync=False)
        fs.power_loss("torn", seed)
        data = (m / "f").read_bytes()
        assert data.startswith(b"base:")
        tail = data[5:]
        if tail == bytes(100):
            zeroed += 1  # the size persisted, not the data
        else:
            assert tail == (b"abcdefghij" * 10)[:len(tail)], tail
            kept.add(len(tail))
        fd = os.open(m / "f", os.O_WRONLY)
        os.ftruncate(fd, 5)
        os.fsync(fd)
        os.close(fd)
    assert 0 in kept and len(kept) > 2, kept  # sometimes nothing, sometimes part
    assert zeroed > 0


def test_arm_freezes_the_writer_before_the_change(fs):
    m = fs.mountpoint
    write_file(m / "f", b"one", sync=True)
    fsync_path(m)
    fs.arm(2)  # the write goes through, its fsync is where the power fails
    done = threading.Event()

    def writer() -> None:
        fd = os.open(m / "f", os.O_WRONLY | os.O_APPEND)
        os.write(fd, b" two")
        with contextlib.suppress(OSError):  # the file system went away under it
            os.fsync(fd)
        done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    wait_until(fs.frozen, 10, "the file system frozen")
    assert not done.is_set()
    fs.power_loss("drop")
    thread.join(10)
    assert (m / "f").read_bytes() == b"one"
