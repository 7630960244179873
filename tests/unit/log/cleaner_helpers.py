"""Shared helpers for log cleaner tests: a log manager with one compacted log, an injected clock, an in-process
cleaner, and a reader that decodes everything a consumer would see."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from broker.config import BrokerConfig
from broker.log import LogConfig, LogManager, PartitionLog
from broker.log.cleaner import CleanerConfig, InlineWorker, LogCleaner
from broker.log.files import FileCache
from protocol import records as rec

START_MS = 1_700_000_000_000


class Clock:
    def __init__(self, ms: int = START_MS) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def compact_config(**changes) -> LogConfig:
    base = LogConfig.from_topic_config({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    return replace(base, **{"segment_bytes": 4000, **changes})


class Harness:
    """A LogManager with log `t-0` and a LogCleaner running in this process."""

    def __init__(self, tmp: Path, config: LogConfig | None = None, *, broker: dict[str, str] | None = None,
                 producers=None) -> None:
        self.dir = tmp
        self.clock = Clock()
        self.files = FileCache(64)
        self.broker_config = BrokerConfig(broker or {})
        self.config = config or compact_config()
        self.manager = LogManager(tmp, self.config, clock=self.clock, files=self.files)
        self.manager.start()
        self.log: PartitionLog = self.manager.get_or_create("t", 0, self.config)
        self.producers = producers
        self.cleaner: LogCleaner | None = None

    def cleaner_config(self) -> CleanerConfig:
        """The cleaner's settings from the broker config, as the broker reads them (at each use)."""
        return CleanerConfig.from_config(self.broker_config)

    def new_cleaner(self) -> LogCleaner:
        """A cleaner as a broker start makes one (it reads the checkpoint file)."""
        return LogCleaner(self.manager, self.cleaner_config, clock=self.clock, worker=InlineWorker,
                          producer_last_offsets=self.producers)

    def clean(self) -> bool:
        """One cleaner pass: True if a log was cleaned."""
        return asyncio.run(self._clean())

    async def _clean(self) -> bool:
        self.cleaner = self.new_cleaner()
        try:
            return await self.cleaner.clean_once()
        finally:
            await self.cleaner.close()

    def crash(self) -> None:
        """Forget the log without closing it (what kill -9 leaves), then drop every cached descriptor."""
        self.log.closed = True
        self.files.close()

    def reopen(self) -> PartitionLog:
        self.files = FileCache(64)
        self.manager = LogManager(self.dir, self.config, clock=self.clock, files=self.files)
        self.manager.start()
        self.log = self.manager.get_or_create("t", 0, self.config)
        return self.log


def append(plog: PartitionLog, items: list[tuple[bytes | None, bytes | None]], *, ts: int = START_MS,
           compression: int = rec.COMPRESSION_NONE, **batch_args) -> tuple[int, int]:
    info = plog.append(rec.build_batch([rec.Record(k, v) for k, v in items], timestamp=ts,
                                       compression=compression, **batch_args))
    return info.base_offset, info.last_offset


def read_all(plog: PartitionLog, start: int | None = None) -> list[tuple[rec.BatchHeader, list[rec.Record]]]:
    """Every batch a consumer fetching from `start` (default: log start) receives, with its records."""
    offset = plog.log_start_offset if start is None else start
    out = []
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20).data
        if not data:
            break
        for _pos, header, view in rec.iter_batch_views(data):
            if header.last_offset < offset:
                continue
            out.append((header, rec.decode_records(view)))
            offset = header.next_offset
    return out


def records(plog: PartitionLog) -> list[rec.Record]:
    return [r for _h, rs in read_all(plog) for r in rs]


def latest_view(items: list[rec.Record]) -> dict[bytes, bytes]:
    """What a table built from the records holds: the last value per key, deleted by tombstones."""
    table: dict[bytes, bytes] = {}
    for r in items:
        if r.key is None:
            continue
        if r.value is None:
            table.pop(r.key, None)
        else:
            table[r.key] = r.value
    return table


# The crash points of the cleaner's segment swap, in order; from COMMITTED on, the swap has taken effect.
STEPS = ["before-swap-rename", "after-swap-rename.log", "after-swap-rename.index", "after-swap-rename.timeindex",
         "after-swap-rename.txnindex", "swap-committed", "before-install", "installed", "after-old-deleted", "before-final-rename",
         "after-final-log-rename", "swap-done"]
COMMITTED = STEPS.index("after-swap-rename.log")


def check_consistent(h: Harness, expected: dict[bytes, bytes]) -> None:
    batches = []
    offset = h.log.log_start_offset
    while offset < h.log.log_end_offset:
        data = h.log.read(offset, 1 << 20).data
        if not data:
            break
        for _pos, header in rec.iter_batches(data):
            batches.append(header)
            offset = header.next_offset
    assert offset == h.log.log_end_offset
    ends = [b.next_offset for b in batches]
    assert all(b.base_offset >= prev for b, prev in zip(batches[1:], ends, strict=False))  # no overlap, in order
    bases = [s.base_offset for s in h.log.segments]
    assert bases == sorted(set(bases))
    assert latest_view(records(h.log)) == expected
    leftovers = [p.name for p in h.log.directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []
