"""`python -m bench.compiled`: each candidate module compiled with mypyc alone, against the same tree in pure
Python, so that setup.py compiles only the modules where it pays.

For each module (default: pyproject.toml's `[tool.shoal.mypyc] modules`, or `--modules a.py,b.py`) a copy of
the packages is built with `SHOAL_COMPILE=1 SHOAL_COMPILE_ONLY=<module> setup.py build_ext --inplace`, plus one
copy with all of them compiled ("all"), next to a pure copy. Two measurements, rounds alternating pure and compiled
(ABBA), each in a fresh process whose `broker`/`protocol` come from the copy (checked: the module's `__file__`
is an extension module in the compiled copy, a .py in the pure one):

- micro: the module's hot path in a loop (`WORKLOADS` below: record framing checks of 1 KiB and 100 B records,
  frame splitting, batch building and validation, share-partition acquire/acknowledge), seconds per round;
- macro (`--macro`): bench.compare's steps (produce acks=all, fetch, a shoal_client ShareFetch drain, committed
  transactions) against a broker process run from each copy, with the broker's CPU seconds per step.

It prints per module the ratio pure / compiled of the time (micro) and of the broker CPU (macro) per round: the
median and the spread (min-max); above 1 the compiled module is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("broker", "protocol", "shoal_client")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.so", "*.c")


def listed_modules() -> list[str]:
    with open(REPO / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["tool"]["shoal"]["mypyc"]["modules"])


def dotted(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def make_tree(root: Path, modules: list[str]) -> Path:
    """A copy of the packages (and the build files) with `modules` compiled in place (none: pure Python); an
    existing `root` is taken as built."""
    if root.exists():
        return root
    root.mkdir(parents=True)
    for pkg in PACKAGES:
        shutil.copytree(REPO / pkg, root / pkg, ignore=_IGNORE)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, root / name)
    if modules:
        env = {**os.environ, "SHOAL_COMPILE": "1", "SHOAL_COMPILE_ONLY": ",".join(modules)}
        done = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"mypyc build of {modules} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return root


# ------------------------------------------------------------------------------------------- micro workloads
# Each builds its inputs, then returns a function running the hot path once; run in a process whose `protocol`
# and `broker` are a tree's.


def _record_check(size: int) -> Callable[[], None]:
    from protocol.record_check import check_records
    from protocol.records import Record, build_batch, read_header

    count = (1 << 20) // size
    batch = build_batch([Record(b"key-%06d" % i, b"v" * (size - 20)) for i in range(count)])
    header = read_header(batch)
    assert header.records_count == count

    def run() -> None:
        check_records(batch, 61, len(batch), count)
    return run


def _record_check_varied() -> Callable[[], None]:
    """Records of changing shapes (every key and value length differs): the record-by-record walk."""
    from protocol.record_check import check_records
    from protocol.records import Record, build_batch

    records = [Record(b"k" * (i % 50), b"v" * (100 + i % 300)) for i in range(2000)]
    batch = build_batch(records)

    def run() -> None:
        check_records(batch, 61, len(batch), len(records))
    return run


def _framing() -> Callable[[], None]:
    """A connection's byte stream in 64 KiB reads: 1 MiB produce frames, then small requests, split and popped."""
    from protocol.framing import FrameSplitter, RequestHeader, decode_request_header, encode_request

    big = encode_request(RequestHeader(0, 11, 1, "client"), b"x" * (1 << 20))
    small = encode_request(RequestHeader(1, 17, 2, "client"), b"y" * 80)
    stream = big * 4 + small * 2000
    chunks = [stream[i:i + 65536] for i in range(0, len(stream), 65536)]

    def run() -> None:
        splitter = FrameSplitter()
        for chunk in chunks:
            splitter.feed(chunk)
            while (size := splitter.frame_size(100 << 20)) is not None:
                splitter.pop(size)
        for _ in range(2000):
            decode_request_header(small[4:])
    return run


def _records() -> Callable[[], None]:
    """Batches as the broker builds (share-state and coordinator records) and validates them (produce)."""
    from protocol.records import Record, build_batch, build_keyed_batch, iter_batches, validate_batches

    payload = b"".join(build_batch([Record(b"k%d" % i, b"v" * 100) for i in range(100)], base_offset=b * 100)
                       for b in range(20))

    def run() -> None:
        for _ in range(20):
            build_keyed_batch([(b"key-%d" % i, b"value" * 10) for i in range(10)])
            build_batch([Record(None, b"v" * 100) for _ in range(50)])
        validate_batches(payload, check_records=True)
        for _ in iter_batches(payload):
            pass
    return run


def _inflight() -> Callable[[], None]:
    """A share-partition's acquire and acknowledge cycle: 500-record fetches of 10-record batches, each
    acknowledged in ranges (accept, with a release in every tenth)."""
    from broker.share_partition.inflight import ACK_ACCEPT, ACK_RELEASE, ShareInFlight

    def run() -> None:
        sp = ShareInFlight(0, lock_duration_ms=30_000, delivery_count_limit=5, max_in_flight_records=2000)
        offset = 0
        for n in range(40):
            batches = [(offset + i * 10, offset + i * 10 + 9) for i in range(50)]
            got = sp.acquire("member", batches, 500, n)
            ranges = [(r.first_offset, r.last_offset, [ACK_RELEASE if k % 10 == 0 else ACK_ACCEPT])
                      for k, r in enumerate(got)]
            sp.acknowledge("member", ranges, n)
            offset += 500
            sp.take_dirty()
    return run


WORKLOADS: dict[str, dict[str, Callable[[], Callable[[], None]]]] = {
    "protocol/record_check.py": {"1 KiB records": lambda: _record_check(1024),
                                 "100 B records": lambda: _record_check(100),
                                 "varied records": _record_check_varied},
    "protocol/framing.py": {"frame splitting": _framing},
    "protocol/records.py": {"build+validate": _records},
    "broker/share_partition/inflight.py": {"acquire+ack": _inflight},
}


def worker(module: str, workload: str, seconds: float) -> None:
    """In a tree's process: time `workload` of `module` (best of repeated loops filling about `seconds`)."""
    import importlib

    mod = importlib.import_module(dotted(module))
    run = WORKLOADS[module][workload]()
    run()  # warm up
    t0 = time.process_time()
    n = 0
    while time.process_time() - t0 < seconds / 3:
        run()
        n += 1
    best = float("inf")
    for _ in range(5):
        t1 = time.process_time()
        for _ in range(max(1, n // 5)):
            run()
        best = min(best, (time.process_time() - t1) / max(1, n // 5))
    print(json.dumps({"file": mod.__file__, "seconds": best}))


def run_micro(tree: Path, module: str, workload: str, seconds: float) -> tuple[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "bench.compiled", "--worker", module, workload, str(seconds)],
                          cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{module} {workload} in {tree} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["file"], out["seconds"]


def check_file(file: str, compiled: bool, tree: Path) -> None:
    assert file.startswith(str(tree)), (file, tree)
    assert file.endswith(".so") == compiled, (file, compiled)


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compiled", description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", help="comma-separated source paths (default: pyproject's list)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds (each runs pure and compiled)")
    parser.add_argument("--seconds", type=float, default=1.0, help="CPU seconds per micro measurement")
    parser.add_argument("--macro", action="store_true", help="also bench.compare's steps against broker processes")
    parser.add_argument("--records", type=int, default=100_000, help="records per macro produce/fetch/share step")
    parser.add_argument("--txn-records", type=int, default=10_000, help="records of the macro transaction step")
    parser.add_argument("--record-bytes", type=int, default=1024, help="record size of the macro steps")
    parser.add_argument("--out", help="also write the measurements as JSON into this directory")
    parser.add_argument("--trees", help="build the trees into this directory and reuse the ones already there "
                        "(default: a temporary directory)")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], args.worker[1], float(args.worker[2]))
        return 0
    modules = args.modules.split(",") if args.modules else listed_modules()
    load_before = os.getloadavg()
    print(f"{len(modules)} module(s), {args.rounds} round(s); load average {load_before[0]:.2f}", flush=True)
    results: dict[str, object] = {"modules": modules, "rounds": args.rounds, "load_before": load_before}
    with tempfile.TemporaryDirectory(prefix="shoal-compiled-") as tmp:
        t0 = time.monotonic()
        where = Path(args.trees) if args.trees else Path(tmp)
        pure = make_tree(where / "pure", [])
        trees = {m: make_tree(where / dotted(m), [m]) for m in modules}
        if len(modules) > 1:
            trees["all"] = make_tree(where / "all", modules)
        print(f"built {len(trees)} compiled tree(s) in {time.monotonic() - t0:.0f} s", flush=True)
        micro_rows = []
        print(f"\nmicro: {'module':36} {'workload':16} {'pure ms':>8} {'mypyc ms':>8} {'ratio':>6} {'spread':>10}")
        for module in modules:
            for workload in WORKLOADS.get(module, {}):
                times: dict[str, list[float]] = {"pure": [], "compiled": []}
                for rnd in range(args.rounds):
                    order = ("pure", "compiled") if rnd % 2 == 0 else ("compiled", "pure")
                    for kind in order:
                        tree = pure if kind == "pure" else trees[module]
                        file, seconds = run_micro(tree, module, workload, args.seconds)
                        check_file(file, kind == "compiled", tree)
                        times[kind].append(seconds)
                ratios = [p / c for p, c in zip(times["pure"], times["compiled"], strict=True)]
                pure_s, compiled_s = statistics.median(times["pure"]), statistics.median(times["compiled"])
                micro_rows.append({"module": module, "workload": workload, "pure_s": pure_s,
                                   "compiled_s": compiled_s, "ratio": statistics.median(ratios), "ratios": ratios})
                print(f"micro: {module:36} {workload:16} {pure_s * 1e3:8.2f} {compiled_s * 1e3:8.2f} "
                      f"{statistics.median(ratios):6.2f} {spread(ratios):>10}", flush=True)
        results["micro"] = micro_rows
        if args.macro:
            results["macro"] = macro(pure, trees, args.rounds, args.records, args.txn_records, Path(tmp),
                                     args.record_bytes)
    load_after = os.getloadavg()
    results["load_after"] = load_after
    print(f"ratio = pure / compiled per round (median, min-max); above 1 compiled is faster; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after")
    if args.out:
        from bench.clients import write_results

        path = write_results(args.out, "compiled", results)
        print(f"wrote {path}")
    return 0


def macro(pure: Path, trees: dict[str, Path], rounds: int, records: int, txn_records: int,
          tmp: Path, record_bytes: int) -> list[dict[str, object]]:
    """bench.compare's steps against a broker from the pure tree and one from each compiled tree, rounds
    alternated; the ratio pure / compiled of the broker's CPU seconds per step."""
    from bench.compare import STEPS, broker_from, run_steps

    rows = []
    print(f"\nmacro: {'module':36} " + " ".join(f"{s + ' CPU':>22}" for s in STEPS), flush=True)
    for name, tree in trees.items():
        cpu: dict[str, list[dict[str, dict[str, float]]]] = {"pure": [], "compiled": []}
        with broker_from(pure, tmp / f"data-pure-{dotted(name)}") as pb, \
                broker_from(tree, tmp / f"data-{dotted(name)}") as cb:
            for pid, t in ((pb[1], pure), (cb[1], tree)):
                maps = Path(f"/proc/{pid}/maps").read_text()
                assert (str(t) in maps) == (t is tree), f"broker {pid} does not map {t}'s extension modules"
            brokers = {"pure": pb, "compiled": cb}
            for rnd in range(rounds):
                for kind in (("pure", "compiled") if rnd % 2 == 0 else ("compiled", "pure")):
                    cpu[kind].append(run_steps(*brokers[kind], records, txn_records, record_bytes))
        row: dict[str, object] = {"module": name}
        cells = []
        for step in STEPS:
            ratios = [p[step]["cpu_s"] / c[step]["cpu_s"] for p, c in zip(cpu["pure"], cpu["compiled"], strict=True)
                      if c[step]["cpu_s"] > 0]
            rate = [c[step]["records_s"] / p[step]["records_s"] for p, c in zip(cpu["pure"], cpu["compiled"],
                                                                                   strict=True)]
            row[step] = {"cpu_ratio": statistics.median(ratios), "cpu_ratios": ratios,
                         "rate_ratio": statistics.median(rate), "rate_ratios": rate}
            cells.append(f"{statistics.median(ratios):5.2f} ({spread(ratios)})")
        rows.append(row)
        print(f"macro: {name:36} " + " ".join(f"{c:>22}" for c in cells), flush=True)
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
