"""Start a coroutine eagerly (Python 3.12's eager tasks, for 3.11): it runs at once up to its first suspension.

A share-state write usually completes without suspending (the coordinator's append is synchronous and, with the
deferred fsync, its future is already done), yet as a Task it would cost two event-loop turns (the task's first
step, then the awaiting caller's wake-up) plus the task and its callbacks. Started here it finishes inside the
caller's step and its result comes back at once, with no future made. A coroutine that does suspend continues in a
Task exactly where it stopped, and the caller gets that task to wait on (and to let later writes wait on).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_eager(coro: Coroutine[Any, Any, T]) -> tuple[bool, Any]:
    """Run `coro` now: (True, its result) if it finished without suspending, else (False, the task it goes on
    in). An exception it raises before suspending is raised here. No future is made for the first case."""
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return True, stop.value
    return False, _continue(coro, yielded)


def _continue(coro: Coroutine[Any, Any, T], yielded: Any) -> asyncio.Task[T]:
    task = asyncio.get_running_loop().create_task(_resume(coro, yielded))

    def cancelled_before_start(t: asyncio.Task[T]) -> None:
        # A task cancelled before its first step never enters _resume: pass the cancellation on by hand.
        if t.cancelled():
            if isinstance(yielded, asyncio.Future):
                yielded.cancel()
            coro.close()

    task.add_done_callback(cancelled_before_start)
    return task


async def _resume(coro: Coroutine[Any, Any, T], yielded: Any) -> T:
    """Drive `coro` on from a suspension, as asyncio's Task does: wait for the future it yielded (a bare yield
    is one loop turn), then send it None so that it reads the future's outcome itself."""
    while True:
        try:
            if yielded is None:
                await asyncio.sleep(0)
            else:
                yielded._asyncio_future_blocking = False
                await asyncio.wait([yielded])
        except asyncio.CancelledError as err:
            if yielded is not None:
                yielded.cancel()  # as Task.cancel cancels the future its coroutine waits on
            try:
                yielded = coro.throw(err)
            except StopIteration as stop:
                thrown: T = stop.value
                return thrown
            continue
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            result: T = stop.value
            return result
