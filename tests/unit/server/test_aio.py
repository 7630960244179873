"""broker.aio.wait_event: a cancellation that arrives as the event is set is never lost (asyncio.wait_for loses
it on Python 3.11), and the waits built on it (a parked fetch, the coordinators' timer loops) end when cancelled."""

from __future__ import annotations

import asyncio

import pytest

from broker.aio import wait_event
from broker.replica_manager import ReplicaManager


async def test_set_then_timeout() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 10) is True


async def test_a_cancel_in_the_iteration_the_event_is_set_is_not_lost() -> None:
    event = asyncio.Event()
    task = asyncio.ensure_future(wait_event(event, 30))
    await asyncio.sleep(0)  # parked
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_woken_fetch_wait_that_is_cancelled_ends_cancelled() -> None:
    """A parked fetch woken by an append in the iteration its request is cancelled (its connection closed): it used
    to return True and go on serving a gone client."""
    replicas = ReplicaManager(topics=None, flusher=None)
    task = asyncio.ensure_future(replicas.wait_for_append([("t", 0)], 30))
    await asyncio.sleep(0)
    replicas._wake("t", 0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not replicas._waiters  # unparked


async def test_a_timer_loop_ends_when_cancelled_as_it_is_kicked() -> None:
    """The coordinators' timer loops wait for a kick or their next deadline; one cancelled (broker stop) in the
    iteration it is kicked must end, not go round and wait for the next deadline (an hour)."""
    kick = asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            kick.clear()
            if await wait_event(kick, 3600.0):
                rounds += 1
                continue

    task = asyncio.ensure_future(loop())
    await asyncio.sleep(0)
    kick.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert rounds == 0
