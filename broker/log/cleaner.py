"""LogCleaner (component `log_cleaner`): compacts the logs of `cleanup.policy=compact` topics, as Kafka's
LogCleaner and LogCleanerManager do.

Every pass (on the event loop, cheap: segment sizes and timestamps are in memory):
- the active segment of a compacted log that has been open longer than `segment.ms` (or `max.compaction.lag.ms`
  when smaller) is rolled, so a quiet topic's last records become cleanable too;
- each compacted log gets its cleanable range: from the first dirty offset (its entry in
  `<log.dir>/cleaner-offset-checkpoint`, Kafka's file, else the log start offset) to the first uncleanable offset
  (the active segment, the first segment with records newer than `min.compaction.lag.ms`, or the segment holding
  the last stable offset: an open transaction's records stay dirty until it ends); its dirty ratio is the
  cleanable bytes over the clean plus cleanable bytes;
- the dirtiest log with a ratio above `min.cleanable.dirty.ratio` (or with records older than
  `max.compaction.lag.ms` waiting) is cleaned; with none, the cleaner sleeps `log.cleaner.backoff.ms`.

Cleaning a log (`broker.log.clean` does the record work in a cleaner process, `broker.log.cleaner_worker`):
build the key map, then for each group of segments write a cleaned segment and swap it in
(`broker.log.swap`: `.cleaned` -> `.swap` -> replace, crash-safe), then record the new first dirty offset in the
checkpoint. Retention skips a log while it is cleaned (`PartitionLog.cleaning`); a log deleted or changed under
the cleaner makes it drop the round. Readers are never blocked: the segment list changes in one loop step.

Settings are read at every pass, so `IncrementalAlterConfigs` changes (topic or broker) apply to the next one.
`log.cleaner.threads` cleaner slots run at once, each with its own worker process, started when first needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import structlog

from broker.aio import wait_event
from broker.config.components import ComponentConfig, setting
from broker.log import swap
from broker.log.clean import (
    MAP_ENTRY_BYTES,
    CleaningAborted,
    CleaningSession,
    CleanJob,
    CorruptLogError,
    GroupResult,
    Plan,
    SegmentSpec,
    Stats,
)
from broker.log.dir_failure import is_transient
from broker.log.log_manager import LogManager, read_checkpoint, write_checkpoint
from broker.log.partition_log import PartitionLog
from broker.log.segment import Segment

log = structlog.get_logger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
Key = tuple[str, int]
_T = TypeVar("_T")


# --- which log, which range ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LogToClean:
    key: Key
    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base offset
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool  # records older than max.compaction.lag.ms wait

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def _floor(segments: list[Segment], offset: int) -> int:
    """Index of the segment holding `offset` (the last one with base <= offset; 0 if none)."""
    i = 0
    for n, segment in enumerate(segments):
        if segment.base_offset <= offset:
            i = n
        else:
            break
    return i


def cleanable_range(key: Key, plog: PartitionLog, checkpoint: int | None, now_ms: int,
                    last_stable_offset: int | None = None) -> LogToClean:
    """Kafka's LogCleanerManager.cleanableOffsets + calculateCleanableBytes + maxCompactionDelay for one log.
    `last_stable_offset`: the partition's LSO (None: no transaction state known, no bound)."""
    cfg = plog.config
    segments = plog.segments
    start, end = plog.log_start_offset, plog.log_end_offset
    first_dirty = start if checkpoint is None or checkpoint < start or checkpoint > end else checkpoint
    active = segments[-1]
    first_uncleanable = active.base_offset
    if last_stable_offset is not None:  # never clean past the first unstable offset
        first_uncleanable = min(first_uncleanable, last_stable_offset)
    dirty_non_active = segments[_floor(segments, first_dirty):-1]
    if cfg.min_compaction_lag_ms > 0:
        for segment in dirty_non_active:
            if segment.largest_timestamp_ms() > now_ms - cfg.min_compaction_lag_ms:
                first_uncleanable = min(first_uncleanable, segment.base_offset)
                break
    first_uncleanable = max(first_dirty, first_uncleanable)
    # align to the segment holding it (among the non-active ones), as calculateCleanableBytes does
    uncleanable_index = len(segments) - 1
    for n, segment in enumerate(segments[:-1]):
        if segment.base_offset <= first_uncleanable < (segments[n + 1].base_offset):
            uncleanable_index = n
            break
    aligned = segments[uncleanable_index].base_offset
    low = _floor(segments, min(first_dirty, aligned))
    cleanable = sum(s.size for s in segments[low:uncleanable_index])
    clean = sum(s.size for s in segments if s.base_offset < first_dirty)
    stamps = [s.first_batch_timestamp for s in dirty_non_active
              if s.first_batch_timestamp is not None and s.first_batch_timestamp > 0]
    lag = max(cfg.max_compaction_lag_ms, 0)
    needs_now = bool(stamps) and min(stamps) < now_ms - lag
    return LogToClean(key, plog, first_dirty, aligned, clean, cleanable, needs_now)


def make_job(todo: LogToClean, now_ms: int, *, max_map_entries: int, io_buffer_bytes: int,
             max_io_bytes_per_second: float, producer_last_offsets: dict[int, int] | None,
             producer_expiration_ms: int) -> tuple[CleanJob, dict[int, Segment]]:
    """The job for a cleaning process, and the segments it names (to check they are still there at swap time)."""
    plog, cfg = todo.log, todo.log.config
    segments = plog.segments
    below = [s for s in segments[:-1] if s.base_offset < todo.first_uncleanable_offset]
    tail = [] if producer_last_offsets is not None else [s for s in segments if s not in below]
    holding = segments[_floor(segments, todo.first_dirty_offset)]

    def spec(s: Segment) -> SegmentSpec:
        return SegmentSpec(s.base_offset, s.size, s.offset_index.file_bytes, s.time_index.file_bytes)

    # every aborted transaction that may have batches in the cleaned segments (entries are few and in memory)
    aborted = tuple(txn for s in segments for txn in s.txn_index.entries
                    if txn.first_offset < todo.first_uncleanable_offset)

    job = CleanJob(
        directory=str(plog.directory), segments=tuple(spec(s) for s in below),
        first_dirty_offset=todo.first_dirty_offset, first_uncleanable_offset=todo.first_uncleanable_offset,
        now_ms=now_ms, dirty_start_position=holding.offset_index.lookup(todo.first_dirty_offset)[1],
        delete_retention_ms=cfg.delete_retention_ms, segment_bytes=cfg.segment_bytes,
        segment_index_bytes=cfg.segment_index_bytes, index_interval_bytes=cfg.index_interval_bytes,
        max_map_entries=max_map_entries, io_buffer_bytes=io_buffer_bytes,
        max_io_bytes_per_second=max_io_bytes_per_second, producer_last_offsets=producer_last_offsets,
        tail_segments=tuple(spec(s) for s in tail), producer_expiration_ms=producer_expiration_ms,
        aborted_txns=aborted)
    return job, {s.base_offset: s for s in below}


# --- where the record work runs ---------------------------------------------------------------------------------
class Worker(Protocol):
    async def begin(self, job: CleanJob) -> Plan: ...
    async def clean_group(self, index: int) -> GroupResult: ...
    async def end(self) -> None: ...
    async def run(self, fn: Callable[..., _T], *args: Any) -> _T: ...
    def abort(self) -> None: ...
    def close(self) -> None: ...


class SwapFailedError(Exception):
    """A storage error after a cleaned segment was committed as `.swap`: only recovery can finish the swap."""


class _RemoteError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class ProcessWorker:
    """A cleaner process (started on first use, restarted after it died) and one thread that talks to it and runs
    the swap steps, so neither blocks the event loop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._proc: subprocess.Popen[bytes] | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self.starts = 0

    def _ensure(self) -> None:
        # Popen on the event loop thread: the child's PR_SET_PDEATHSIG follows the thread that forked it.
        if self._proc is not None and self._proc.poll() is None:
            return
        self._drop()
        proc = subprocess.Popen([sys.executable, "-m", "broker.log.cleaner_worker", str(os.getpid())],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        self._send = Connection(os.dup(proc.stdin.fileno()), readable=False)  # type: ignore[union-attr]
        self._recv = Connection(os.dup(proc.stdout.fileno()), writable=False)  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
        proc.stdout.close()  # type: ignore[union-attr]
        self._proc = proc
        self.starts += 1
        log.info("log cleaner process started", worker=self.name, pid=proc.pid)

    def _call(self, send: Connection, recv: Connection, message: tuple[object, ...]) -> Any:
        try:
            send.send(message)
            answer = recv.recv()
        except (EOFError, OSError) as err:
            raise CleaningAborted(f"cleaner process gone: {err}") from None
        if answer[0] == "ok":
            return answer[1]
        if answer[1] == "CorruptLogError":
            raise CorruptLogError(answer[2])
        if answer[1] == "CleaningAborted":
            raise CleaningAborted(answer[2])
        raise _RemoteError(answer[1], answer[2])

    async def _request(self, message: tuple[object, ...]) -> Any:
        self._ensure()
        return await self._send_now(message)

    async def _send_now(self, message: tuple[object, ...]) -> Any:
        if self._send is None or self._recv is None:
            raise CleaningAborted("no cleaner process")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, self._send, self._recv, message)

    async def begin(self, job: CleanJob) -> Plan:
        return cast(Plan, await self._request(("begin", job)))  # the worker's answer, unpickled

    async def clean_group(self, index: int) -> GroupResult:
        return cast(GroupResult, await self._request(("clean", index)))

    async def end(self) -> None:
        """Drop the session (never starts a process: after an abort there is nothing to end)."""
        with contextlib.suppress(CleaningAborted, _RemoteError):
            await self._send_now(("end",))

    async def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def abort(self) -> None:
        """Stop the work in progress now (the process is killed; the next request starts another)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()

    def _drop(self) -> None:
        for conn in (self._send, self._recv):
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.close()
        self._send = self._recv = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
            self._proc = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def close(self) -> None:
        self._drop()
        self._executor.shutdown(wait=True)


class InlineWorker:
    """The same work in a thread of this process (tests: an injected clock and crash points in one process)."""

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._session: CleaningSession | None = None
        self._stop = threading.Event()

    def _check(self) -> None:
        if self._stop.is_set():
            raise CleaningAborted("stopped")

    async def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def begin(self, job: CleanJob) -> Plan:
        self._stop.clear()
        self._session = CleaningSession(job, check=self._check)
        return await self.run(self._session.build_map)

    async def clean_group(self, index: int) -> GroupResult:
        if self._session is None:
            raise RuntimeError("no cleaning in progress")
        return await self.run(self._session.clean_group, index)

    async def end(self) -> None:
        self._session = None

    def abort(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        self._executor.shutdown(wait=True)


# --- the component ------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class CleanerStats:
    rounds: int = 0
    aborted: int = 0
    segments_swapped: int = 0
    rolled: int = 0
    stats: Stats = field(default_factory=Stats)
    last: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CleanerConfig(ComponentConfig):
    """Kafka's CleanerConfig (log.cleaner.*), and producer.id.expiration.ms: a producer's last batch is kept
    until it expires."""

    enable_cleaner: bool = setting("log.cleaner.enable")
    num_threads: int = setting("log.cleaner.threads")
    backoff_ms: int = setting("log.cleaner.backoff.ms")
    dedupe_buffer_size: int = setting("log.cleaner.dedupe.buffer.size")
    dedupe_buffer_load_factor: float = setting("log.cleaner.io.buffer.load.factor")
    io_buffer_size: int = setting("log.cleaner.io.buffer.size")
    max_io_bytes_per_second: float = setting("log.cleaner.io.max.bytes.per.second")
    producer_id_expiration_ms: int = setting("producer.id.expiration.ms")


class LogCleaner:
    def __init__(self, logs: LogManager, config: Callable[[], CleanerConfig] = CleanerConfig, *,
                 clock: Callable[[], float] = time.time,
                 producer_last_offsets: Callable[[str, int, int], dict[int, int] | None] | None = None,
                 last_stable_offset: Callable[[str, int], int] | None = None,
                 load_partition_state: Callable[[list[Key]], Awaitable[None]] | None = None,
                 worker: Callable[[str], Worker] = ProcessWorker) -> None:
        """`config()` the current settings (read at every pass: they may change at run time);
        `producer_last_offsets(topic, partition, newer_than_ms)` what the broker knows of the producers;
        `last_stable_offset(topic, partition)` the partition's LSO, the bound of cleaning (from its transaction
        state, which `load_partition_state(keys)` loads off the loop first). Without it, no bound: only for logs
        that never hold transactions (tests)."""
        self._logs = logs
        self._config = config
        self._clock = clock
        self._producers = producer_last_offsets
        self._stable_offset = last_stable_offset
        self._load_state = load_partition_state
        self._make_worker = worker
        self._path = Path(logs.log_dir) / CLEANER_CHECKPOINT
        self.checkpoints: dict[Key, int] = read_checkpoint(self._path)
        self._in_progress: set[Key] = set()
        self._uncleanable: set[Key] = set()
        self._workers: list[Worker] = []
        self._slots: list[asyncio.Task[None]] = []
        self._supervisor: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self.stats = CleanerStats()

    # --- lifecycle -----------------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._config().enable_cleaner:
            self._supervisor = asyncio.get_running_loop().create_task(self._supervise(), name="log-cleaner")

    async def _supervise(self) -> None:
        """Keep `log.cleaner.threads` slots running (the setting may change at run time)."""
        while not self._closing:
            wanted = self._config().num_threads
            self._slots = [t for t in self._slots if not t.done()]
            while len(self._slots) < wanted:
                n = len(self._slots)
                self._slots.append(asyncio.get_running_loop().create_task(self._slot(n), name=f"log-cleaner-{n}"))
            await asyncio.sleep(1.0)

    async def _slot(self, n: int) -> None:
        while not self._closing and n < self._config().num_threads:
            try:
                cleaned = await self.clean_once(n)
            except Exception:  # noqa: BLE001 - a failed round must not stop the cleaner
                log.exception("log cleaner pass failed")
                cleaned = False
            if cleaned or self._closing:
                continue
            self._wake.clear()
            await wait_event(self._wake, self._config().backoff_ms / 1000)

    def wake(self) -> None:
        """Run a pass now (tests, config changes)."""
        self._wake.set()

    async def close(self) -> None:
        self._closing = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        for worker in self._workers:
            worker.abort()  # a group being cleaned is dropped; a swap in progress finishes
        self._wake.set()
        for task in self._slots:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for worker in self._workers:
            await asyncio.to_thread(worker.close)

    def forget(self, topic: str) -> None:
        """A topic was deleted: its checkpoints go (a new topic of that name starts dirty)."""
        for key in [k for k in self.checkpoints if k[0] == topic]:
            del self.checkpoints[key]
        self._uncleanable = {k for k in self._uncleanable if k[0] != topic}

    # --- one pass ------------------------------------------------------------------------------------------------
    def _worker(self, n: int) -> Worker:
        while len(self._workers) <= n:
            self._workers.append(self._make_worker(f"log-cleaner-{len(self._workers)}"))
        return self._workers[n]

    def roll_idle(self, now_ms: int) -> int:
        rolled = 0
        for _key, plog in self._logs.logs():
            if plog.config.compact and not plog.closed and plog.roll_if_idle(now_ms):
                rolled += 1
        self.stats.rolled += rolled
        return rolled

    def candidates(self, now_ms: int, stable: dict[Key, int] | None = None) -> list[LogToClean]:
        """The logs worth cleaning; with `stable` (last stable offsets), only those it holds, bounded by them."""
        out = []
        for key, plog in self._logs.logs():
            if (not plog.config.compact or plog.closed or plog.failures.offline or key in self._in_progress
                    or key in self._uncleanable or (stable is not None and key not in stable)):
                continue
            todo = cleanable_range(key, plog, self.checkpoints.get(key), now_ms,
                                   None if stable is None else stable[key])
            if todo.total_bytes <= 0:
                continue
            if (todo.needs_compaction_now and todo.cleanable_bytes > 0) or \
                    todo.cleanable_ratio > plog.config.min_cleanable_ratio:
                out.append(todo)
        return out

    async def clean_once(self, slot: int = 0) -> bool:
        """Roll idle compacted logs, then clean the dirtiest log if one is cleanable. True if one was cleaned."""
        now = int(self._clock() * 1000)
        self.roll_idle(now)
        found = self.candidates(now)
        if found and self._stable_offset is not None:
            # the LSO can only shrink a range: ask for it (loading transaction state) only for logs worth it
            stable = await self._stable_offsets([t.key for t in found])
            found = self.candidates(now, stable)
        todo = max(found, key=lambda t: t.cleanable_ratio, default=None)
        if todo is None:
            return False
        self._in_progress.add(todo.key)
        todo.log.cleaning = True
        try:
            return await self._clean(todo, now, self._worker(slot))
        finally:
            todo.log.cleaning = False
            self._in_progress.discard(todo.key)

    async def _stable_offsets(self, keys: list[Key]) -> dict[Key, int]:
        """The last stable offset of each of `keys` still known (a log whose LSO cannot be had is not cleaned)."""
        assert self._stable_offset is not None
        if self._load_state is not None:
            await self._load_state(keys)
        out = {}
        for key in keys:
            try:
                out[key] = self._stable_offset(*key)
            except Exception as err:  # noqa: BLE001 - deleted meanwhile, or its state cannot be read: skip it
                log.info("no last stable offset; not cleaning the log", topic=key[0], partition=key[1],
                         error=repr(err))
        return out

    async def _clean(self, todo: LogToClean, now: int, worker: Worker) -> bool:
        cfg = self._config()
        topic, partition = todo.key
        threads = max(1, cfg.num_threads)
        max_entries = int(cfg.dedupe_buffer_size / threads / MAP_ENTRY_BYTES * cfg.dedupe_buffer_load_factor)
        expiration = cfg.producer_id_expiration_ms
        producers = self._producers(topic, partition, now - expiration) if self._producers else None
        job, by_base = make_job(todo, now, max_map_entries=max_entries, io_buffer_bytes=cfg.io_buffer_size,
                                max_io_bytes_per_second=cfg.max_io_bytes_per_second,
                                producer_last_offsets=producers, producer_expiration_ms=expiration)
        plog = todo.log
        directory = plog.directory
        started = time.monotonic()
        stats = Stats()
        swapped = 0
        current = job.segments[0].base_offset if job.segments else -1
        try:
            plan = await worker.begin(job)
            stats.add(plan.stats)
            for index, group in enumerate(plan.groups):
                if self._closing or plog.closed:
                    raise CleaningAborted("stopping")
                current = group[0]
                result = await worker.clean_group(index)
                stats.add(result.stats)
                olds = [by_base[b] for b in group]
                if not await self._swap(plog, result, olds, worker):
                    raise CleaningAborted("the log changed under the cleaner")
                swapped += len(olds)
        except CleaningAborted as err:
            self.stats.aborted += 1
            with contextlib.suppress(OSError):
                await asyncio.to_thread(swap.abandon_cleaned, directory, current)
            log.info("log cleaning stopped", topic=topic, partition=partition, reason=str(err))
            return False
        except CorruptLogError as err:
            self._uncleanable.add(todo.key)
            log.error("log cannot be cleaned; skipping it until restart", topic=topic, partition=partition,
                      error=str(err))
            return False
        except Exception as err:  # noqa: BLE001 - as Kafka, an unexpected failure makes the log uncleanable
            self._uncleanable.add(todo.key)
            log.exception("log cleaning failed; skipping the log until restart", topic=topic, partition=partition)
            if isinstance(err, SwapFailedError) or (isinstance(err, OSError) and not is_transient(err)):
                # A swap that failed half way (whatever the error) leaves the directory in a state only recovery
                # knows how to finish, and any other storage error is one: take the directory offline, as Kafka's
                # cleaner does on an IOException. (A full disk while writing the cleaned copy is not.)
                plog.failures.fail(f"log cleaning of {directory} failed", err)
            with contextlib.suppress(OSError):
                await asyncio.to_thread(swap.abandon_cleaned, directory, current)
            return False
        finally:
            await worker.end()
        self.checkpoints[todo.key] = plan.end_offset
        await worker.run(self._write_checkpoint)
        elapsed = time.monotonic() - started
        stats.seconds = elapsed
        self.stats.rounds += 1
        self.stats.segments_swapped += swapped
        self.stats.stats.add(stats)
        self.stats.last = {"topic": topic, "partition": partition, "bytes_read": stats.bytes_read,
                           "bytes_written": stats.bytes_written, "seconds": elapsed, "end_offset": plan.end_offset}
        log.info("log cleaned", topic=topic, partition=partition, dirty_ratio=round(todo.cleanable_ratio, 3),
                 first_dirty=todo.first_dirty_offset, end_offset=plan.end_offset, keys=plan.map_keys,
                 groups=len(plan.groups), segments=swapped, bytes_read=stats.bytes_read,
                 bytes_written=stats.bytes_written, records_read=stats.records_read,
                 records_retained=stats.records_retained, seconds=round(elapsed, 3),
                 mb_per_s=round(stats.bytes_read / 1e6 / elapsed, 1) if elapsed > 0 else None)
        return True

    async def _swap(self, plog: PartitionLog, result: GroupResult, olds: list[Segment], worker: Worker) -> bool:
        """Swap the cleaned segment in for `olds`. Once committed, the swap is finished even if the broker is
        stopping (recovery would finish it anyway)."""
        directory = plog.directory
        if not _still_there(plog, olds):
            await worker.run(swap.abandon_cleaned, directory, result.base_offset)
            return False
        installed = committed = False
        try:
            await worker.run(swap.commit_cleaned, directory, result.base_offset)
            committed = True
            cleaned = await worker.run(lambda: swap.open_swapped(
                directory, result.base_offset, index_interval_bytes=plog.config.index_interval_bytes,
                files=plog.files))
            swap.crash_point("before-install")
            if not plog.install_cleaned(cleaned, olds):
                # Only a log closed or deleted since the check gets here; its files are someone else's now.
                cleaned.close()
                return False
            installed = True
            swap.crash_point("installed")
            await worker.run(swap.finish_swap, directory, cleaned, olds)
        except BaseException as err:
            if installed:
                # The log no longer holds the old segments, so nothing else will close them: drop their cached
                # descriptors now (their files are recovery's business), or a log reopened by this process
                # could be handed the descriptor of a deleted file under a name recovery gives the cleaned one.
                for old in olds:
                    old.close()
            if isinstance(err, Exception) and not committed and not isinstance(err, OSError):
                committed = await asyncio.to_thread(swap.is_committed, directory, result.base_offset)
            if isinstance(err, OSError) or (committed and isinstance(err, Exception)):
                # half way through (whatever the error): only recovery can finish it, so the directory goes offline
                raise SwapFailedError(f"swapping a cleaned segment into {directory} failed: {err!r}") from err
            raise
        return True

    def _write_checkpoint(self) -> None:
        live = {key for key, _ in self._logs.logs()}
        entries = {key: offset for key, offset in self.checkpoints.items() if key in live}
        if self._path.parent.exists():
            write_checkpoint(self._path, entries)


def _still_there(plog: PartitionLog, olds: list[Segment]) -> bool:
    if plog.closed:
        return False
    segments = plog.segments
    ids = [id(s) for s in segments[:-1]]
    try:
        i = ids.index(id(olds[0]))
    except ValueError:
        return False
    return all(a is b for a, b in zip(segments[i:i + len(olds)], olds, strict=False)) and \
        i + len(olds) < len(segments)
