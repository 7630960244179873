"""A swap that fails with an error (not a crash) in the broker's own process, then the log reopened by that same
process (same descriptor cache): the reopened log must serve what recovery made of the files, exactly what a
fresh process opening a copy of the directory serves, never descriptors of files the recovery deleted or
renamed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from broker.log import LogManager, swap
from broker.log.files import FileCache
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


def reopen_same_process(h: Harness):
    """Close the log manager and open the directory again with the same descriptor cache."""
    h.manager.close()
    h.manager = LogManager(h.dir, h.config, clock=h.clock, files=h.files)
    h.manager.start()
    h.log = h.manager.get_or_create("t", 0, h.config)
    return h.log


def filled(tmp: Path) -> tuple[Harness, dict[bytes, bytes], int]:
    """Keys written once at the start (so the first cleaned segment, base 0, keeps records), then keys
    overwritten again and again."""
    h = Harness(tmp, compact_config(segment_bytes=1500, index_interval_bytes=100))
    for i in range(12):  # interleaved with records cleaned away: the cleaned segment differs from the old one
        append(h.log, [(b"once-%d" % i, b"kept-%d-" % i + b"y" * 40)])
        append(h.log, [(b"key-%d" % i, b"early-%d-" % i + b"z" * 40)])
    for i in range(400):
        append(h.log, [(b"key-%d" % (i % 25), b"value-%d-" % i + b"x" * 40)])
    h.log.roll()
    return h, latest_view(records(h.log)), h.log.size_bytes


def everything(plog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in records(plog)]


@pytest.mark.parametrize("error", [OSError, RuntimeError])
@pytest.mark.parametrize("step", STEPS)
def test_a_swap_failing_at_any_step_then_reopened_in_the_same_process(tmp_path: Path, monkeypatch, step,
                                                                      error) -> None:
    h, expected, _size = filled(tmp_path / "a")

    def hook(name: str) -> None:
        if name == step:
            raise error(f"injected at {name}")

    monkeypatch.setattr(swap, "CRASH_HOOK", hook)
    records(h.log)  # a consumer read the whole log: the old segments' descriptors are cached
    assert not h.clean()
    monkeypatch.setattr(swap, "CRASH_HOOK", None)
    # a swap failed half way (any error once its `.log.swap` exists) takes the directory offline
    assert h.log.failures.offline == (error is OSError or STEPS.index(step) >= COMMITTED)
    # what a fresh process makes of the directory as the failure left it
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    fresh = Harness.__new__(Harness)
    fresh.dir, fresh.clock, fresh.config, fresh.files = tmp_path / "b", h.clock, h.config, FileCache(64)
    fresh.manager = LogManager(fresh.dir, fresh.config, clock=fresh.clock, files=fresh.files)
    fresh.manager.start()
    want = everything(fresh.manager.get_or_create("t", 0, fresh.config))
    fresh.manager.close()

    reopen_same_process(h)
    assert everything(h.log) == want
    check_consistent(h, expected)
    append(h.log, [(b"key-0", b"after")])
    h.log.roll()
    assert h.clean()
    check_consistent(h, {**expected, b"key-0": b"after"})


class Abandoned(BaseException):
    """Stops the cleaner where it is, as a crash would, but the process (and its descriptor cache) lives on."""


@pytest.mark.parametrize("step", STEPS)
def test_a_log_abandoned_mid_swap_then_reopened_by_the_same_process(tmp_path: Path, monkeypatch, step) -> None:
    """Recovery renames and deletes files under names this process may still cache (the abandoned log was never
    closed): those descriptors must not serve the reopened log, nor the `.swap` file of a later cleaning."""
    h, expected, _size = filled(tmp_path)

    def hook(name: str) -> None:
        if name == step:
            raise Abandoned(name)

    monkeypatch.setattr(swap, "CRASH_HOOK", hook)
    records(h.log)
    with pytest.raises(Abandoned):
        h.clean()
    monkeypatch.setattr(swap, "CRASH_HOOK", None)
    h.log.closed = True  # abandoned, not closed: its descriptors stay cached
    h.manager = LogManager(h.dir, h.config, clock=h.clock, files=h.files)
    h.manager.start()
    h.log = h.manager.get_or_create("t", 0, h.config)
    check_consistent(h, expected)
    for round_ in range(2):  # later cleanings write `.swap` files under the names recovery renamed
        for i in range(60):
            append(h.log, [(b"key-%d" % (i % 25), b"again-%d-%d" % (round_, i))])
            expected[b"key-%d" % (i % 25)] = b"again-%d-%d" % (round_, i)
        h.log.roll()
        assert h.clean()
        check_consistent(h, expected)
    before = everything(h.log)
    h.manager.close()
    h.files = FileCache(64)
    h.reopen()
    assert everything(h.log) == before  # what the files hold is what was served
