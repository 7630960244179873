"""Cost of one Prometheus scrape with many partitions: the part that runs on the event loop (the collectors
reading the components into rows) and the part that runs in a worker thread (metric families built from the
rows, text encoding); `registry.collect()` on the loop shown for comparison.

    python -m bench.metrics_scrape [--partitions N] [--rounds R]

Uses in-memory stand-ins for partition logs (the collectors read only their offsets and sizes) and real
ShareInFlight objects with acquired and acknowledged records, one share-partition per partition.
"""

from __future__ import annotations

import argparse
import time
import uuid
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from broker.metrics.collectors import SNAPSHOTS, LogCollector, SharePartitionCollector
from broker.share_partition.inflight import ACK_ACCEPT, ShareInFlight
from broker.share_partition.partition import SharePartition


def _broker(partitions: int) -> SimpleNamespace:
    plogs = {("topic", p): SimpleNamespace(size_bytes=1 << 20, log_start_offset=0, log_end_offset=1000,
                                           high_watermark=1000, segments=[object()]) for p in range(partitions)}
    share = []
    topic_id = uuid.uuid4()
    for p in range(partitions):
        inflight = ShareInFlight(0)
        inflight.acquire("m", [(0, 99), (100, 199)], 200, now_ms=0)
        inflight.acknowledge("m", [(0, 99, [ACK_ACCEPT])], now_ms=1)
        share.append(SharePartition(("group", topic_id, p), "topic", inflight))
    return SimpleNamespace(
        logs=SimpleNamespace(logs=lambda: iter(list(plogs.items())), find=lambda t, p: plogs.get((t, p))),
        share_partitions=SimpleNamespace(loaded_partitions=lambda: list(share)))


def main(partitions: int, rounds: int) -> None:
    broker = _broker(partitions)
    registry = CollectorRegistry()
    collectors = (LogCollector(broker.logs), SharePartitionCollector(broker.share_partitions, broker.logs))
    for collector in collectors:
        registry.register(collector)
    read = encode = whole = float("inf")
    size = 0
    for _ in range(rounds):
        start = time.perf_counter()
        rows = {id(c): c.read() for c in collectors}
        middle = time.perf_counter()
        token = SNAPSHOTS.set(rows)
        text = generate_latest(registry)
        SNAPSHOTS.reset(token)
        end = time.perf_counter()
        list(registry.collect())
        whole = min(whole, time.perf_counter() - end)
        read, encode, size = min(read, middle - start), min(encode, end - middle), len(text)
    print(f"{partitions} partitions + {partitions} share-partitions: read on the loop {read * 1e3:.1f} ms, "
          f"build and encode in a thread {encode * 1e3:.1f} ms, {size / 1e6:.1f} MB of text "
          f"(registry.collect() alone: {whole * 1e3:.1f} ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    main(args.partitions, args.rounds)
