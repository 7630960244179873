"""The loop time a request's handler takes: our equivalent of Kafka's request handler thread time.

Kafka's request quota (request_percentage) charges each request the time a request handler thread spent on it
(requestThreadTimeNanos) plus its network thread time, as a percentage of one thread per second. Shoal has one
event loop, so the faithful equivalent is the time the loop spends running the request's own code: the router's
decode and encode, plus every step of the handler coroutine, but not the time it waits suspended (a long poll,
a journal fsync, a produce waiting for durability), which Kafka's delayed operations also do not charge.
`Timed` drives the handler coroutine step by step and adds up the time of each step.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator
from typing import Any

NANOS_TO_PERCENTAGE = 100 / 1e9  # Kafka's ClientRequestQuotaManager.NanosToPercentagePerSecond


class Timed:
    """`await Timed(coro)` runs `coro` as `await coro` would, adding each step's duration to `busy_ns`."""

    __slots__ = ("_coro", "busy_ns")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self.busy_ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        send: Any = None
        error: BaseException | None = None
        clock = time.perf_counter_ns
        while True:
            start = clock()
            try:
                yielded = coro.throw(error) if error is not None else coro.send(send)
            except StopIteration as stop:
                self.busy_ns += clock() - start
                return stop.value
            except BaseException:
                self.busy_ns += clock() - start
                raise
            self.busy_ns += clock() - start
            error = None
            send = None
            try:
                send = yield yielded  # the future the handler waits on goes up to the task unchanged
            except BaseException as err:  # noqa: BLE001 - cancellation and thrown errors go into the handler
                error = err
