"""Transactions for every server of a `python -m bench` run: committed transactions of 1, 100 and 1 000 records
(1 KiB, round-robin over 4 partitions, confluent-kafka, acks=all, idempotent) by 1 and by 8 transactional
producers at once (separate processes, each its own transactional.id, all started together once each has its
producer id), and a topic of committed transactions (1 in 10 aborted) read from the start with read_committed and
with read_uncommitted. Servers alternate within every variant; each row has the server's CPU seconds.

Transactions of 1 000 records are what issue 37's target divides by idempotent produce: the same producers write
the same records without transactions ("idempotent"), and the two alternate with each other and across servers
for `ratio_rounds` rounds, so that the ratio (printed by bench/report.py) compares runs under the same load.

Rates: records of all producers over the time from the common start to the last producer's end; fetch rates are
the log's records over the time to read it to its end (bench/transactions.py)."""

from __future__ import annotations

import multiprocessing as mp
import os
import uuid
from dataclasses import dataclass

from bench import process_tree
from bench.clients import create_topic
from bench.matrix import Progress
from bench.transactions import committed_count, fetch, produce

SPAWN = mp.get_context("spawn")
RECORD_BYTES = 1024
PARTITIONS = 4
FILL_PER_TXN = 1000
ABORT_EVERY = 10


@dataclass(frozen=True)
class TxnPlan:
    transactions: dict[int, int]  # records per transaction -> transactions per producer
    producers: tuple[int, ...]
    fetch_records: int
    fetch_rounds: int
    ratio_rounds: int = 1  # alternated rounds of idempotent vs transactions of RATIO_PER_TXN
    client_nice: int = 0  # added to the producer processes' niceness (0: as the bench's other clients)


RATIO_PER_TXN = 1000

TXN_PLANS = {
    "quick": TxnPlan({1: 20, 100: 5, 1000: 1}, (1, 8), 5_000, 1, 1),
    "full": TxnPlan({1: 300, 100: 60, 1000: 15}, (1, 8), 100_000, 3, 3),
}


def _producer(bootstrap: str, topic: str, records: int, per_txn: int | None, ready: mp.Queue, go, out: mp.Queue,
              nice: int = 0) -> None:
    if nice:
        os.nice(nice)

    def before_start() -> None:
        ready.put(1)
        go.wait(120)

    try:
        seconds = produce(bootstrap, topic, b"x" * RECORD_BYTES, records, PARTITIONS, per_txn,
                          before_start=before_start)
        out.put({"seconds": seconds})
    except Exception as exc:  # reported to the parent, which raises it
        out.put({"error": f"{type(exc).__name__}: {exc}"})


def concurrent_produce(bootstrap: str, per_txn: int, transactions: int, producers: int, *,
                       transactional: bool = True, nice: int = 0) -> float:
    """Seconds from the common start until the last of `producers` producers committed its last transaction
    (each writes `transactions` x `per_txn` records). Not `transactional`: the same records written by
    idempotent producers, no transaction. `nice` > 0 lowers the producers' CPU priority, so that on a machine
    with fewer cores than producers they do not starve the server of the CPU it needs to answer them."""
    topic = f"txm-{per_txn if transactional else 'idem'}-{producers}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    ready, out, go = SPAWN.Queue(), SPAWN.Queue(), SPAWN.Event()
    procs = [SPAWN.Process(target=_producer, args=(bootstrap, topic, per_txn * transactions,
                                                    per_txn if transactional else None, ready, go, out, nice),
                           daemon=True) for _ in range(producers)]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            ready.get(timeout=120)
        go.set()
        results = [out.get(timeout=600) for _ in procs]
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    if errors := [r["error"] for r in results if "error" in r]:
        raise RuntimeError(errors[0])
    return max(r["seconds"] for r in results)


def run_transactions(servers: dict[str, str], plan: TxnPlan) -> list[dict]:
    pids: dict[str, int] = getattr(servers, "pids", {})
    steps: list[tuple[str, int, int | str, str]] = [
        ("produce", per_txn, n, server) for per_txn in plan.transactions if per_txn != RATIO_PER_TXN
        for n in plan.producers for server in servers]
    if RATIO_PER_TXN in plan.transactions:
        # Idempotent and transactional rounds alternate, so that their ratio compares the same load.
        steps += [(what, RATIO_PER_TXN, n, server) for _ in range(plan.ratio_rounds) for n in plan.producers
                  for server in servers for what in ("idempotent", "produce")]
    steps += [("fill", FILL_PER_TXN, 1, server) for server in servers]
    steps += [("fetch", r, iso, server) for r in range(plan.fetch_rounds)
              for iso in ("read_uncommitted", "read_committed") for server in servers]
    progress = Progress([1.0] * len(steps))
    rows: list[dict] = []
    filled: dict[str, str] = {}
    committed = committed_count(plan.fetch_records, FILL_PER_TXN, ABORT_EVERY)
    print(f"\n== transactions (1 KiB records, {PARTITIONS} partitions)", flush=True)
    for what, a, b, server in steps:
        bootstrap = servers[server]
        pid = pids.get(server)
        cpu0 = process_tree.cpu_seconds(pid) if pid else None
        label = {"produce": f"{server:11} transactions of {a:>4} x {b} producer(s)",
                 "idempotent": f"{server:11} idempotent ({a:>4} x txns) x {b} producer(s)",
                 "fill": f"{server:11} fill {plan.fetch_records} records (1 in {ABORT_EVERY} txns aborted)",
                 "fetch": f"{server:11} fetch {b} round {a + 1}"}[what]
        progress.begin(label)
        row: dict = {"server": server}
        try:
            if what == "produce":
                records = a * plan.transactions[a] * int(b)
                seconds = concurrent_produce(bootstrap, a, plan.transactions[a], int(b), nice=plan.client_nice)
                row.update(variant=f"txn-{a}", producers=b, records=records)
            elif what == "idempotent":
                records = a * plan.transactions[a] * int(b)
                seconds = concurrent_produce(bootstrap, a, plan.transactions[a], int(b), transactional=False,
                                             nice=plan.client_nice)
                row.update(variant="idempotent", producers=b, records=records)
            elif what == "fill":
                topic = filled[server] = f"txf-{uuid.uuid4().hex[:6]}"
                create_topic(bootstrap, topic, PARTITIONS)
                produce(bootstrap, topic, b"x" * RECORD_BYTES, plan.fetch_records, PARTITIONS, FILL_PER_TXN,
                        ABORT_EVERY)
                progress.end("filled")
                continue
            else:
                if server not in filled:
                    raise RuntimeError("its fill failed")
                delivered = committed if b == "read_committed" else plan.fetch_records
                seconds = fetch(bootstrap, filled[server], PARTITIONS, delivered, str(b))
                row.update(variant=str(b), round=a, records=plan.fetch_records, delivered=delivered)
            row.update(seconds=round(seconds, 4), records_s=round(row["records"] / seconds))
            progress.end(f"{row['records_s']:9} rec/s")
        except Exception as exc:
            row["variant"] = {"produce": f"txn-{a}", "idempotent": "idempotent"}.get(what, str(b))
            if what in ("produce", "idempotent"):
                row["producers"] = b
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            progress.end(f"FAILED {row['error']}")
        if pid and cpu0 is not None:
            row["server_cpu_s"] = round(process_tree.cpu_seconds(pid) - cpu0, 3)
        row["load"] = round(os.getloadavg()[0], 2)
        rows.append(row)
    return rows
