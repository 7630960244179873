"""Waiting for a condition with a deadline: how tests synchronise with a broker, a thread or a task.

A test polls for what it needs (a record, an assignment, a state) instead of sleeping for a guessed time, so it
goes on as soon as the condition holds and, past the deadline, fails saying what it waited for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str = "the condition", *,
               interval: float = 0.05) -> T:
    """Call `condition` every `interval` s until it returns a truthy value, and return that value; raise
    AssertionError naming `what` once `timeout` s have passed without it."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


async def async_wait_until(condition: Callable[[], T], timeout: float = 10.0, what: str = "the condition", *,
                           interval: float = 0.01) -> T:
    """wait_until for a coroutine: the event loop runs other tasks between the checks."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        value = condition()
        if value:
            return value
        if loop.time() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


def holds_throughout(condition: Callable[[], object], seconds: float, *, interval: float = 0.02) -> bool:
    """Check `condition` every `interval` s for `seconds` s: True if it held at every check, False at the first
    check where it did not."""
    end = time.monotonic() + seconds
    while True:
        if not condition():
            return False
        if time.monotonic() >= end:
            return True
        time.sleep(interval)


def assert_stays(condition: Callable[[], object], seconds: float, what: str = "the condition", *,
                 interval: float = 0.02) -> None:
    """Check `condition` every `interval` s for `seconds` s and raise AssertionError naming `what` the first time
    it is false: a window in which something must NOT happen is watched throughout, to its deadline, and a
    failure shows at once."""
    if not holds_throughout(condition, seconds, interval=interval):
        raise AssertionError(f"{what} no longer held")


async def async_assert_stays(condition: Callable[[], object], seconds: float, what: str = "the condition", *,
                             interval: float = 0.005) -> None:
    """assert_stays for a coroutine: the event loop runs other tasks between the checks."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while True:
        if not condition():
            raise AssertionError(f"{what} no longer held")
        if loop.time() >= end:
            return
        await asyncio.sleep(interval)
