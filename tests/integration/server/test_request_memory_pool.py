"""Kafka's queued.max.request.bytes: many connections each holding part of a large request frame hold about the
pool's capacity together (not each its own buffer), the broker keeps answering once they are gone, and the memory
goes back to the operating system after the burst."""

from __future__ import annotations

import contextlib
import socket
import struct
import time

import pytest
from confluent_kafka import Producer

from tests.helpers.proc_stats import rss_mib
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

CONNECTIONS = 600
DECLARED = 1_000_000  # each frame's size prefix
SENT = 900_000  # body bytes each connection sends of it: never the whole frame
POOL = 32 * 1024 * 1024


def _flood(port: int) -> list[socket.socket]:
    """CONNECTIONS sockets, each sending a size prefix and SENT bytes of a frame that never completes; what the
    broker does not read stays in the kernel's buffers (non-blocking sends, partial writes dropped)."""
    body = struct.pack(">hhi", 0, 9, 1) + b"\x00" * (SENT - 8)
    head = struct.pack(">i", DECLARED)
    socks = []
    for _ in range(CONNECTIONS):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.send(head + body)
        socks.append(s)
    return socks


def _produce_one(bootstrap: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
    delivered = []
    p.produce("after-flood", b"v", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(30)
    assert delivered == [None]


def test_partial_frames_are_bounded_by_the_pool_and_memory_goes_back(broker_factory):
    broker = broker_factory({"queued.max.request.bytes": str(POOL), "auto.create.topics.enable": "true"})
    _produce_one(broker.bootstrap)
    baseline = rss_mib(broker.pid)
    socks = _flood(broker.port)
    try:
        # The broker reads until the pool is exhausted: about POOL bytes (plus the chunks read in the loop turn
        # that exhausted it), where without it every connection would hold its 900 KB: 515 MiB.
        wait_until(lambda: rss_mib(broker.pid) - baseline > POOL / 2**20 / 2, 30, "the broker to read the flood")
        deadline = time.monotonic() + 1.0
        peak = baseline
        while time.monotonic() < deadline:  # sampled for a second: reading must have stopped, not slowed
            peak = max(peak, rss_mib(broker.pid))
            time.sleep(0.05)
        assert peak - baseline < POOL / 2**20 + 96, (baseline, peak)
    finally:
        for s in socks:
            s.close()
    # Connections gone: the pool is empty, requests are read again and the memory is given back.
    _produce_one(broker.bootstrap)
    wait_until(lambda: rss_mib(broker.pid) - baseline < 24, 30, "the broker's RSS back near its baseline")
