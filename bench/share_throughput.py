"""Share-group consume throughput (ShareConsumer, implicit acks) next to classic fetch throughput, same run.

`python -m bench.share_throughput` starts a Shoal broker, and for 1 and 4 ShareConsumers on 1 and 4 partitions
produces N 1 KiB records, then times how long the consumers (threads; librdkafka releases the GIL in poll) take
to receive all of them, from the first record on (the group join before it is reported separately). Classic fetch of the same records with an assigned Consumer is measured as reference.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from bench.clients import create_topic, read, send
from bench.servers import running_servers

RECORD = b"x" * 1024


def _setup(bootstrap: str, topic: str, partitions: int, records: int, group: str) -> None:
    create_topic(bootstrap, topic, partitions)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 64_000})
    send(producer, topic, RECORD, records, partitions)
    if producer.flush(120):
        raise RuntimeError("produce did not finish")


def share_consume(bootstrap: str, topic: str, group: str, consumers: int, records: int) -> tuple[float, float]:
    """(seconds from subscribe to the first record, seconds from the first record to the last)."""
    counts = [0] * consumers
    stop = threading.Event()
    start = time.perf_counter()
    first: list[float] = []

    def run(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "share.acknowledgement.mode": "implicit"})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                got = sum(1 for m in c.poll(0.5) if m.error() is None)
                if got and not first:
                    first.append(time.perf_counter())
                counts[i] += got
                if sum(counts) >= records:
                    stop.set()
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    stop.wait(180)
    end = time.perf_counter()
    stop.set()
    for t in threads:
        t.join(30)
    if sum(counts) < records:
        raise RuntimeError(f"share consumers stalled at {sum(counts)}/{records}")
    return first[0] - start, end - first[0]


def classic_fetch(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}", "enable.auto.commit": False})
    try:
        start, _first = read(c, topic, partitions, records)
        return time.perf_counter() - start
    finally:
        c.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.share_throughput")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    rows = []
    with running_servers(include_peers=False) as servers:
        bootstrap = servers["shoal"]
        for partitions in (1, 4):
            topic = f"share-bench-{partitions}p-{uuid.uuid4().hex[:6]}"
            _setup(bootstrap, topic, partitions, args.records, "unused")
            classic_s = classic_fetch(bootstrap, topic, partitions, args.records)
            rows.append({"mode": "classic fetch", "consumers": 1, "partitions": partitions, "seconds": classic_s})
            for consumers in (1, 4):
                group = f"share-bench-{uuid.uuid4().hex[:6]}"
                resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
                    ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
                admin = AdminClient({"bootstrap.servers": bootstrap})
                admin.incremental_alter_configs([resource])[resource].result(timeout=30)
                join_s, seconds = share_consume(bootstrap, topic, group, consumers, args.records)
                rows.append({"mode": "share consume", "consumers": consumers, "partitions": partitions,
                             "seconds": seconds, "first_record_after_s": round(join_s, 2)})
    for row in rows:
        row["records"] = args.records
        row["records_s"] = round(args.records / row["seconds"])
        row["mib_s"] = round(args.records * len(RECORD) / row["seconds"] / 2**20, 1)
        print(f"{row['mode']:14} consumers={row['consumers']} partitions={row['partitions']} "
              f"{row['records_s']:>8} rec/s {row['mib_s']:7.1f} MiB/s"
              + (f"  (first record {row['first_record_after_s']} s after subscribe)" if "first_record_after_s" in row
                 else ""))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"share-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(rows, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
