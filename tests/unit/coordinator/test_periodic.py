"""PeriodicTask, the one helper of the broker's periodic loops: rounds every interval or at a deadline, woken early
to recompute the deadline or to run at once, a failed round logged without ending the task, stop and cancel."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from broker.coordinator.periodic import PeriodicTask
from tests.helpers.waiting import async_wait_until


async def test_rounds_run_every_interval_until_stopped() -> None:
    rounds: list[float] = []
    task = PeriodicTask("t", lambda: rounds.append(asyncio.get_running_loop().time()), every_s=0.02)
    running = asyncio.ensure_future(task.run())
    await async_wait_until(lambda: len(rounds) >= 3)
    assert all(b - a >= 0.015 for a, b in zip(rounds, rounds[1:], strict=False))  # not sooner than the interval
    task.stop()
    await asyncio.wait_for(running, 5)


async def test_run_soon_runs_a_round_without_waiting_for_the_interval() -> None:
    rounds: list[int] = []
    task = PeriodicTask("t", lambda: rounds.append(1), every_s=3600)
    running = asyncio.ensure_future(task.run())
    task.run_soon()
    await async_wait_until(lambda: rounds == [1])
    task.run_soon()
    await async_wait_until(lambda: rounds == [1, 1])
    task.stop()
    await asyncio.wait_for(running, 5)
    assert rounds == [1, 1]


async def test_a_deadline_task_recomputes_its_deadline_when_woken() -> None:
    due: list[float | None] = [None]  # nothing due: it would sleep an hour
    asked: list[int] = []
    rounds: list[int] = []

    def next_due() -> float | None:
        asked.append(1)
        return due[0]

    def work() -> None:
        rounds.append(1)
        due[0] = None

    task = PeriodicTask("t", work, next_due_s=next_due)
    running = asyncio.ensure_future(task.run())
    await async_wait_until(lambda: task._sleep_until is not None and len(asked) == 1)
    task.wake()  # nothing changed: it asks again and goes back to sleep without a round
    await async_wait_until(lambda: task._sleep_until is not None and len(asked) == 2)
    assert rounds == []
    due[0] = 0.01
    task.wake_if_due_before(0.01)  # earlier than its sleep's end: woken
    await async_wait_until(lambda: rounds == [1])
    task.stop()
    await asyncio.wait_for(running, 5)


async def test_wake_if_due_before_leaves_an_earlier_sleep_alone() -> None:
    task = PeriodicTask("t", lambda: None, next_due_s=lambda: 0.5)
    running = asyncio.ensure_future(task.run())
    await async_wait_until(lambda: task._sleep_until is not None)
    task.wake_if_due_before(60)  # later than the current sleep's end: no need to wake
    assert not task._wakeup.is_set()
    task.wake_if_due_before(0)
    assert task._wakeup.is_set()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_a_failed_round_is_logged_and_the_task_goes_on() -> None:
    calls: list[int] = []

    async def work() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")

    task = PeriodicTask("t", work, every_s=0.01, failure_event="test rounds failed",
                        failure_fields={"task": "work"}, retry_after_s=0.01)
    with capture_logs() as logs:
        running = asyncio.ensure_future(task.run())
        await async_wait_until(lambda: len(calls) >= 3)
    failures = [e for e in logs if e["event"] == "test rounds failed"]
    assert len(failures) == 1 and failures[0]["task"] == "work" and failures[0]["log_level"] == "error"
    running.cancel()  # a cancellation ends it, whatever the round is doing
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_a_cancelled_round_ends_the_task() -> None:
    started = asyncio.Event()

    async def work() -> None:
        started.set()
        await asyncio.sleep(3600)

    task = PeriodicTask("t", work, next_due_s=lambda: 0)
    running = asyncio.ensure_future(task.run())
    await asyncio.wait_for(started.wait(), 5)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


def test_exactly_one_schedule() -> None:
    with pytest.raises(ValueError):
        PeriodicTask("t", lambda: None)
    with pytest.raises(ValueError):
        PeriodicTask("t", lambda: None, every_s=1, next_due_s=lambda: 1)
