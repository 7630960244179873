"""Crash-safe replacement of segments by a cleaned one: Kafka's `.cleaned` -> `.swap` -> replace protocol.

The cleaner writes `<base>.log.cleaned` (+ `.index.cleaned`, `.timeindex.cleaned`, and `.txnindex.cleaned` when
the cleaned segment keeps aborted transactions) and fsyncs it. Then:
1. `commit_cleaned` (worker thread): rename the cleaned files to `.swap`, the log first, and fsync the directory.
   From the moment `<base>.log.swap` exists, the swap is decided: recovery completes it.
2. `PartitionLog.install_cleaned` (event loop): the log's segment list holds the new segment (still named
   `.swap`) instead of the old ones; readers use it from then on.
3. `finish_swap` (worker thread): delete the old segments' files, fsync the directory, rename the `.swap` files
   to their final names (the log first), fsync the directory again.

`complete_interrupted_swaps` runs when a log is opened (before its segments are read): `.cleaned`, `.deleted` and
`.tmp` files are leftovers of an unfinished step 0 and are deleted (roll back), except the `.cleaned` index files
of a committed swap (a crash in step 1 between the log's rename and theirs): they are renamed to `.swap` with it (a
`.txnindex` cannot be rebuilt from a cleaned segment whose aborted batches are gone); a `<base>.log.swap` means the
crash came after step 1: every other segment file whose base offset lies in [base, the swap's next offset) is
deleted and the `.swap` files take their final names (roll forward). A `.swap` index file without a `.swap` log
means the crash came in the middle of the final renames: it is renamed too.

`CRASH_HOOK` (tests): called with the name of each step; raising there simulates a crash between two steps.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import structlog

from broker.durable_files import fsync_dir
from broker.log.clean import CLEANED_SUFFIX, SWAP_SUFFIX
from broker.log.files import FileCache
from broker.log.segment import Segment

log = structlog.get_logger(__name__)

CRASH_HOOK: Callable[[str], None] | None = None
_KINDS = (".log", ".index", ".timeindex", ".txnindex")
_LEFTOVERS = (CLEANED_SUFFIX, ".deleted", ".tmp")


def crash_point(step: str) -> None:
    if CRASH_HOOK is not None:
        CRASH_HOOK(step)


def _name(base: int, kind: str, suffix: str = "") -> str:
    return f"{base:020d}{kind}{suffix}"


def _segment_file(name: str) -> tuple[int, str, str] | None:
    """(base offset, kind, suffix) of a segment file name such as `00000000000000000042.index.swap`."""
    parts = name.split(".")
    if len(parts) not in (2, 3) or not parts[0].isdigit() or f".{parts[1]}" not in _KINDS:
        return None
    return int(parts[0]), f".{parts[1]}", f".{parts[2]}" if len(parts) == 3 else ""


def commit_cleaned(directory: Path, base: int) -> None:
    """Step 1: `.cleaned` -> `.swap`, the log file first (its rename is the commit point)."""
    crash_point("before-swap-rename")
    for kind in _KINDS:
        source = directory / _name(base, kind, CLEANED_SUFFIX)
        target = directory / _name(base, kind, SWAP_SUFFIX)
        try:
            os.rename(source, target)
        except FileNotFoundError:
            if kind == ".log":
                raise
            target.unlink(missing_ok=True)  # an index never written
        crash_point(f"after-swap-rename{kind}")
    fsync_dir(directory)
    crash_point("swap-committed")


def is_committed(directory: Path, base: int) -> bool:
    """Whether the swap of the cleaned segment `base` is decided (its `.log.swap` exists)."""
    return (directory / _name(base, ".log", SWAP_SUFFIX)).exists()


def open_swapped(directory: Path, base: int, *, index_interval_bytes: int, files: FileCache) -> Segment:
    """The committed cleaned segment, opened (and checked) under its `.swap` names."""
    segment = Segment(directory, base, index_interval_bytes=index_interval_bytes, files=files, suffix=SWAP_SUFFIX)
    try:
        segment.recover()
    except BaseException:
        segment.close()
        raise
    return segment


def finish_swap(directory: Path, cleaned: Segment, olds: list[Segment]) -> None:
    """Step 3, after the log serves `cleaned` instead of `olds`."""
    for old in olds:
        old.delete()
        crash_point("after-old-deleted")
    fsync_dir(directory)  # the old files are gone for good before the cleaned segment takes their names
    crash_point("before-final-rename")
    cleaned.change_suffix("", after_log=lambda: crash_point("after-final-log-rename"))
    fsync_dir(directory)
    crash_point("swap-done")


def abandon_cleaned(directory: Path, base: int) -> None:
    """Delete a cleaned segment that will not be swapped in (before step 1)."""
    for kind in _KINDS:
        (directory / _name(base, kind, CLEANED_SUFFIX)).unlink(missing_ok=True)


def complete_interrupted_swaps(directory: Path, files: FileCache) -> int:
    """Roll back unfinished cleanings and roll forward committed swaps (see the module docstring). Returns the
    number of swaps completed."""
    names = os.listdir(directory)
    changed = False

    def forget(name: str) -> None:
        # A process that failed half way through a swap and opens the log again (same process, same cache) may
        # still cache descriptors by these names: after this they would be other files (an old segment deleted
        # here, a `.swap` file renamed to its final name), so reads and appends would go to the wrong inode.
        files.forget(str(directory / name))

    committed = {parsed[0] for n in names
                 if (parsed := _segment_file(n)) is not None and parsed[1:] == (".log", SWAP_SUFFIX)}
    for name in names:
        parsed = _segment_file(name)
        if parsed is not None and parsed[2] == CLEANED_SUFFIX and parsed[0] in committed:
            # an index of a committed swap not yet renamed (the log's rename is the commit point)
            forget(name)
            os.replace(directory / name, directory / _name(parsed[0], parsed[1], SWAP_SUFFIX))
            changed = True
    names = os.listdir(directory)

    for name in names:
        if name.endswith(_LEFTOVERS):
            forget(name)
            (directory / name).unlink(missing_ok=True)
            changed = True
    names = [n for n in names if not n.endswith(_LEFTOVERS)]
    swapped_logs = sorted(parsed[0] for n in names
                          if (parsed := _segment_file(n)) is not None and parsed[1:] == (".log", SWAP_SUFFIX))
    ranges = []
    for base in swapped_logs:
        segment = Segment(directory, base, files=files, suffix=SWAP_SUFFIX)
        try:
            segment.recover()
            ranges.append((base, max(segment.next_offset, base + 1)))
        finally:
            segment.close()
    names = [n for n in os.listdir(directory) if not n.endswith(_LEFTOVERS)]  # recovery may have rebuilt indexes
    for name in names:
        parsed = _segment_file(name)
        if parsed is None or parsed[2]:
            continue
        if any(lo <= parsed[0] < hi for lo, hi in ranges):
            log.info("deleting segment file replaced by an interrupted swap", dir=str(directory), file=name)
            forget(name)
            (directory / name).unlink(missing_ok=True)
            changed = True
    for kind in _KINDS:  # the log first, as in finish_swap
        for name in names:
            parsed = _segment_file(name)
            if parsed is not None and parsed[1] == kind and parsed[2] == SWAP_SUFFIX:
                log.info("completing interrupted swap", dir=str(directory), file=name)
                forget(name)
                forget(name[:-len(SWAP_SUFFIX)])
                with contextlib.suppress(FileNotFoundError):
                    os.rename(directory / name, directory / name[:-len(SWAP_SUFFIX)])
                changed = True
    if changed:
        fsync_dir(directory)
    return len(ranges)
