"""run_eager: a coroutine runs at once; one that does not suspend needs no task, future or loop turn."""

import asyncio

import pytest

from broker.share_partition.eager import run_eager


async def test_a_coroutine_that_does_not_suspend_is_done_at_once():
    ran = []

    async def work():
        ran.append(1)
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        await done  # an already-done future does not suspend
        return 42

    assert run_eager(work()) == (True, 42) and ran == [1]


async def test_a_failure_before_any_suspension_is_raised_at_once():
    async def work():
        raise ValueError("boom")

    with pytest.raises(ValueError):
        run_eager(work())


async def test_a_suspending_coroutine_continues_in_a_task_with_outcomes_passed_through():
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    steps = []

    async def work():
        steps.append("start")
        steps.append(await first)
        await asyncio.sleep(0)
        try:
            await second
        except KeyError:
            steps.append("caught")
        return "end"

    finished, fut = run_eager(work())
    assert steps == ["start"] and not finished and not fut.done()
    first.set_result("first")
    await asyncio.sleep(0)
    second.set_exception(KeyError("x"))
    assert await asyncio.wait_for(fut, 5) == "end"
    assert steps == ["start", "first", "caught"]


async def test_cancelling_the_task_cancels_what_the_coroutine_waits_on():
    loop = asyncio.get_running_loop()
    blocker = loop.create_future()

    async def work():
        await blocker

    _, fut = run_eager(work())
    fut.cancel()  # before the task's first step
    with pytest.raises(asyncio.CancelledError):
        await fut
    assert blocker.cancelled()


async def test_cancelling_a_running_task_cancels_what_the_coroutine_waits_on():
    loop = asyncio.get_running_loop()
    blocker = loop.create_future()
    cleaned = []

    async def work():
        await asyncio.sleep(0)
        try:
            await blocker
        finally:
            cleaned.append(1)

    _, fut = run_eager(work())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    fut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fut
    assert blocker.cancelled() and cleaned == [1]
