"""LogManager: every partition log under one log directory.

Partition directories are named `<topic>-<partition>`. Log start offsets moved by DeleteRecords are kept in Kafka's
`log-start-offset-checkpoint` file (format: version line `0`, entry count, then `topic partition offset` lines),
rewritten atomically when one changes. Offsets moved by retention need no checkpoint: they equal the first
segment's base offset, which is what a log opens with anyway.

On a serving event loop neither of the slow file operations runs on the loop: the checkpoint (two fsyncs) is
written in a worker thread, moves that happen meanwhile coalesced into the next write (Kafka writes it
periodically); a segment dropped by retention or DeleteRecords is renamed `.deleted` on the loop (so a crash
cannot bring it back: opening a log removes such files) and unlinked in a worker thread, as Kafka deletes
segments asynchronously.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import structlog

from broker import durable_files
from broker.log.config import LogConfig
from broker.log.dir_failure import LogDirFailureChannel
from broker.log.files import SHARED, FileCache
from broker.log.partition_log import PartitionLog
from broker.log.segment import Segment

log = structlog.get_logger(__name__)

LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
# Partition logs are opened (recovered) and created by this many threads at once: the work is mostly system calls
# (directory listings, stat, index reads), which run outside the GIL.
OPEN_THREADS = 4
# The metadata journal's directory (KRaft's `__cluster_metadata-0`): never a topic partition managed here.
METADATA_LOG_DIR = "__cluster_metadata-0"
STRAY_SUFFIX = "-stray"


class ReservedDirectoryError(ValueError):
    """A topic partition would live in a directory reserved for the broker's own logs."""


def partition_dir_name(topic: str, partition: int) -> str:
    name = f"{topic}-{partition}"
    if name == METADATA_LOG_DIR:
        raise ReservedDirectoryError(f"{name} is the metadata journal's directory")
    return name


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit() or name == METADATA_LOG_DIR:
        return None
    return topic, int(number)


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    if len(lines) < 2 or lines[0].strip() != "0":
        log.warning("ignoring unreadable checkpoint", path=str(path))
        return {}
    out = {}
    for line in lines[2:2 + int(lines[1])]:
        parts = line.split()
        if len(parts) == 3:
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


def write_checkpoint(path: Path, entries: Mapping[tuple[str, int], int]) -> None:
    text = "0\n" + f"{len(entries)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items()))
    durable_files.write_file(path, text.encode())


def existing_logs(log_dir: Path) -> list[str]:
    """Names of the logs already in `log_dir`: partition directories (moved-aside ones too) and the metadata
    journal's. Empty for a directory a broker has never used (or one that does not exist)."""
    try:
        names = os.listdir(log_dir)
    except FileNotFoundError:
        return []
    return sorted(name for name in names
                  if (name == METADATA_LOG_DIR or parse_partition_dir(name) is not None or name.endswith(STRAY_SUFFIX))
                  and (log_dir / name).is_dir())


class LogManager:
    def __init__(self, log_dir: Path | str, defaults: LogConfig | Mapping[str, object] | None = None, *,
                 clock: Callable[[], float] = time.time, leader_epoch: int | None = None,
                 files: FileCache | None = None, failures: LogDirFailureChannel | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.failures = failures or LogDirFailureChannel(str(self.log_dir))
        self.files = files if files is not None else SHARED  # an empty cache is falsy (__len__)
        self.defaults = LogConfig.coerce(defaults)
        self._clock = clock
        self._leader_epoch = leader_epoch
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._checkpoint_path = self.log_dir / LOG_START_CHECKPOINT
        self._checkpointed = read_checkpoint(self._checkpoint_path)
        self._checkpoint_lock = threading.Lock()  # one writer of the file at a time (loop's thread or a worker)
        self._checkpoint_taken = 0  # generation of the last entries taken for a write
        self._checkpoint_written = 0  # generation last written: an older snapshot never overwrites a newer one
        self._checkpoint_wanted = False
        self._checkpoint_task: asyncio.Task[None] | None = None
        self._moves = 0  # log start offset moves so far, and how many of them the checkpoint file holds
        self._moves_written = 0
        self._doomed: list[str] = []  # paths of dropped segments, renamed .deleted, to unlink in a worker thread
        self._unlink_task: asyncio.Task[None] | None = None
        self.started = False

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Open (and recover) every partition directory with the default config, several at a time in worker
        threads; callers reconfigure later through get_or_create(topic, partition, config). Blocking: call it from
        a worker thread when an event loop is serving."""
        durable_files.make_dirs(self.log_dir)
        found: dict[tuple[str, int], LogConfig] = {}
        for path in sorted(self.log_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith("-delete"):
                shutil.rmtree(path, ignore_errors=True)
                continue
            key = parse_partition_dir(path.name)
            if key is not None and key not in self._logs:
                found[key] = self.defaults
        self.register(self.open_many(found.items()))
        self.started = True

    def open_many(self, items: Iterable[tuple[tuple[str, int], LogConfig | Mapping[str, object] | None]]
                  ) -> dict[tuple[str, int], PartitionLog]:
        """Open or create the logs of `(topic, partition), config` pairs in worker threads, without registering
        them (`register` does, on the event loop). Blocking. If one fails, the others are closed and the error is
        raised; directories this call created are removed."""
        items = list(items)
        new_dirs = {key for key, _cfg in items if not self.dir_for(*key).exists()}
        opened: dict[tuple[str, int], PartitionLog] = {}
        error: BaseException | None = None
        with ThreadPoolExecutor(max_workers=OPEN_THREADS, thread_name_prefix="log-open") as pool:
            futures = [(key, pool.submit(self._open, self.dir_for(*key), LogConfig.coerce(cfg, self.defaults),
                                         self._checkpointed.get(key, 0))) for key, cfg in items]
            for key, future in futures:
                try:
                    opened[key] = future.result()
                except BaseException as err:  # noqa: BLE001 - collected; the first one is raised below
                    error = error or err
        if error is not None:
            for key, plog in opened.items():
                plog.close()
                if key in new_dirs:
                    shutil.rmtree(plog.directory, ignore_errors=True)
            for key in new_dirs - opened.keys():
                shutil.rmtree(self.dir_for(*key), ignore_errors=True)
            raise error
        return opened

    def register(self, logs: Mapping[tuple[str, int], PartitionLog]) -> None:
        """Make logs opened by `open_many` visible (event loop)."""
        self._logs.update(logs)

    def _open(self, path: Path, config: LogConfig, log_start_offset: int) -> PartitionLog:
        return PartitionLog(path, config, log_start_offset=log_start_offset, clock=self._clock,
                            leader_epoch=self._leader_epoch, on_log_start_offset_change=self._start_moved,
                            delete_segment=self._delete_segment, files=self.files, failures=self.failures)

    def close(self) -> None:
        """Checkpoint, then flush and close every log; one log failing (a full disk) does not stop the others
        from being flushed. Raises the first error at the end."""
        errors: list[Exception] = []
        if not self.failures.offline:  # nothing more is written to an offline directory
            try:
                self.write_log_start_checkpoint()
            except OSError as err:
                errors.append(err)
        for plog in self._logs.values():
            try:
                plog.close()
            except Exception as err:  # noqa: BLE001 - raised below, after the other logs are closed
                errors.append(err)
        self._logs.clear()
        if errors:
            raise errors[0]

    # --- lookups and changes -----------------------------------------------------------------------------------
    def dir_for(self, topic: str, partition: int) -> Path:
        return self.log_dir / partition_dir_name(topic, partition)

    def get(self, topic: str, partition: int) -> PartitionLog:
        return self._logs[(topic, partition)]

    def find(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int,
                      config: LogConfig | Mapping[str, object] | None = None) -> PartitionLog:
        key = (topic, partition)
        plog = self._logs.get(key)
        if plog is None:
            cfg = LogConfig.coerce(config, self.defaults)
            plog = self._open(self.dir_for(topic, partition), cfg, self._checkpointed.get(key, 0))
            self._logs[key] = plog
        elif config is not None:
            plog.reconfigure(config)
        return plog

    def detach(self, topic: str, partition: int) -> PartitionLog | None:
        """Unregister a log about to be deleted; the caller deletes it (`PartitionLog.delete`, blocking)."""
        self._checkpointed.pop((topic, partition), None)
        plog = self._logs.pop((topic, partition), None)
        if plog is None and self.dir_for(topic, partition).exists():
            plog = self._open(self.dir_for(topic, partition), self.defaults, 0)
        return plog

    def discard(self, logs: Mapping[tuple[str, int], PartitionLog]) -> None:
        """Close and remove logs made by `open_many` that were never registered (their creation was undone)."""
        delete_logs(logs.values())

    def delete(self, topic: str, partition: int) -> None:
        """Remove the partition's log and its directory, durably (blocking: see `delete_logs`)."""
        self._checkpointed.pop((topic, partition), None)
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.delete()
        else:
            durable_files.remove_tree(self.dir_for(topic, partition))

    def move_aside(self, topic: str, partition: int) -> Path:
        """Close the log and rename its directory `<dir>.<id>-stray` (kept, never loaded again)."""
        self._checkpointed.pop((topic, partition), None)
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.close()
        source = self.dir_for(topic, partition)
        target = source.with_name(f"{source.name}.{uuid.uuid4().hex}{STRAY_SUFFIX}")
        # durably: a topic of that name created later must never find the stray data back under its name
        durable_files.rename(source, target)
        return target

    def partitions(self) -> list[tuple[str, int]]:
        return list(self._logs)

    def logs(self) -> Iterator[tuple[tuple[str, int], PartitionLog]]:
        return iter(list(self._logs.items()))

    # --- maintenance -------------------------------------------------------------------------------------------
    def apply_retention(self, now_ms: int | None = None) -> int:
        """One retention pass over every log. Returns segments deleted. Run it every log.retention.check.interval.ms."""
        if now_ms is None:
            now_ms = int(self._clock() * 1000)
        return sum(plog.apply_retention(now_ms) for plog in list(self._logs.values()))

    def flush_all(self) -> None:
        for plog in list(self._logs.values()):
            plog.flush()

    def write_log_start_checkpoint(self) -> None:
        """Write the checkpoint now (blocking: close, tools, tests)."""
        if self.log_dir.exists():
            moves = self._moves
            self._write_checkpoint(*self._checkpoint_entries())
            self._moves_written = max(self._moves_written, moves)

    def _checkpoint_entries(self) -> tuple[int, dict[tuple[str, int], int]]:
        self._checkpoint_taken += 1
        return self._checkpoint_taken, {key: plog.log_start_offset for key, plog in self._logs.items()
                                        if plog.log_start_offset > plog.segments[0].base_offset}

    def _write_checkpoint(self, generation: int, entries: Mapping[tuple[str, int], int]) -> None:
        with self._checkpoint_lock:
            if generation > self._checkpoint_written:
                write_checkpoint(self._checkpoint_path, entries)
                self._checkpoint_written = generation

    def _start_moved(self, _plog: PartitionLog) -> None:
        self._moves += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (tools, tests): write it now
            self.write_log_start_checkpoint()
            return
        self._checkpoint_wanted = True
        if self._checkpoint_task is None or self._checkpoint_task.done():
            self._checkpoint_task = loop.create_task(self._write_checkpoints(), name="log-start-checkpoint")

    async def _write_checkpoints(self) -> None:
        while self._checkpoint_wanted and not self.failures.offline and self.log_dir.exists():
            self._checkpoint_wanted = False
            moves = self._moves
            generation, entries = self._checkpoint_entries()  # on the loop: the logs are the loop's
            try:
                await asyncio.to_thread(self._write_checkpoint, generation, entries)
            except OSError as err:
                log.error("cannot write the log start offset checkpoint", path=str(self._checkpoint_path),
                          error=repr(err))
                return
            self._moves_written = max(self._moves_written, moves)

    async def log_start_durable(self) -> bool:
        """Wait until the checkpoint file holds every log start offset move made so far; False if its write
        failed. DeleteRecords answers after this, so a crash cannot bring the deleted records back (Kafka
        checkpoints every log.flush.start.offset.checkpoint.interval.ms and counts on its replicas instead)."""
        target = self._moves
        while self._moves_written < target:
            task = self._checkpoint_task
            if task is None or task.done():
                return self._moves_written >= target
            await asyncio.shield(task)
        return True

    def _delete_segment(self, segment: Segment) -> None:
        """PartitionLog's hook for a dropped (closed) segment: see the module docstring."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            segment.delete()
            return
        segment.close()
        for path in (str(segment.log_path), segment.offset_index.path, segment.time_index.path,
                     segment.txn_index.path):
            try:
                os.rename(path, path + ".deleted")
            except FileNotFoundError:
                continue  # an index never written
            self._doomed.append(path + ".deleted")
        if self._unlink_task is None or self._unlink_task.done():
            self._unlink_task = asyncio.get_running_loop().create_task(self._unlink_doomed(), name="segment-delete")

    async def _unlink_doomed(self) -> None:
        while self._doomed:
            paths, self._doomed = self._doomed, []
            await asyncio.to_thread(_unlink_all, paths)

    async def wait_deletions(self) -> None:
        """Wait for the checkpoint writes and segment unlinks already scheduled (tests, close)."""
        for task in (self._checkpoint_task, self._unlink_task):
            if task is not None and not task.done():
                await asyncio.shield(task)


def delete_logs(logs: Iterable[PartitionLog]) -> None:
    """Remove the logs' directories, then fsync each parent once: a removal lost to a power loss would bring
    the data back under the partition's name, where a topic created later by that name would serve it."""
    parents: set[Path] = set()
    for plog in logs:
        plog.delete(sync_parent=False)
        parents.add(plog.directory.parent)
    for parent in parents:
        if parent.is_dir():
            durable_files.fsync_dir(parent)


def _unlink_all(paths: list[str]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as err:  # left for the next start (opening a log removes .deleted files)
            log.warning("cannot delete a dropped segment file", path=path, error=repr(err))
