"""`Timed`: the loop time a handler takes counts its own steps, not the time it waits; results, errors and
cancellation pass through as with a plain await."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.quotas.request_time import Timed


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def test_counts_running_steps_not_waits():
    async def handler() -> str:
        spin(0.02)
        await asyncio.sleep(0.5)  # waiting: not charged
        spin(0.02)
        return "done"

    timed = Timed(handler())
    assert await timed == "done"
    # the steps' wall time: a loaded machine may stretch it, never by the 0.5 s a charged wait would add
    assert 0.04 <= timed.busy_ns / 1e9 < 0.4


async def test_errors_and_cancellation_pass_through():
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await Timed(failing())

    cleaned = asyncio.Event()
    started = asyncio.Event()

    async def waiting() -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.set()

    async def run() -> None:
        await Timed(waiting())

    task = asyncio.ensure_future(run())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned.is_set()  # the handler saw the cancellation
