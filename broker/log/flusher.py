"""Group commit: concurrent `await flusher.sync(log)` calls share fsyncs.

One flush runs at a time, in a worker thread. A sync() request is served by the first flush that *starts* after
the request was made, so it covers everything appended to that log before the call. Requests arriving while a
flush runs wait for the next one, which flushes every log asked for since — one fsync per log for all of them.
`flush_interval_ms` > 0 waits that long before each flush to gather more requests.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import Protocol


class Flushable(Protocol):
    def flush(self) -> None: ...


class GroupCommitFlusher:
    def __init__(self, *, flush_interval_ms: float = 0, executor: Executor | None = None) -> None:
        self.flush_interval_ms = flush_interval_ms
        self._executor = executor
        self._pending: dict[int, tuple[Flushable, list[asyncio.Future[None]]]] = {}
        self._task: asyncio.Task[None] | None = None
        self.flushes = 0  # rounds run (each fsyncs every log asked for in that round)
        self.log_flushes = 0  # log.flush() calls made

    async def sync(self, log: Flushable) -> None:
        """Return once everything appended to `log` before this call is on disk (raises the flush's OSError)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        entry = self._pending.get(id(log))
        if entry is None:
            self._pending[id(log)] = (log, [future])
        else:
            entry[1].append(future)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            if self.flush_interval_ms > 0:
                await asyncio.sleep(self.flush_interval_ms / 1000)
            batch, self._pending = self._pending, {}
            logs = [log for log, _ in batch.values()]
            self.flushes += 1
            self.log_flushes += len(logs)
            try:
                errors = await loop.run_in_executor(self._executor, _flush_all, logs)
            except BaseException as err:  # cancelled (shutdown) or executor gone
                for _log, futures in batch.values():
                    for future in futures:
                        if future.done():
                            continue
                        if isinstance(err, Exception):
                            future.set_exception(err)
                        else:
                            future.cancel()
                raise
            for key, (_log, futures) in batch.items():
                err = errors.get(key)
                for future in futures:
                    if future.done():
                        continue
                    if err is None:
                        future.set_result(None)
                    else:
                        future.set_exception(err)

    async def close(self) -> None:
        """Wait for the flushes already asked for."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)


def _flush_all(logs: list[Flushable]) -> dict[int, Exception]:
    errors: dict[int, Exception] = {}
    for log in logs:
        try:
            log.flush()
        except Exception as err:  # reported to that log's waiters only
            errors[id(log)] = err
    return errors
