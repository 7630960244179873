"""`python -m bench.transactions`: what transactions cost next to idempotent produce, and what read_committed
costs next to read_uncommitted, measured against one Shoal broker in the same run.

Produce: confluent-kafka with enable.idempotence=true and acks=all, the same records (--size bytes, round-robin
over --partitions) written either without transactions ("idempotent") or in transactions of 1 000, 100 and 1
records, each committed. A variant's time runs from the first produce() to the last commit (or flush);
init_transactions() (for the idempotent producer: one
warm-up record, which waits for its producer id) and topic creation are outside it. Transactions of few records are capped at
--max-transactions per measurement, so txn-1 writes fewer records; the rates stay comparable. Every round runs
every variant once, in the same order, each into a fresh topic, so machine noise hits all alike; the table shows
the median per variant and its ratio to idempotent.

Fetch: one topic filled by transactions of 1 000 records, 1 in 10 aborted, is read from the start by a confluent
Consumer per isolation level, alternating. Both read the same log to its end (read_uncommitted also delivers the
aborted records, read_committed skips them), so the rate compared is log records per second of that read (the
time from assign() to the last record); delivered records per second are shown too.

Targets (issue 17): txn-1000 >= 0.8x idempotent produce; read_committed >= 0.95x read_uncommitted fetch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, Producer

from bench.clients import create_topic, read, send, write_results
from bench.servers import running_servers

PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
}
PRODUCE_TARGET = ("txn-1000", 0.8)
FETCH_TARGET = ("read_committed", 0.95)
FILL_PER_TXN = 1000  # records per transaction of the fetched topic


@dataclass
class Measurement:
    bench: str
    variant: str
    round: int
    records: int
    record_bytes: int
    seconds: float
    delivered: int | None = None


def produce(bootstrap: str, topic: str, payload: bytes, records: int, partitions: int,
            per_txn: int | None, abort_every: int = 0, before_start: Callable[[], None] | None = None) -> float:
    """Write `records` records idempotently (per_txn None) or in committed transactions of `per_txn` records,
    aborting every `abort_every`-th one (0: none); returns the seconds from the first record to the end.
    `before_start` is called once the producer has its id, just before the timed part (concurrent producers
    start together through it)."""
    config = {"bootstrap.servers": bootstrap, "log_level": 3, **PRODUCER}
    if per_txn is not None:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:12]}"
    producer = Producer(config)
    errors: list = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(err)

    if per_txn is None:
        # The first record waits for the producer id; init_transactions() does that for the others, untimed.
        producer.produce(topic, payload, partition=0, on_delivery=on_delivery)
        producer.flush(30)
        if before_start is not None:
            before_start()
        start = time.perf_counter()
        send(producer, topic, payload, records, partitions, on_delivery)
        remaining = producer.flush(120)
    else:
        producer.init_transactions(30)
        if before_start is not None:
            before_start()
        start = time.perf_counter()
        for txn, first in enumerate(range(0, records, per_txn)):
            producer.begin_transaction()
            send(producer, topic, payload, min(per_txn, records - first), partitions, on_delivery, first)
            if abort_every and txn % abort_every == abort_every // 2:
                # Deliver first: the aborted records are meant to be in the log (abort would purge the queue).
                producer.flush(60)
                producer.abort_transaction(60)
            else:
                producer.commit_transaction(60)
        remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"produce failed: {remaining} undelivered, errors {errors[:3]}")
    return elapsed


def committed_count(records: int, per_txn: int, abort_every: int) -> int:
    """How many of `records` written by `produce(..., per_txn, abort_every)` are in committed transactions."""
    return sum(min(per_txn, records - first) for txn, first in enumerate(range(0, records, per_txn))
               if not (abort_every and txn % abort_every == abort_every // 2))


def fetch(bootstrap: str, topic: str, partitions: int, records: int, isolation: str) -> float:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "log_level": 3,
        "group.id": f"bench-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760,
    })
    try:
        start, _first = read(consumer, topic, partitions, records)
        return time.perf_counter() - start
    finally:
        consumer.close()


def summarise(rows: list[Measurement], bench: str, baseline: str, rate_records: dict[str, int] | None = None
              ) -> list[dict]:
    """Median seconds per record of each variant (in order of first appearance) and its rate relative to the
    baseline variant. `rate_records` overrides the record count a rate is computed on (fetch: the log's)."""
    variants = list(dict.fromkeys(r.variant for r in rows if r.bench == bench))
    summary: list[dict[str, Any]] = []
    for variant in variants:
        mine = [r for r in rows if r.bench == bench and r.variant == variant]
        records = (rate_records or {}).get(variant, mine[0].records)
        rates = [records / r.seconds for r in mine]
        median = statistics.median(rates)
        delivered = [r.delivered for r in mine]
        summary.append({"bench": bench, "variant": variant, "records": mine[0].records, "rounds": len(mine),
                        "records_s": round(median), "mib_s": round(median * mine[0].record_bytes / 2**20, 1),
                        "all_records_s": [round(x) for x in rates]})
        if all(d is not None for d in delivered):
            summary[-1]["delivered_records_s"] = round(statistics.median(
                [d / r.seconds for d, r in zip(delivered, mine, strict=True) if d is not None]))
    base = next(s["records_s"] for s in summary if s["variant"] == baseline)
    for s in summary:
        s["ratio"] = round(s["records_s"] / base, 3)
    return summary


def target_note(row: dict, target: tuple[str, float]) -> str:
    name, ratio = target
    if row["variant"] != name:
        return ""
    return f"target >= {ratio:.2f}x: {'met' if row['ratio'] >= ratio else 'MISSED'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.transactions")
    parser.add_argument("--records", type=int, default=50_000, help="records per produce measurement")
    parser.add_argument("--fetch-records", type=int, default=200_000, help="records in the fetched topic")
    parser.add_argument("--size", type=int, default=1024, help="record value bytes")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the produce variants")
    parser.add_argument("--fetch-rounds", type=int, default=5, help="rounds of the two fetches (each is short)")
    parser.add_argument("--max-transactions", type=int, default=1000,
                        help="at most this many transactions per produce measurement")
    parser.add_argument("--abort-every", type=int, default=10, help="1 in N transactions of the fetched topic abort")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    payload = b"x" * args.size
    variants: list[tuple[str, int | None]] = [("idempotent", None), ("txn-1000", 1000), ("txn-100", 100),
                                              ("txn-1", 1)]
    rows: list[Measurement] = []
    load_before = os.getloadavg()
    with running_servers(include_peers=False) as servers:
        bootstrap = servers["shoal"]
        for rnd in range(args.rounds):
            for name, per_txn in variants:
                records = args.records if per_txn is None else min(args.records, per_txn * args.max_transactions)
                topic = f"txn-bench-{name}-{uuid.uuid4().hex[:6]}"
                create_topic(bootstrap, topic, args.partitions)
                seconds = produce(bootstrap, topic, payload, records, args.partitions, per_txn)
                rows.append(Measurement("produce", name, rnd, records, args.size, seconds))
                print(f"round {rnd} produce {name:11} {records:>7} rec {records / seconds:9.0f} rec/s", flush=True)

        topic = f"txn-bench-fetch-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, args.partitions)
        produce(bootstrap, topic, payload, args.fetch_records, args.partitions, FILL_PER_TXN, args.abort_every)
        committed = committed_count(args.fetch_records, FILL_PER_TXN, args.abort_every)
        expected = {"read_uncommitted": args.fetch_records, "read_committed": committed}
        for rnd in range(args.fetch_rounds):
            for isolation, delivered in expected.items():
                seconds = fetch(bootstrap, topic, args.partitions, delivered, isolation)
                rows.append(Measurement("fetch", isolation, rnd, args.fetch_records, args.size, seconds, delivered))
                print(f"round {rnd} fetch   {isolation:16} {delivered:>7} rec delivered in {seconds:6.2f} s",
                      flush=True)
    load_after = os.getloadavg()

    produce_summary = summarise(rows, "produce", "idempotent")
    fetch_summary = summarise(rows, "fetch", "read_uncommitted")
    print(f"\n{args.size} B records, {args.partitions} partitions, median of {args.rounds} produce and "
          f"{args.fetch_rounds} fetch rounds; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(f"{'produce':18} {'records':>8} {'rec/s':>9} {'MiB/s':>7} {'x idem':>7}")
    for s in produce_summary:
        print(f"{s['variant']:18} {s['records']:>8} {s['records_s']:>9} {s['mib_s']:>7} {s['ratio']:>7.3f}  "
              f"{target_note(s, PRODUCE_TARGET)}")
    print(f"{'fetch (log rec/s)':18} {'records':>8} {'rec/s':>9} {'MiB/s':>7} {'x uncom':>7}  delivered rec/s")
    for s in fetch_summary:
        print(f"{s['variant']:18} {s['records']:>8} {s['records_s']:>9} {s['mib_s']:>7} {s['ratio']:>7.3f}  "
              f"{s['delivered_records_s']:>9}  {target_note(s, FETCH_TARGET)}")
    path = write_results(args.out, "transactions", {
        "settings": vars(args), "load_average_before": load_before, "load_average_after": load_after,
        "summary": produce_summary + fetch_summary, "measurements": [asdict(r) for r in rows]})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
