"""Crash safety of the cleaned-segment swap (`.cleaned` -> `.swap` -> replace): a crash injected between any two
steps, in the first or a later group of a round, leaves a log that opens consistent, with every key's latest
value readable; and readers on the event loop see a correct log at every moment of a swap."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.log import swap
from tests.unit.log.cleaner_helpers import (
    COMMITTED,
    STEPS,
    Harness,
    append,
    check_consistent,
    compact_config,
    latest_view,
    records,
)


class SimulatedCrash(BaseException):
    """Not an Exception: nothing on the way up may handle it, as nothing survives a kill -9."""


def filled(tmp: Path) -> tuple[Harness, dict[bytes, bytes], int]:
    h = Harness(tmp, compact_config(segment_bytes=1500, index_interval_bytes=100))
    for i in range(400):
        append(h.log, [(b"key-%d" % (i % 25), b"value-%d-" % i + b"x" * 40)])
        if i % 97 == 0:
            append(h.log, [(b"key-%d" % (i % 25), None)])  # a tombstone now and then
    h.log.roll()
    return h, latest_view(records(h.log)), h.log.size_bytes


@pytest.mark.parametrize("occurrence", [1, 3])
@pytest.mark.parametrize("step", STEPS)
def test_a_crash_between_any_two_swap_steps_recovers(tmp_path: Path, monkeypatch, step: str,
                                                     occurrence: int) -> None:
    h, expected, size = filled(tmp_path)
    seen = []

    def hook(name: str) -> None:
        seen.append(name)
        if name == step and seen.count(name) == occurrence:
            raise SimulatedCrash(name)

    monkeypatch.setattr(swap, "CRASH_HOOK", hook)
    with pytest.raises(SimulatedCrash):
        h.clean()
    monkeypatch.setattr(swap, "CRASH_HOOK", None)
    h.crash()
    h.reopen()
    check_consistent(h, expected)
    swapped = h.log.size_bytes < size
    # the first group's swap is in place once its `.log.swap` existed (and a later group's crash keeps earlier ones)
    assert swapped == (occurrence > 1 or STEPS.index(step) >= COMMITTED)
    append(h.log, [(b"key-0", b"after")])
    h.log.roll()
    assert h.clean()  # and cleaning goes on from there
    check_consistent(h, {**expected, b"key-0": b"after"})


def test_readers_on_the_event_loop_see_a_correct_log_throughout_the_swaps(tmp_path: Path) -> None:
    h, expected, _size = filled(tmp_path)
    scans = 0

    async def run() -> None:
        nonlocal scans
        cleaner = h.new_cleaner()
        task = asyncio.create_task(cleaner.clean_once())
        while not task.done():
            assert latest_view(records(h.log)) == expected  # a full fetch of the log
            scans += 1
            await asyncio.sleep(0)
        assert task.result()
        await cleaner.close()

    asyncio.run(run())
    assert scans > 5
    check_consistent(h, expected)


def test_a_round_stops_when_retention_removed_a_segment_it_cleans(tmp_path: Path) -> None:
    h, expected, _size = filled(tmp_path)

    async def run() -> bool:
        cleaner = h.new_cleaner()
        task = asyncio.create_task(cleaner.clean_once())
        await asyncio.sleep(0)
        # what a DeleteRecords-like change does while the cleaner works: the oldest segment goes
        h.log.cleaning = False
        h.log.delete_records_before(h.log.segments[1].base_offset)
        result = await task
        await cleaner.close()
        return result

    assert asyncio.run(run()) is False
    assert not [p for p in h.log.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert h.clean()
    view = latest_view(records(h.log))
    assert all(expected[k] == v for k, v in view.items())


def test_interrupted_swap_with_an_empty_cleaned_segment_keeps_the_log_start(tmp_path: Path) -> None:
    h = Harness(tmp_path, compact_config(segment_bytes=300))
    for i in range(30):
        append(h.log, [(b"k", b"%d" % i)])
    h.log.roll()
    assert h.clean()
    assert h.log.segments[0].empty and h.log.log_start_offset == 0
    h.log.close()
    h.reopen()
    assert h.log.log_start_offset == 0 and h.log.segments[0].empty
    assert [r.value for r in records(h.log)] == [b"29"]
