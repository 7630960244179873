"""Background work on a schedule: every interval, or at a deadline its owner computes, sooner when woken.

One helper for the broker's periodic loops (the coordinators' timers, the share-partition leader's lock expiry,
retention and the other broker-wide rounds): a round that fails is logged and the task goes on (a dead loop
would stop expiring sessions or locks for good), a cancellation always ends it, and waking never loses a
cancellation (`broker.aio.wait_event`).

Two ways to be woken: `wake()` says the schedule changed (a new deadline, perhaps earlier): the time to the
next round is computed again; `run_soon()` asks for a round now (a partition written past its threshold).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping

import structlog

from broker.aio import wait_event

log = structlog.get_logger(__name__)

# The longest a deadline-driven task sleeps when nothing is due: it wakes to look again.
MAX_WAIT_S = 3600.0


class PeriodicTask:
    """Runs `work` every `every_s` seconds, or when `next_due_s()` (seconds from now until the next round; None
    when nothing is due) says, at most MAX_WAIT_S apart. Give exactly one of the two. A failed round logs
    `failure_event` with `failure_fields` and the exception, then pauses `retry_after_s` before going on."""

    def __init__(self, name: str, work: Callable[[], Awaitable[object] | object], *,
                 every_s: float | None = None, next_due_s: Callable[[], float | None] | None = None,
                 failure_event: str = "periodic task failed",
                 failure_fields: Mapping[str, object] | None = None, retry_after_s: float = 0.0) -> None:
        if (every_s is None) == (next_due_s is None):
            raise ValueError("a periodic task runs either every interval or at a deadline")
        self.name = name
        self._work = work
        self._every_s = every_s
        self._next_due_s = next_due_s
        self._failure_event = failure_event
        self._failure_fields: Mapping[str, object] = failure_fields or {}
        self._retry_after_s = retry_after_s
        self._wakeup = asyncio.Event()
        self._due_now = False
        self._stopped = False
        self._sleep_until: float | None = None  # loop time the current sleep ends at; None when not sleeping
        self._loop: asyncio.AbstractEventLoop | None = None

    def wake(self) -> None:
        """The schedule may have changed: compute the time to the next round again (no round by itself)."""
        self._wakeup.set()

    def wake_if_due_before(self, delay_s: float) -> None:
        """Wake the task if something is due in `delay_s` seconds, before its current sleep ends (or while it is
        not sleeping: its next sleep is computed afresh anyway). Cheap: called for every lock a ShareFetch takes."""
        until = self._sleep_until
        if until is None or self._loop is None or self._loop.time() + delay_s < until:
            self._wakeup.set()

    def run_soon(self) -> None:
        """Run a round now (or right after the one in progress)."""
        self._due_now = True
        self._wakeup.set()

    def stop(self) -> None:
        """End the task after its current round; a sleeping task ends at once."""
        self._stopped = True
        self._wakeup.set()

    def _wait_s(self) -> float:
        if self._every_s is not None:
            return self._every_s
        assert self._next_due_s is not None
        due = self._next_due_s()
        return MAX_WAIT_S if due is None else min(max(0.0, due), MAX_WAIT_S)

    async def run(self) -> None:
        """The task's loop (spawn it as a background task; cancel it or `stop()` it to end it)."""
        while not self._stopped:
            try:
                if not await self._sleep():
                    continue
                self._due_now = False
                result = self._work()
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a failed round must not stop the task
                log.exception(self._failure_event, **self._failure_fields)
                if self._retry_after_s > 0:
                    await asyncio.sleep(self._retry_after_s)

    async def _sleep(self) -> bool:
        """Sleep until the next round is due; False when woken without a round to run (stopped, or the
        schedule changed: it is computed again)."""
        wait_s = self._wait_s()
        self._wakeup.clear()
        if self._due_now or wait_s <= 0:
            await asyncio.sleep(0)  # due at once: still let the loop run others between rounds
            return not self._stopped
        loop = self._loop = asyncio.get_running_loop()
        self._sleep_until = loop.time() + wait_s
        try:
            woken = await wait_event(self._wakeup, wait_s)
        finally:
            self._sleep_until = None
        if self._stopped:
            return False
        return not woken or self._due_now
