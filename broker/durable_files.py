"""Durable changes to the file system: the one place that knows the order of writes, renames and fsyncs.

A file replaced as a unit (meta.properties, the log start offset checkpoint) is written to `<name>.tmp`, the
temporary file is fsynced, renamed over the target, and then the directory is fsynced. Without the first fsync a
power loss can leave the new name pointing at an empty or partial file (the rename is journaled before the data
is written back); without the second the rename itself may be lost. A new directory is durable once its parent
is fsynced after the `mkdir`; a removed one once its parent is fsynced after the removal.

Every call here blocks (fsync): a serving event loop runs them in a worker thread. Imports only the standard
library, so every layer (broker/config and broker/log included) may use it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make the directory's entries (files created, renamed or removed in it) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Make the file's data durable (not its name: see fsync_dir)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Replace `path` by a file holding `data`, atomically and durably: after a crash or a power loss at any
    moment the file holds either its old contents or `data`, and once this returns, `data`.

    The steps: write `<name>.tmp` (created or truncated), fsync it, rename it over `path`, fsync the directory.
    One writer per path at a time (the temporary name is fixed, so a leftover of a crash is simply rewritten)."""
    target = Path(path)
    tmp = target.with_name(target.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    fsync_dir(target.parent)


def make_dirs(path: str | os.PathLike[str]) -> None:
    """`mkdir -p`, durably: each directory created is followed by an fsync of its parent, from the top down, so
    a directory's entry is on disk before anything inside it can be. Existing directories are left alone."""
    target = Path(path)
    missing: list[Path] = []
    current = target
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:
            if not directory.is_dir():
                raise
            # made concurrently by someone else, whose fsync of the parent may not have happened yet: sync it here
            # too, so nothing made inside it is durable before its own name is
        fsync_dir(directory.parent)


def rename(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Rename a file or directory and make the rename durable (both directories fsynced when they differ)."""
    src, dst = Path(source), Path(target)
    os.rename(src, dst)
    fsync_dir(dst.parent)
    if src.parent != dst.parent:
        fsync_dir(src.parent)


def remove_tree(path: str | os.PathLike[str], *, sync_parent: bool = True) -> None:
    """Remove a directory and everything in it (missing is fine); with `sync_parent`, fsync its parent so the
    removal survives a power loss. Callers removing many siblings pass False and fsync the parent once."""
    target = Path(path)
    shutil.rmtree(target, ignore_errors=True)
    if sync_parent and target.parent.is_dir():
        fsync_dir(target.parent)
