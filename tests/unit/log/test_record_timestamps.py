"""Produce-time timestamp checks (Kafka's LogValidator.validateTimestamp): which batches are walked, which records
are refused and with which words, Java's long arithmetic included."""

from __future__ import annotations

import ctypes

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import timestamps
from broker.log.timestamps import LONG_MAX
from protocol import records as rec

NOW = 1_795_000_000_000
HOUR = 3_600_000
LONG_MIN = -(2**63)


def batch(timestamps_: list[int | None], **kwargs) -> bytes:
    return rec.build_batch([rec.Record(key=b"k", value=b"v" * i, timestamp=ts) for i, ts in enumerate(timestamps_)],
                           **kwargs)


def test_a_batch_within_the_window_is_accepted_from_its_header():
    b = batch([NOW - 10 * HOUR, NOW, NOW + HOUR])
    header = rec.read_header(b)
    assert not timestamps.may_refuse(header, NOW, False, LONG_MAX, HOUR)  # Kafka's defaults: no walk
    assert timestamps.record_errors(b, NOW, False, LONG_MAX, HOUR) == []


def test_a_record_too_far_ahead_is_refused_with_kafkas_words():
    b = batch([NOW, NOW + HOUR + 1, -1, NOW + 2 * HOUR], base_offset=0)
    assert timestamps.may_refuse(rec.read_header(b), NOW, False, LONG_MAX, HOUR)
    window = f"[{NOW - LONG_MAX}, {NOW + HOUR}]"
    assert timestamps.record_errors(b, NOW, False, LONG_MAX, HOUR) == [
        (1, f"Timestamp {NOW + HOUR + 1} of message with offset 1 is out of range. The timestamp should be within "
            f"{window}"),
        (3, f"Timestamp {NOW + 2 * HOUR} of message with offset 3 is out of range. The timestamp should be within "
            f"{window}"),
    ]  # a record without a timestamp (-1) is never judged


def test_a_bounded_past_walks_every_batch_and_refuses_old_records():
    b = batch([NOW - 61_000, NOW - 59_000])
    assert timestamps.may_refuse(rec.read_header(b), NOW, False, 60_000, HOUR)
    assert timestamps.record_errors(b, NOW, False, 60_000, HOUR) == [
        (0, f"Timestamp {NOW - 61_000} of message with offset 0 is out of range. The timestamp should be within "
            f"[{NOW - 60_000}, {NOW + HOUR}]")]


def test_records_refused_for_their_key_are_not_judged_again():
    b = batch([NOW + 2 * HOUR, NOW + 2 * HOUR])
    errors = timestamps.record_errors(b, NOW, False, LONG_MAX, HOUR, skip=frozenset({0}))
    assert [i for i, _ in errors] == [1]


def test_java_overflow_is_kept():
    """Kafka computes in longs: a far-past record overflows `now - ts` and is refused by the future bound, and the
    window's upper bound wraps when after.max.ms is Long.MAX_VALUE."""
    b = batch([LONG_MIN + 5])
    errors = timestamps.record_errors(b, NOW, False, LONG_MAX, HOUR)
    assert [i for i, _ in errors] == [0]
    wrapped = NOW + LONG_MAX - 2**64
    far = batch([NOW + 10 * HOUR])
    assert timestamps.record_errors(far, NOW, False, 60_000, LONG_MAX) == []
    old = batch([NOW - 61_000])
    assert timestamps.record_errors(old, NOW, False, 60_000, LONG_MAX) == [
        (0, f"Timestamp {NOW - 61_000} of message with offset 0 is out of range. The timestamp should be within "
            f"[{NOW - 60_000}, {wrapped}]")]


def test_a_batch_flagged_log_append_time_is_refused_on_a_log_append_time_topic():
    b = batch([NOW, NOW + 5], log_append_time=True)
    header = rec.read_header(b)
    assert timestamps.may_refuse(header, NOW, True, LONG_MAX, HOUR)
    stamped = header.max_timestamp  # every record of such a batch reads the batch's MaxTimestamp, as in Kafka
    assert timestamps.record_errors(b, NOW, True, LONG_MAX, HOUR) == [
        (i, f"Invalid timestamp type in message DefaultRecord(offset={i}, timestamp={stamped}, key=1 bytes, "
            f"value={i} bytes). Producer should not set timestamp type to LogAppendTime.") for i in range(2)]
    # not flagged: the broker stamps it, nothing to judge
    plain = batch([NOW + 10 * HOUR])
    assert not timestamps.may_refuse(rec.read_header(plain), NOW, True, LONG_MAX, HOUR)


def test_a_flagged_batch_on_a_create_time_topic_is_judged_by_its_max_timestamp():
    b = batch([NOW, NOW + 5], log_append_time=True)
    assert timestamps.record_errors(b, NOW, False, LONG_MAX, HOUR) == []


def _java(ts: int, now: int, before: int, after: int) -> bool:
    """Kafka's recordHasInvalidTimestamp in C longs (ctypes wraps around as the JVM does)."""
    diff = ctypes.c_int64(now - ts).value
    return diff > before or ctypes.c_int64(-diff).value > after


# within ±2^61 the deltas of one batch fit a long (the overflow of `now - ts` has its own test above)
stamps_ = st.lists(st.integers(min_value=-(2**61), max_value=2**61), min_size=1, max_size=5)
windows = st.integers(min_value=0, max_value=LONG_MAX)


@settings(max_examples=300, deadline=None)
@given(stamps_, st.integers(0, 2**50), windows, windows)
def test_refusals_match_kafkas_arithmetic(stamps, now, before, after):
    b = rec.build_batch([rec.Record(key=b"k", value=b"v", timestamp=ts) for ts in stamps])
    expected = [i for i, ts in enumerate(stamps) if ts != -1 and _java(ts, now, before, after)]
    assert [i for i, _ in timestamps.record_errors(b, now, False, before, after)] == expected
    if expected:  # the header never hides a refusal in a batch an honest producer built
        assert timestamps.may_refuse(rec.read_header(b), now, False, before, after)


CODECS = [rec.COMPRESSION_NONE, rec.COMPRESSION_GZIP, rec.COMPRESSION_SNAPPY, rec.COMPRESSION_LZ4,
          rec.COMPRESSION_ZSTD]


@settings(max_examples=150, deadline=None)
@given(stamps_, st.sampled_from(CODECS), st.booleans(), st.integers(0, 2**40))
def test_the_timestamp_walk_reads_what_a_full_decode_reads(stamps, codec, flagged, base_offset):
    b = rec.build_batch([rec.Record(key=b"k" * (i % 3), value=b"v" * (i * 50), timestamp=ts)
                         for i, ts in enumerate(stamps)], base_offset=base_offset, compression=codec,
                        log_append_time=flagged)
    assert list(rec.iter_timestamps(b)) == [(r.timestamp, r.offset) for r in rec.iter_records(b)]


def test_the_timestamp_walk_reads_long_deltas():
    """Offset deltas past 63 and timestamp deltas of several bytes, either sign, take the varint path."""
    b = rec.build_batch([rec.Record(b"k", b"v", timestamp=NOW + (-1) ** i * i * 100_000) for i in range(300)])
    assert list(rec.iter_timestamps(b)) == [(r.timestamp, r.offset) for r in rec.iter_records(b)]
