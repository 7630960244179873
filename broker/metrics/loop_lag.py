"""Event-loop lag watchdog: how late the loop wakes from a timed sleep is how long something held it.

A task sleeps `interval_s` again and again and measures the overshoot with the monotonic clock (not
`loop.time()`, which uvloop caches per iteration at millisecond resolution). Every overshoot goes into the
`shoal_event_loop_lag_seconds` histogram; one at or above `shoal.loop.lag.warn.ms` also counts in
`shoal_event_loop_stalls_total` and is logged: a warning at most every `warn_every_s` (with how many stalls
the quiet period hid), debug lines otherwise, so a loaded machine does not flood the log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram

log = structlog.get_logger(__name__)

INTERVAL_S = 0.1
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LoopLagWatchdog:
    def __init__(self, registry: CollectorRegistry, *, warn_s: float, interval_s: float = INTERVAL_S,
                 warn_every_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.warn_s = warn_s
        self.interval_s = interval_s
        self.warn_every_s = warn_every_s
        self._clock = clock
        self.lag = Histogram("shoal_event_loop_lag_seconds",
                             "How much later than asked the event loop woke a timed sleep (what held the loop).",
                             buckets=LAG_BUCKETS, registry=registry)
        self.stalls = Counter("shoal_event_loop_stalls",
                              "Event-loop wake-ups late by shoal.loop.lag.warn.ms or more.", registry=registry)
        self.worst_s = 0.0  # worst lag seen (tests, logs)
        self._last_warning: float | None = None
        self._hidden = 0  # stalls since the last warning that were logged at debug only
        self._hidden_worst = 0.0

    async def run(self) -> None:
        clock, interval = self._clock, self.interval_s
        while True:
            start = clock()
            await asyncio.sleep(interval)
            self.observe(max(0.0, clock() - start - interval))

    def observe(self, lag_s: float) -> None:
        self.lag.observe(lag_s)
        if lag_s > self.worst_s:
            self.worst_s = lag_s
        if lag_s < self.warn_s:
            return
        self.stalls.inc()
        now = self._clock()
        lag_ms = round(lag_s * 1000, 1)
        if self._last_warning is not None and now - self._last_warning < self.warn_every_s:
            self._hidden += 1
            self._hidden_worst = max(self._hidden_worst, lag_s)
            log.debug("event loop stalled", lag_ms=lag_ms, threshold_ms=round(self.warn_s * 1000))
            return
        log.warning("event loop stalled: a callback held the loop", lag_ms=lag_ms,
                    threshold_ms=round(self.warn_s * 1000), stalls_since_last_warning=self._hidden,
                    worst_since_last_warning_ms=round(self._hidden_worst * 1000, 1))
        self._last_warning = now
        self._hidden = 0
        self._hidden_worst = 0.0
