"""Where each copied record landed: source offset -> target offset per partition, for `shoal-migrate`.

A copy appends the source partition's records to the target partition in order, one after the other, so the
k-th record copied lands at the target offset the partition had when the copy began (`base`) plus k. Source
offsets have gaps (transaction markers, aborted records, compacted or deleted records), so the mapping is kept
as runs of consecutive source offsets: (source start, target start, count). A committed offset C (the next
record to read) translates to `base` + the number of copied records below C, i.e. the target offset of the first
copied record at or after C (or the target end when every copied record is below C).

The map is saved as JSON (`MigrationState`), written only after the target acknowledged every record it
describes, so a run that dies is resumed from it (see migrate.py). Sans-IO: no client here.
"""

from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_VERSION = 1


@dataclass
class PartitionCopy:
    base: int  # the target partition's end offset when its copy began
    next_source: int | None = None  # next source offset to read; None: the source log's start
    runs: list[list[int]] = field(default_factory=list)  # [source start, target start, count], ascending

    @property
    def target_end(self) -> int:
        """The target offset the next copied record gets."""
        if not self.runs:
            return self.base
        src, tgt, count = self.runs[-1]
        return tgt + count

    @property
    def copied(self) -> int:
        return self.target_end - self.base

    def add(self, source_offset: int) -> int:
        """Record that the record at `source_offset` is the next one written to the target; its target offset."""
        if self.next_source is not None and source_offset < self.next_source:
            raise ValueError(f"source offset {source_offset} is below the next expected {self.next_source}")
        target = self.target_end
        last = self.runs[-1] if self.runs else None
        if last is not None and last[0] + last[2] == source_offset:
            last[2] += 1
        else:
            self.runs.append([source_offset, target, 1])
        self.next_source = source_offset + 1
        return target

    def translate(self, source_offset: int) -> int:
        """The target offset for a position (committed offset, share-group start offset) in the source."""
        i = bisect.bisect_right(self.runs, source_offset, key=lambda r: r[0]) - 1
        if i < 0:
            return self.base
        src, tgt, count = self.runs[i]
        return tgt + min(count, source_offset - src)

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "next_source": self.next_source, "runs": self.runs}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PartitionCopy:
        return cls(int(d["base"]), d.get("next_source"), [list(map(int, r)) for r in d.get("runs", [])])


@dataclass
class MigrationState:
    source: str
    target: str
    partitions: dict[tuple[str, int], PartitionCopy] = field(default_factory=dict)

    def translate(self, topic: str, partition: int, source_offset: int) -> int | None:
        """The target offset, or None for a partition that was not copied."""
        copy = self.partitions.get((topic, partition))
        return None if copy is None else copy.translate(source_offset)

    def to_json(self) -> dict[str, Any]:
        topics: dict[str, dict[str, Any]] = {}
        for (topic, p), copy in sorted(self.partitions.items()):
            topics.setdefault(topic, {})[str(p)] = copy.to_json()
        return {"version": STATE_VERSION, "source": self.source, "target": self.target, "topics": topics}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MigrationState:
        if d.get("version") != STATE_VERSION:
            raise ValueError(f"unknown state version {d.get('version')!r}")
        parts = {(topic, int(p)): PartitionCopy.from_json(c)
                 for topic, ps in d.get("topics", {}).items() for p, c in ps.items()}
        return cls(d["source"], d["target"], parts)

    @classmethod
    def load(cls, path: Path) -> MigrationState | None:
        """The saved state, or None when the file does not exist."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        return cls.from_json(json.loads(text))

    def save(self, path: Path) -> None:
        """Replace the file atomically (write, fsync, rename, fsync the directory), so a crash or a power loss
        leaves the old or the new state, and the new one once this returns. (Clients do not import broker/, whose
        `durable_files.write_file` does the same.)"""
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)  # the rename itself
        finally:
            os.close(fd)
