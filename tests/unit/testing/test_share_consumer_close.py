"""The tests' bounded ShareConsumer close: a close() that never returns fails the test by its deadline."""

from __future__ import annotations

import threading

import pytest

from tests.helpers.bounded_close import close_within


class _StuckConsumer:
    def __init__(self) -> None:
        self.release = threading.Event()

    def close(self) -> None:
        self.release.wait()  # as librdkafka's close waiting for partitions that never leave


class _FailingConsumer:
    def close(self) -> None:
        raise RuntimeError("close failed")


def test_a_stuck_close_fails_the_test_by_the_deadline():
    stuck = _StuckConsumer()
    try:
        with pytest.raises(pytest.fail.Exception, match="did not return within 1 s"):
            close_within(stuck, timeout=1)
    finally:
        stuck.release.set()


def test_a_close_that_returns_passes_and_its_error_is_raised():
    done = _StuckConsumer()
    done.release.set()
    close_within(done, timeout=30)
    with pytest.raises(RuntimeError, match="close failed"):
        close_within(_FailingConsumer(), timeout=30)
