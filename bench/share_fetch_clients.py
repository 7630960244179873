"""Broker CPU per megabyte read by real clients: a confluent Consumer next to a confluent ShareConsumer, same topic.

    .venv/bin/python -m bench.share_fetch_clients [--mib M] [--rounds R] [--partitions P]

Starts one Shoal broker with its default settings, produces M MiB of 1 KiB and of 100 B records (confluent Producer
with librdkafka's default batching: up to 1 MB batches, linger 5 ms) and reads each topic whole, rounds alternated:
with a Consumer assigned every partition from offset 0, and with a ShareConsumer of a new share group (implicit
acknowledgement, up to 10 000 records per poll). Each read runs in a process of its own (bench.latency's consumer
process) and is measured as the broker process's CPU time (all its threads) from the client's first poll to its
last record; its set-up (a share group's config, connection, group join and share-partition load, first fetch)
is printed apart. A first round is not counted. Where bench.share_fetch_cpu compares the two request paths with
requests of the same size, this is what the clients users run cost: librdkafka fetches whole batches up to 1 MiB
per partition, and a ShareFetch acquires up to the share-partition's in-flight limit
(group.share.partition.max.record.locks, 2 000 records by default) rounded up to a whole batch: three ~1 MB batches
of 1 KiB records per ShareFetch against one per Fetch, one ~0.6 MB batch of 100 B records on both sides.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from pathlib import Path

from bench.latency import drain
from bench.servers import start_shoal, stop
from bench.share_fetch_cpu import cpu_seconds
from bench.throughput import _create_topic, produce

KINDS = {"assign": "Consumer", "share": "ShareConsumer"}


def read_cpu(pid: int, bootstrap: str, kind: str, topic: str, partitions: int, records: int, size: int
             ) -> tuple[float, float]:
    """Broker CPU seconds of one whole read of `topic` by a client of `kind`: (set-up, the rest). The set-up runs
    until the client's first poll returned: for a ShareConsumer its new group's config, joining the group and the
    share-partition's load; the connection and the first fetch."""
    marks = [cpu_seconds(pid)]
    drain(bootstrap, kind, partitions=partitions, records=records, size=size, members=1, topic=topic,
          on_ready=lambda: marks.append(cpu_seconds(pid)))
    start, ready = marks
    return ready - start, cpu_seconds(pid) - ready


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=128, help="MiB per topic")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1)
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="shoal-bench-")))
        proc, port = start_shoal(tmp)
        stack.callback(stop, proc)
        bootstrap = f"127.0.0.1:{port}"
        print(f"load: {os.getloadavg()}")
        for size in (1024, 100):
            topic, records = f"clients-{size}", args.mib * (1 << 20) // size
            _create_topic(bootstrap, topic, args.partitions)
            produce(bootstrap, topic, records, size, partitions=args.partitions)
            per: dict[str, list[float]] = {kind: [] for kind in KINDS}
            setups: dict[str, list[float]] = {kind: [] for kind in KINDS}
            for round_no in range(args.rounds + 1):
                for kind in KINDS:
                    setup, cpu = read_cpu(proc.pid, bootstrap, kind, topic, args.partitions, records, size)
                    if round_no:
                        per[kind].append(cpu * 1000 / args.mib)
                        setups[kind].append(setup * 1000)
            for kind, name in KINDS.items():
                print(f"{size:>5} B {name:>14}: {statistics.median(per[kind]):.3f} ms/MiB "
                      f"({' '.join(f'{x:.3f}' for x in per[kind])}); set-up and first fetch "
                      f"{statistics.median(setups[kind]):.1f} ms, not counted")
            ratio = statistics.median(per["share"]) / statistics.median(per["assign"])
            print(f"{size:>5} B ShareConsumer/Consumer broker CPU per MiB: {ratio:.2f}x")
        print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
