"""Produce acknowledgement latency at a fixed rate: one confluent Producer (acks=all, linger 1 ms, 100 B records
round-robin over 4 partitions), the time from produce() to its delivery callback, with librdkafka's default
`max.in.flight` (1 000 000: a request per 1 ms batch, all pipelined on one connection) and with 5 (the Java
producer's default). Shoal fsyncs before it answers acks=all.

    python -m bench.produce_ack_latency [--rate 1000] [--seconds 20] [--against REV]

Prints p50/p99/max per figure and p50 per stretch of the run (a latency that keeps growing shows there).
`--against REV` also runs the broker as it was at git revision REV (extracted with `git archive`), alternating
with this checkout's on the same machine (it is shared: only same-run comparisons mean anything).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.servers import free_port, stop, wait_for_port

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4


def start_broker(source: Path, data_dir: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(data_dir / "shoal.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([sys.executable, "-m", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                             "--override", f"log.dirs={data_dir / 'data'}", "--log-level", "warning"],
                            cwd=source, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(source)})
    wait_for_port(port, proc)
    return proc, port


def measure(bootstrap: str, topic: str, in_flight: int | None, rate: float, seconds: float) -> dict:
    """Produce rate*seconds records on schedule; latency of each delivery callback (ms)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures fail once it is collected
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1, "log_level": 3}
    if in_flight is not None:
        conf["max.in.flight"] = in_flight
    producer = Producer(conf)
    samples: list[tuple[float, float]] = []  # (sent at, latency ms)
    errors: list[str] = []
    total = int(rate * seconds)
    start = time.monotonic()
    for i in range(total):
        due = start + i / rate
        while (wait := due - time.monotonic()) > 0.0002:
            producer.poll(wait)
        sent = time.monotonic()

        def done(err, _msg, sent=sent) -> None:
            if err is not None:
                errors.append(str(err))
            samples.append((sent - start, (time.monotonic() - sent) * 1000))

        producer.produce(topic, b"x" * 100, partition=i % PARTITIONS, on_delivery=done)
        producer.poll(0)
    producer.flush(120)
    lat = sorted(ms for _t, ms in samples)
    stretches = []
    step = seconds / 5
    for k in range(5):
        part = sorted(ms for t, ms in samples if k * step <= t < (k + 1) * step)
        stretches.append(round(part[len(part) // 2], 1) if part else None)
    return {"in_flight": in_flight or "default", "delivered": len(samples), "errors": len(errors),
            "p50_ms": round(lat[len(lat) // 2], 1), "p99_ms": round(lat[int(len(lat) * 0.99)], 1),
            "max_ms": round(lat[-1], 1), "p50_by_stretch_ms": stretches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--against", help="git revision to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shoal-ack-latency-") as tmp:
        sources = {"this checkout": REPO}
        if args.against:
            old = Path(tmp) / "against"
            old.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", args.against], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            sources[args.against] = old
        print(f"load before: {os.getloadavg()[0]:.1f}", flush=True)
        for name, source in sources.items():
            data = Path(tmp) / f"data-{len(name)}-{abs(hash(name))}"
            data.mkdir()
            proc, port = start_broker(source, data)
            try:
                for n, in_flight in enumerate((5, None)):
                    row = measure(f"127.0.0.1:{port}", f"ack-latency-{n}", in_flight, args.rate, args.seconds)
                    print(f"{name:>14} {row}", flush=True)
            finally:
                stop(proc)
        print(f"load after: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
