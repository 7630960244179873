"""Waiting with a timeout without losing a cancellation.

On Python 3.11 `asyncio.wait_for` returns the result when its awaitable completes in the same loop iteration as a
cancellation of the waiting task: the cancellation is lost (fixed in 3.12, where wait_for is built on
asyncio.timeout). A background loop that loses its cancel at broker stop goes round again and `stop()` waits for it
(an hour for the timer loops); a request task keeps running after its connection closed. `asyncio.timeout`
(3.11+) tracks the cancellation and re-raises it.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """True once `event` is set, False after `timeout_s` seconds; a cancellation always propagates."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True
