"""Kafka's Rate (sampled windowed sum) and TokenBucket, and QuotaUtils.throttleTime, against hand-computed values."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.quotas.stats import MetricConfig, Rate, TokenBucket, throttle_time_ms

CONFIG = MetricConfig(samples=11, window_ms=1000)


def test_rate_counts_at_least_samples_minus_one_windows():
    rate = Rate()
    rate.record(CONFIG, 1000, 0)
    # one record at t=0: elapsed 0 ms is stretched to 10 full windows, as Kafka's Rate.windowSize
    assert rate.window_size_ms(CONFIG, 0) == 10_000
    assert rate.measure(CONFIG, 0) == 100.0
    assert rate.window_size_ms(CONFIG, 500) == 10_500
    assert rate.measure(CONFIG, 500) == 1000 / 10.5


def test_rate_forgets_samples_older_than_the_window():
    rate = Rate()
    rate.record(CONFIG, 5000, 0)
    rate.record(CONFIG, 100, 11_000)  # the t=0 sample had no event for 11 windows: reset
    assert rate.measure(CONFIG, 11_000) == 100 / 10


def test_steady_rate_measures_the_rate():
    rate = Rate()
    for t in range(0, 30_000, 100):
        rate.record(CONFIG, 100, t)  # 1000 units per second
    assert abs(rate.measure(CONFIG, 29_900) - 1000) < 1000 * 0.1


def test_throttle_time_is_kafkas_formula():
    # O = 2000, T = 1000 over W = 10 s: X = (O - T) / T * W = 10 s
    assert throttle_time_ms(2000, 1000, 10_000) == 10_000
    assert throttle_time_ms(1000.5, 1000, 1000) == 1  # rounded half up, as Math.round
    assert throttle_time_ms(1000.4, 1000, 1000) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.floats(0, 1e6)), min_size=1, max_size=60))
def test_throttle_brings_the_rate_back_to_the_bound(steps):
    """Whatever was recorded, waiting the throttle time with nothing more recorded brings the rate to the bound
    (within rounding), which is what QuotaUtils.throttleTime promises while the samples still count."""
    rate = Rate()
    now = 0
    for gap, value in steps:
        now += gap
        rate.record(CONFIG, value, now)
    observed = rate.measure(CONFIG, now)
    bound = 1000.0
    if observed <= bound:
        return
    window = rate.window_size_ms(CONFIG, now)
    delay = throttle_time_ms(observed, bound, window)
    total = observed * window / 1000
    assert abs(total / ((window + delay) / 1000) - bound) <= bound * 0.01 + 1


def test_token_bucket_starts_empty_refills_and_goes_negative():
    bucket = TokenBucket()
    quota = 10.0  # per second; burst = 11 samples * 1 s * 10 = 110
    assert bucket.measure(CONFIG, quota, 0) == 0
    assert bucket.measure(CONFIG, quota, 1000) == 10
    bucket.record(CONFIG, quota, 30, 1000)
    assert bucket.measure(CONFIG, quota, 1000) == -20
    assert bucket.measure(CONFIG, quota, 3000) == 0
    assert bucket.measure(CONFIG, quota, 100_000) == 110  # capped at the burst
