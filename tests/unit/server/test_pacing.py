"""broker.pacing: a paced builder lets other callbacks run once its slice is used up, and stays in one piece when
it is short; `heavy` counts array elements at any depth and stops at its limit."""

from __future__ import annotations

import asyncio
import time

from broker.pacing import Pacer, heavy, paced


def test_a_long_builder_lets_other_callbacks_run_and_a_short_one_does_not_yield() -> None:
    async def scenario() -> tuple[int, int, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.get_running_loop().create_task(ticker())
        await asyncio.sleep(0)
        pacer = Pacer(slice_s=0.002)
        before = ticks
        deadline = time.perf_counter() + 10
        while pacer.yields < 10 and time.perf_counter() < deadline:  # work in 2 ms slices
            await pacer.pace()
        during = ticks - before
        short = Pacer(slice_s=10.0)
        for _ in range(1000):
            await short.pace()
        task.cancel()
        return during, pacer.yields, short.yields

    during, yields, short_yields = asyncio.run(scenario())
    assert yields == 10 and during >= 10  # the ticker ran between the slices
    assert short_yields == 0


def test_paced_iterates_everything_in_order() -> None:
    async def scenario() -> list[int]:
        return [x async for x in paced(range(10_000), Pacer(slice_s=0.0))]

    assert asyncio.run(scenario()) == list(range(10_000))


def test_heavy_counts_nested_arrays_up_to_its_limit() -> None:
    assert not heavy({"groups": [{"members": [1] * 10}] * 10}, limit=200)  # 10 + 100 elements
    assert heavy({"groups": [{"members": [{"assignment": {"partitions": list(range(100))}}] * 3}] * 2}, limit=500)
    assert heavy({"topics": list(range(2_001))})
    assert not heavy({"throttle_time_ms": 0, "error_code": 0, "topics": []})
    huge = {"topics": [{"partitions": list(range(1000))}] * 100_000}
    started = time.perf_counter()
    assert heavy(huge)
    assert time.perf_counter() - started < 0.05  # stops counting at the limit
