"""Produce latency while big topics are created and deleted (is the event loop ever blocked?).

    .venv/bin/python -m bench.topic_churn [--partitions 1000] [--cycles 3] [--repo PATH]

Starts a broker process (127.0.0.1, ephemeral port, temporary data directory) from `--repo` (default: this
checkout; point it at another worktree to compare two versions in the same run), then measures the latency of
produce requests (confluent-kafka, acks=all, one 100-byte record in flight at a time, up to 200 per second) on a
1-partition topic:
1. for 3 seconds with nothing else happening (the baseline);
2. while an AdminClient creates a `--partitions`-partition topic and deletes it again, `--cycles` times.
Prints p50/p99/max per phase and writes JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.servers import free_port, stop, wait_for_port

REPO = Path(__file__).resolve().parents[1]


class LatencyProbe:
    """A producer thread sending one record at a time (acks=all) and recording each round trip, in ms."""

    def __init__(self, bootstrap: str, topic: str, rate: int = 200) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                   "enable.idempotence": True})
        self._topic = topic
        self._rate = rate
        self._stop = threading.Event()
        self.samples: list[tuple[float, float]] = []  # (monotonic send time, latency ms)
        self.failures: list[str] = []
        self._thread = threading.Thread(target=self._run, name="latency-probe", daemon=True)

    def __enter__(self) -> LatencyProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        started = time.monotonic()
        i = 0
        outcome: list = []
        while not self._stop.is_set():
            sent = time.monotonic()
            outcome.clear()
            self._producer.produce(self._topic, value=b"x" * 100,
                                   on_delivery=lambda err, _m: outcome.append((time.monotonic(), err)))
            self._producer.flush(60)
            if outcome:
                done, err = outcome[0]
                if err is not None:
                    self.failures.append(str(err))
                else:
                    self.samples.append((sent, (done - sent) * 1000))
            i += 1
            pause = started + i / self._rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)

    def between(self, start: float, end: float) -> list[float]:
        return [ms for at, ms in list(self.samples) if start <= at < end]


def summary(values: list[float]) -> dict:
    if not values:
        return {"count": 0}
    values = sorted(values)
    return {"count": len(values), "p50_ms": round(statistics.median(values), 2),
            "p99_ms": round(values[max(0, int(len(values) * 0.99) - 1)], 2), "max_ms": round(values[-1], 2)}


def churn(admin: AdminClient, name: str, partitions: int, cycles: int) -> list[dict]:
    """Create and delete a `partitions`-partition topic `cycles` times; the seconds each step took."""
    out = []
    for _ in range(cycles):
        t0 = time.monotonic()
        admin.create_topics([NewTopic(name, num_partitions=partitions)])[name].result(timeout=300)
        t1 = time.monotonic()
        admin.delete_topics([name])[name].result(timeout=300)
        t2 = time.monotonic()
        # the name is free again once Metadata no longer lists it
        while name in admin.list_topics(timeout=30).topics and time.monotonic() - t2 < 60:
            time.sleep(0.05)
        out.append({"create_s": round(t1 - t0, 2), "delete_s": round(t2 - t1, 2)})
    return out


def start_broker(repo: Path, data: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(data.parent / "broker.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker", "--log-format", "json",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}"],
        cwd=repo, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "SHOAL_LOG_LEVEL": "warning"})
    wait_for_port(port, proc, timeout=120)
    return proc, port


def run(repo: Path, partitions: int, cycles: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="shoal-churn-"))
    proc, port = start_broker(repo, work / "data")
    bootstrap = f"127.0.0.1:{port}"
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("probe", num_partitions=1)])["probe"].result(timeout=60)
        with LatencyProbe(bootstrap, "probe") as probe:
            t0 = time.monotonic()
            time.sleep(3)
            t1 = time.monotonic()
            steps = churn(admin, "churn", partitions, cycles)
            t2 = time.monotonic()
        return {"repo": str(repo), "baseline": summary(probe.between(t0, t1)),
                "churn": summary(probe.between(t1, t2)), "steps": steps, "failures": probe.failures[:5]}
    finally:
        stop(proc)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.topic_churn")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--repo", action="append", type=Path,
                        help="a checkout to run the broker from (repeat to compare; default: this one)")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    results = {"machine": platform.platform(), "python": platform.python_version(), "load": os.getloadavg(),
               "partitions": args.partitions, "cycles": args.cycles,
               "runs": [run(repo.resolve(), args.partitions, args.cycles) for repo in args.repo or [REPO]]}
    print(json.dumps(results, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"topic_churn-{int(time.time())}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
