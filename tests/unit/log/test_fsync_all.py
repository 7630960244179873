"""fsync_all: a flush's descriptors are synced concurrently, errors come back after every sync finished."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from broker.log.fsync import fsync_all


def open_files(tmp_path: Path, n: int) -> list[int]:
    return [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT) for i in range(n)]


def test_descriptors_are_synced_at_the_same_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fds = open_files(tmp_path, 4)
    barrier = threading.Barrier(len(fds), timeout=5)  # broken unless all four fsyncs run together
    synced: list[int] = []

    def fsync(fd: int) -> None:
        barrier.wait()
        synced.append(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    try:
        fsync_all(fds)
    finally:
        monkeypatch.undo()
        for fd in fds:
            os.close(fd)
    assert sorted(synced) == sorted(fds)


def test_an_error_is_raised_after_every_sync_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fds = open_files(tmp_path, 3)
    release = threading.Event()
    finished: list[int] = []

    def fsync(fd: int) -> None:
        if fd == fds[2]:
            release.wait(5)  # the slow one: fsync_all must still be waiting for it when the error is known
            finished.append(fd)
            return
        if fd == fds[0]:
            threading.Timer(0.05, release.set).start()
            raise OSError(5, "EIO")
        finished.append(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    try:
        with pytest.raises(OSError, match="EIO"):
            fsync_all(fds)
        assert sorted(finished) == sorted(fds[1:])  # the slow sync was waited for before raising
    finally:
        monkeypatch.undo()
        for fd in fds:
            os.close(fd)


def test_real_files(tmp_path: Path) -> None:
    fds = open_files(tmp_path, 3)
    try:
        for fd in fds:
            os.write(fd, b"x")
        fsync_all(fds)
        fsync_all(fds[:1])
        fsync_all([])
    finally:
        for fd in fds:
            os.close(fd)
