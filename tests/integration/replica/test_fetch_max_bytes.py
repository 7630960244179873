"""fetch.max.bytes caps what one Fetch or ShareFetch returns, whatever its MaxBytes asks, and a MinBytes above the
cap counts as the cap (Kafka's KafkaApis: min(MaxBytes, fetch.max.bytes, quota window), MinBytes at most that)."""

from __future__ import annotations

import time

import pytest

from protocol import records as rec
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import create_topic, fetch_partition, produce
from tests.helpers.share_raw import FAST, fetch, part, setup

pytestmark = pytest.mark.integration

CAP = 2000


def small_batch(i: int) -> bytes:
    return rec.build_batch([rec.Record(b"k", b"%d" % i + b"x" * 880)])  # about 950 bytes


@pytest.fixture
def capped(broker_factory):
    return broker_factory({"fetch.max.bytes": str(CAP), **FAST})


def test_a_fetch_returns_at_most_the_cap(capped):
    with RawClient(capped.port) as raw:
        create_topic(raw, "capped")
        for i in range(5):
            assert produce(raw, "capped", small_batch(i)).error_code == 0
        got = fetch_partition(raw, "capped", max_bytes=50 << 20, partition_max=50 << 20)
        assert got.error_code == 0
        assert len(list(rec.iter_batches(got.records))) == 2 and len(got.records) <= CAP


def test_min_bytes_above_the_cap_counts_as_the_cap(capped):
    """A batch larger than the cap is still returned whole (KIP-74), and it satisfies a MinBytes of 10 MiB: the
    fetch answers at once instead of waiting out its MaxWaitMs."""
    with RawClient(capped.port) as raw:
        create_topic(raw, "capped-min")
        big = rec.build_batch([rec.Record(b"k", b"y" * 3000)])
        assert produce(raw, "capped-min", big).error_code == 0
        started = time.monotonic()
        got = fetch_partition(raw, "capped-min", max_wait_ms=30_000, min_bytes=10 << 20)
        assert time.monotonic() - started < 15  # well before MaxWaitMs
        assert got.error_code == 0 and len(list(rec.iter_batches(got.records))) == 1 and len(got.records) == len(big)


def test_a_share_fetch_acquires_at_most_the_cap(capped):
    raw, tid = setup(capped, "capped-share")
    with raw:
        # the first fetch opens the session and starts the share-partition at the log end (the default reset)
        fetch(raw, "capped-group", "m1", 0, tid, max_bytes=50 << 20)
        for i in range(5):
            assert produce(raw, "capped-share", small_batch(i)).error_code == 0
        got = part(fetch(raw, "capped-group", "m1", 1, tid, max_bytes=50 << 20, max_wait_ms=5_000))
        assert got.error_code == 0
        assert len(list(rec.iter_batches(got.records))) == 2 and len(got.records) <= CAP
        assert [(r.first_offset, r.last_offset) for r in got.acquired_records] == [(0, 1)]
