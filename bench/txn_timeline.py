"""`python -m bench.txn_timeline`: what a transactional confluent-kafka producer waits for, request by request.

Runs --transactions committed transactions of --records records (1 KiB, round-robin over --partitions) against a
fresh Shoal broker (or --bootstrap) with the producer settings of bench.transactions, and prints the time per
transaction next to librdkafka's own round-trip times (its `protocol` debug log) per request type: the
AddPartitionsToTxn answer (it waits for the previous transaction's markers and CompleteCommit, then for its own
record's fsync), the produce requests (data fsync), EndTxn (PrepareCommit's fsync). What the round trips do not
cover is the client's own work between them.
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import time
import uuid

from confluent_kafka import Producer

from bench.clients import create_topic, send
from bench.servers import running_servers
from bench.transactions import PRODUCER

# the requests of a transaction (librdkafka's log lines reach Python late: the connection set-up's come in too)
RTT = re.compile(r"Received (AddPartitionsToTxn|Produce|EndTxn)Response .*rtt ([\d.]+)ms")


class RttLog(logging.Handler):
    """Collects librdkafka's round-trip times by request type."""

    def __init__(self) -> None:
        super().__init__()
        self.rtts: dict[str, list[float]] = {}
        self.on = False

    def emit(self, record: logging.LogRecord) -> None:
        match = RTT.search(record.getMessage())
        if self.on and match:
            self.rtts.setdefault(match.group(1), []).append(float(match.group(2)))


def measure(bootstrap: str, records: int, transactions: int, partitions: int, size: int) -> dict:
    topic = f"txn-timeline-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions)
    handler = RttLog()
    logger = logging.getLogger(f"rdkafka-{topic}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER, "transactional.id": topic,
                         "debug": "protocol", "logger": logger})
    producer.init_transactions(30)
    payload = b"x" * size
    handler.on = True
    per_txn = []
    for txn in range(transactions):
        start = time.perf_counter()
        producer.begin_transaction()
        send(producer, topic, payload, records, partitions, None, txn * records)
        producer.commit_transaction(60)
        per_txn.append((time.perf_counter() - start) * 1000)
    producer.flush(30)
    handler.on = False
    return {"ms_per_txn": statistics.median(per_txn),
            "rtt_ms": {k: (len(v), statistics.median(v)) for k, v in handler.rtts.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.txn_timeline")
    parser.add_argument("--records", type=int, nargs="+", default=[1000, 1], help="records per transaction")
    parser.add_argument("--transactions", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=1024, help="record value bytes")
    parser.add_argument("--bootstrap", help="an already running broker (default: start one)")
    args = parser.parse_args(argv)

    def run(bootstrap: str) -> None:
        for records in args.records:
            result = measure(bootstrap, records, args.transactions, args.partitions, args.size)
            rtts = ", ".join(f"{name} {ms:.2f} ms (x{n})" for name, (n, ms) in sorted(result["rtt_ms"].items()))
            print(f"{records:>5} records/txn: {result['ms_per_txn']:.2f} ms per transaction (median); "
                  f"median round trips: {rtts}", flush=True)

    if args.bootstrap:
        run(args.bootstrap)
    else:
        with running_servers(include_peers=False) as servers:
            run(servers["shoal"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
