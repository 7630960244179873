"""Group commit: concurrent `await flusher.sync(log)` calls share fsyncs.

Each log has at most one flush running at a time, in a worker thread; different logs flush concurrently. A
sync() request is served by the first flush of its log that *starts* after the request was made, so it covers
everything appended to that log before the call. Requests arriving while their log's flush runs wait for the next
one, which serves them all with one fsync. `flush_interval_ms` > 0 waits that long before each flush to gather
more requests.

Why concurrently: a transaction's markers, a produce request spanning partitions and the coordinators' records
ask for several logs at once, and the filesystem commits concurrent fsyncs together (ext4 shares one journal
commit between them): four small logs fsynced in parallel took ~1 ms on the dev machine, one after the other
~10 ms.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Protocol

from broker.log.config import LogManagerConfig

# Worker threads of the flusher's own pool: logs flushed at the same time (more wait for a free thread).
DEFAULT_FLUSH_THREADS = 8


class Flushable(Protocol):
    def flush(self) -> None: ...


class GroupCommitFlusher:
    def __init__(self, *, flush_interval_ms: float = LogManagerConfig().flush_interval_ms,
                 executor: Executor | None = None, threads: int = DEFAULT_FLUSH_THREADS) -> None:
        """`executor`: run the flushes there (the caller owns it); else in a pool of `threads` of the flusher's
        own, so fsyncs never queue behind other blocking work of the default executor."""
        self.flush_interval_ms = flush_interval_ms
        self._executor: Executor = executor or ThreadPoolExecutor(threads, thread_name_prefix="shoal-flush")
        # log id -> the log and the requests its next flush serves
        self._pending: dict[int, tuple[Flushable, list[asyncio.Future[None]]]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}  # log id -> the task flushing it
        self.flushes = 0  # log.flush() calls made
        self.waits = 0  # sync() calls: flushes / waits is how well group commit shares the fsyncs

    async def sync(self, log: Flushable) -> None:
        """Return once everything appended to `log` before this call is on disk (raises the flush's OSError)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self.waits += 1
        key = id(log)
        entry = self._pending.get(key)
        if entry is None:
            self._pending[key] = (log, [future])
        else:
            entry[1].append(future)
        task = self._tasks.get(key)
        if task is None or task.done():
            self._tasks[key] = loop.create_task(self._run(key))
        await future

    async def _run(self, key: int) -> None:
        """Flush one log while requests for it are pending."""
        loop = asyncio.get_running_loop()
        try:
            while key in self._pending:
                if self.flush_interval_ms > 0:
                    await asyncio.sleep(self.flush_interval_ms / 1000)
                log, futures = self._pending.pop(key)
                self.flushes += 1
                try:
                    await loop.run_in_executor(self._executor, log.flush)
                except Exception as err:  # noqa: BLE001 - reported to this log's waiters only
                    _settle(futures, err)
                except BaseException:  # cancelled (shutdown) or executor gone
                    _settle(futures, None, cancel=True)
                    raise
                else:
                    _settle(futures, None)
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]

    async def close(self) -> None:
        """Wait for the flushes already asked for. The pool stays usable (a late sync still works); its idle
        threads end when the flusher is collected or the interpreter exits."""
        while running := [t for t in self._tasks.values() if not t.done()]:
            await asyncio.gather(*[asyncio.shield(t) for t in running], return_exceptions=True)


def _settle(futures: list[asyncio.Future[None]], err: Exception | None, *, cancel: bool = False) -> None:
    for future in futures:
        if future.done():
            continue  # its waiter was cancelled
        if cancel:
            future.cancel()
        elif err is None:
            future.set_result(None)
        else:
            future.set_exception(err)
