"""Kafka's sampled `Rate` and `TokenBucket` stats, sans-IO (time in milliseconds is passed in).

`Rate` is Kafka's Rate over a WindowedSum (SampledStat): `samples` samples of `window_ms` each, plus one extra
slot for the sample overlapping the start of the monitored window; samples with no event within
samples * window_ms are reset; the rate divides the sum by the elapsed time since the oldest sample, counting at
least samples - 1 full windows (so the first second of traffic is not measured as a huge rate).
`TokenBucket` is Kafka's: burst = samples * window_s * quota, refilled at `quota` per second, may go negative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetricConfig:
    samples: int  # quota.window.num
    window_ms: int  # quota.window.size.seconds * 1000


class _Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class Rate:
    """Units per second over the sampled window (Kafka's `new Rate()`: TimeUnit.SECONDS, WindowedSum)."""

    __slots__ = ("_current", "_samples")

    def __init__(self) -> None:
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= config.window_ms:
            sample = self._advance(config, now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self._purge(config, now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(config, now_ms) / 1000)

    def window_size_ms(self, config: MetricConfig, now_ms: int) -> int:
        self._purge(config, now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full = elapsed // config.window_ms
        if full < config.samples - 1:
            elapsed += (config.samples - 1 - full) * config.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, config: MetricConfig, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (config.samples + 1)  # one extra slot for the overlapping sample
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    def _purge(self, config: MetricConfig, now_ms: int) -> None:
        expire = config.samples * config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)


class TokenBucket:
    """Kafka's TokenBucket (controller mutation quotas): starts empty, refills at `quota` per second up to the
    burst, and may go below zero (a strict check refuses the next mutation until it is back to zero)."""

    __slots__ = ("_last_ms", "_tokens")

    def __init__(self) -> None:
        self._tokens = 0.0
        self._last_ms = 0

    def measure(self, config: MetricConfig, quota: float, now_ms: int) -> float:
        self._refill(config, quota, now_ms)
        return self._tokens

    def record(self, config: MetricConfig, quota: float, value: float, now_ms: int) -> None:
        self._refill(config, quota, now_ms)
        self._tokens = min(_burst(config, quota), self._tokens - value)

    def _refill(self, config: MetricConfig, quota: float, now_ms: int) -> None:
        self._tokens = min(_burst(config, quota), self._tokens + quota * (now_ms - self._last_ms) / 1000)
        self._last_ms = now_ms


def _burst(config: MetricConfig, quota: float) -> float:
    return config.samples * config.window_ms / 1000 * quota


def throttle_time_ms(value: float, bound: float, window_ms: int) -> int:
    """Kafka's QuotaUtils.throttleTime: the delay X that brings the observed rate O back to the bound T over the
    window W, O * W / (W + X) = T, so X = (O - T) / T * W (rounded as Java's Math.round)."""
    return int(math.floor((value - bound) / bound * window_ms + 0.5))
