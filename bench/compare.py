"""`python -m bench.compare --base REV`: this checkout's broker against the broker of another revision, in one
run, so that a change slowing the hot path shows before it lands.

The base revision is checked out with `git worktree add --detach` into a temporary directory (removed at the
end). Each tree's broker runs from its own checkout (`python -m broker` with that tree first on PYTHONPATH) on a
free loopback port; the clients are this checkout's, the same for both. Rounds alternate the trees (ABBA: the
first tree of a round alternates) through short steps, each into a fresh topic of 4 partitions:

- produce: confluent Producer, 1 KiB records, acks=all (bench.throughput.produce);
- fetch: the produced topic read back by an assigned Consumer (bench.throughput.fetch);
- sharefetch: the same topic drained by a shoal_client share-group member (bench.latency.drain);
- transaction: committed transactions of 1 000 records (`--txn-records` in all: 20 000, 20 transactions; with
  --quick one transaction of 100) (bench.transactions.produce).

Each row prints the median records/s of both trees and the ratio head/base per round: its median and its spread
(min-max over the rounds), and the same for the broker's CPU seconds per step (bench/process_tree.py), which
another process's load disturbs less than the wall clock. A ratio below 1 is head slower (rate) or dearer (CPU
ratio above 1).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from bench import process_tree
from bench.servers import free_port, stop, wait_for_port

REPO = Path(__file__).resolve().parents[1]
STEPS = ("produce", "fetch", "sharefetch", "transaction")
RECORD_BYTES = 1024
PARTITIONS = 4


@contextlib.contextmanager
def base_worktree(rev: str) -> Iterator[Path]:
    """A detached worktree of `rev` in a temporary directory, removed (with its git bookkeeping) at the end."""
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="shoal-compare-"))
    tree = tmp / "base"
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(tree), commit], cwd=REPO, check=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


@contextlib.contextmanager
def broker_from(tree: Path, data_dir: Path) -> Iterator[tuple[str, int]]:
    """`python -m broker` of `tree` (its packages first on PYTHONPATH, run from it) on a free loopback port;
    yields (bootstrap, pid); stopped by PID at the end."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with open(data_dir / "broker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={data_dir / 'data'}", "--log-level", "warning"],
            cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        stop(proc)


def imported_from(tree: Path) -> str:
    """Where `broker` is imported from when run as broker_from runs it (a check that each tree runs its own)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-c", "import broker; print(broker.__file__)"], cwd=tree, env=env,
                          capture_output=True, text=True, check=True).stdout.strip()


def run_steps(bootstrap: str, pid: int, records: int, txn_records: int,
              record_bytes: int = RECORD_BYTES) -> dict[str, dict[str, float]]:
    """One round of every step against one broker: records/s and the broker's CPU seconds per step."""
    from bench.clients import create_topic
    from bench.latency import drain
    from bench.throughput import fetch, produce
    from bench.transactions import produce as txn_produce

    topic = f"cmp-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    txn_topic = f"cmp-txn-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, txn_topic, PARTITIONS)
    steps: dict[str, tuple[int, Callable[[], float]]] = {
        "produce": (records, lambda: produce(bootstrap, topic, records, record_bytes, partitions=PARTITIONS)),
        "fetch": (records, lambda: fetch(bootstrap, topic, records, PARTITIONS)),
        "sharefetch": (records, lambda: drain(bootstrap, "shoal-share", partitions=PARTITIONS, records=records,
                                              size=record_bytes, members=1, topic=topic)["seconds"]),
        "transaction": (txn_records, lambda: txn_produce(bootstrap, txn_topic, b"x" * record_bytes, txn_records,
                                                         PARTITIONS, min(txn_records, 1000))),
    }
    out = {}
    for name, (n, step) in steps.items():
        cpu0 = process_tree.cpu_seconds(pid)
        seconds = step()
        out[name] = {"records_s": n / seconds, "cpu_s": process_tree.cpu_seconds(pid) - cpu0}
    return out


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the revision to compare against (e.g. HEAD~1, main)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (each runs every step on both trees)")
    parser.add_argument("--quick", action="store_true", help="small steps (a smoke run)")
    parser.add_argument("--records", type=int, help="records per produce/fetch/sharefetch step")
    parser.add_argument("--txn-records", type=int, help="records of the transaction step (transactions of at "
                        "most 1 000)")
    parser.add_argument("--out", help="also write the measurements as JSON into this directory")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    records = args.records or (5_000 if args.quick else 200_000)
    txn_records = args.txn_records or (100 if args.quick else 20_000)
    load_before = os.getloadavg()
    print(f"head {REPO} against base {args.base}: {args.rounds} round(s), {records} x {RECORD_BYTES} B records "
          f"per step, {txn_records} records in transactions of {min(txn_records, 1000)}; load average "
          f"{load_before[0]:.2f}", flush=True)
    results: dict[str, list[dict[str, dict[str, float]]]] = {"head": [], "base": []}
    with base_worktree(args.base) as base, tempfile.TemporaryDirectory(prefix="shoal-compare-data-") as data:
        trees = {"head": REPO, "base": base}
        for name, tree in trees.items():
            print(f"{name}: broker from {imported_from(tree)}", flush=True)
        with broker_from(REPO, Path(data) / "head") as head, broker_from(base, Path(data) / "base") as basebroker:
            brokers = {"head": head, "base": basebroker}
            for rnd in range(args.rounds):
                order = ("head", "base") if rnd % 2 == 0 else ("base", "head")
                for name in order:
                    t0 = time.monotonic()
                    results[name].append(run_steps(*brokers[name], records, txn_records))
                    print(f"round {rnd + 1}/{args.rounds} {name}: " + ", ".join(
                        f"{s} {results[name][-1][s]['records_s']:.0f} rec/s" for s in STEPS)
                        + f" ({time.monotonic() - t0:.1f} s)", flush=True)
    load_after = os.getloadavg()
    rows = []
    print(f"\n{'step':12} {'base rec/s':>11} {'head rec/s':>11} {'ratio':>7} {'spread':>13} "
          f"{'CPU ratio':>9} {'spread':>13}")
    for step in STEPS:
        ratios = [h[step]["records_s"] / b[step]["records_s"] for h, b in zip(results["head"], results["base"],
                                                                             strict=True)]
        cpu = [h[step]["cpu_s"] / b[step]["cpu_s"] for h, b in zip(results["head"], results["base"], strict=True)
               if b[step]["cpu_s"] > 0]
        row = {"step": step, "base_records_s": statistics.median(r[step]["records_s"] for r in results["base"]),
               "head_records_s": statistics.median(r[step]["records_s"] for r in results["head"]),
               "ratio": statistics.median(ratios), "ratios": ratios,
               "cpu_ratio": statistics.median(cpu) if cpu else None, "cpu_ratios": cpu}
        rows.append(row)
        print(f"{step:12} {row['base_records_s']:11.0f} {row['head_records_s']:11.0f} {row['ratio']:7.3f} "
              f"{spread(ratios):>13} " + (f"{row['cpu_ratio']:9.3f} {spread(cpu):>13}" if cpu else f"{'-':>9}"))
    print(f"ratio = head / base per round (median, min-max over {args.rounds}); CPU ratio = the broker's CPU "
          f"seconds, head / base; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    if args.out:
        from bench.clients import write_results

        path = write_results(args.out, "compare", {
            "base": args.base, "rounds": args.rounds, "records": records, "txn_records": txn_records,
            "load_before": load_before, "load_after": load_after, "rows": rows, "measurements": results})
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
