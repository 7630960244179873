"""Recording what a test asks of the file system (fsync, rename, mkdir, write, rmtree), in order, to check that
files and names are made durable in the right order (broker.durable_files and its callers)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


class Events:
    """What the file system was asked to do, in order: ("fsync", path), ("replace", src, dst), ("rename", src,
    dst), ("mkdir", path), ("write", path), ("rmtree", path)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log: list[tuple[str, ...]] = []
        real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename
        real_mkdir, real_write, real_rmtree = os.mkdir, os.write, shutil.rmtree

        def path_of(fd: int) -> str:
            return os.readlink(f"/proc/self/fd/{fd}")

        def fsync(fd: int) -> None:
            self.log.append(("fsync", path_of(fd)))
            real_fsync(fd)

        def replace(src, dst, **kw) -> None:
            self.log.append(("replace", str(src), str(dst)))
            real_replace(src, dst, **kw)

        def rename(src, dst, **kw) -> None:
            self.log.append(("rename", str(src), str(dst)))
            real_rename(src, dst, **kw)

        def mkdir(path, *args, **kw) -> None:
            self.log.append(("mkdir", str(path)))
            real_mkdir(path, *args, **kw)

        def write(fd: int, data) -> int:
            self.log.append(("write", path_of(fd)))
            return real_write(fd, data)

        def rmtree(path, *args, **kw) -> None:
            self.log.append(("rmtree", str(path)))
            real_rmtree(path, *args, **kw)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "rename", rename)
        monkeypatch.setattr(os, "mkdir", mkdir)
        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(shutil, "rmtree", rmtree)

    def index(self, *event: str) -> int:
        return self.log.index(tuple(event))


def assert_replaced_durably(events: Events, path: Path) -> None:
    """The temporary file was written and fsynced before the rename, and the directory fsynced after it."""
    tmp = str(path) + ".tmp"
    renamed = events.index("replace", tmp, str(path))
    assert events.index("write", tmp) < events.index("fsync", tmp) < renamed
    assert ("fsync", str(path.parent)) in events.log[renamed + 1:]
