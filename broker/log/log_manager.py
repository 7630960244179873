"""LogManager: every partition log under one log directory.

Partition directories are named `<topic>-<partition>`. Log start offsets moved by DeleteRecords are kept in Kafka's
`log-start-offset-checkpoint` file (format: version line `0`, entry count, then `topic partition offset` lines),
rewritten atomically when one changes. Offsets moved by retention need no checkpoint: they equal the first
segment's base offset, which is what a log opens with anyway.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import structlog

from broker.log.config import LogConfig
from broker.log.partition_log import PartitionLog

log = structlog.get_logger(__name__)

LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
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
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class LogManager:
    def __init__(self, log_dir: Path | str, defaults: LogConfig | Mapping[str, object] | None = None, *,
                 clock: Callable[[], float] = time.time, leader_epoch: int | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.defaults = LogConfig.coerce(defaults)
        self._clock = clock
        self._leader_epoch = leader_epoch
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._checkpoint_path = self.log_dir / LOG_START_CHECKPOINT
        self._checkpointed = read_checkpoint(self._checkpoint_path)
        self.started = False

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Open (and recover) every partition directory with the default config; callers reconfigure later
        through get_or_create(topic, partition, config)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.log_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith("-delete"):
                shutil.rmtree(path, ignore_errors=True)
                continue
            key = parse_partition_dir(path.name)
            if key is None:
                continue
            if key not in self._logs:
                self._logs[key] = self._open(path, self.defaults, self._checkpointed.get(key, 0))
        self.started = True

    def _open(self, path: Path, config: LogConfig, log_start_offset: int) -> PartitionLog:
        return PartitionLog(path, config, log_start_offset=log_start_offset, clock=self._clock,
                            leader_epoch=self._leader_epoch, on_log_start_offset_change=self._start_moved)

    def close(self) -> None:
        self.write_log_start_checkpoint()
        for plog in self._logs.values():
            plog.close()
        self._logs.clear()

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

    def delete(self, topic: str, partition: int) -> None:
        self._checkpointed.pop((topic, partition), None)
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.delete()
        else:
            shutil.rmtree(self.dir_for(topic, partition), ignore_errors=True)

    def move_aside(self, topic: str, partition: int) -> Path:
        """Close the log and rename its directory `<dir>.<id>-stray` (kept, never loaded again)."""
        self._checkpointed.pop((topic, partition), None)
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.close()
        source = self.dir_for(topic, partition)
        target = source.with_name(f"{source.name}.{uuid.uuid4().hex}{STRAY_SUFFIX}")
        os.rename(source, target)
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
        if not self.log_dir.exists():
            return
        entries = {key: plog.log_start_offset for key, plog in self._logs.items()
                   if plog.log_start_offset > plog.segments[0].base_offset}
        write_checkpoint(self._checkpoint_path, entries)

    def _start_moved(self, _plog: PartitionLog) -> None:
        self.write_log_start_checkpoint()
