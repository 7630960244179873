"""tests/helpers/waiting.py: a negative window fails as soon as what must not happen does, and holds to its end."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.helpers.waiting import assert_stays, async_assert_stays


def test_assert_stays_watches_the_whole_window() -> None:
    started = time.monotonic()
    assert_stays(lambda: True, 0.1, interval=0.01)
    assert time.monotonic() - started >= 0.1
    flips = time.monotonic() + 0.05
    with pytest.raises(AssertionError, match="the thing no longer held"):
        assert_stays(lambda: time.monotonic() < flips, 10, "the thing", interval=0.01)
    assert time.monotonic() - started < 5  # failed when it flipped, not at the window's end


async def test_async_assert_stays_lets_the_loop_run_and_fails_when_it_flips() -> None:
    done = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, done.set)
    started = asyncio.get_running_loop().time()
    with pytest.raises(AssertionError, match="unset no longer held"):
        await async_assert_stays(lambda: not done.is_set(), 10, "unset")
    assert asyncio.get_running_loop().time() - started < 5
    await async_assert_stays(lambda: done.is_set(), 0.05)
