"""Log cleaner throughput, and what a running cleaning does to produce latency.

    .venv/bin/python -m bench.compaction [--mib 100] [--keys 50000] [--value-bytes 200]

1. Starts a broker process (127.0.0.1, ephemeral port, temporary data directory, `log.cleaner.backoff.ms=200`)
   and fills a compacted topic with `--mib` MiB of updates spread over `--keys` keys (confluent-kafka, lz4 off),
   with `min.cleanable.dirty.ratio=1.0` so nothing is cleaned yet.
2. Measures produce latency (acks=all, one record in flight, 200 per second, another topic) for 5 seconds with
   the cleaner idle, before the fill and again after the cleaning: the baselines.
3. Sets `min.cleanable.dirty.ratio=0.01` (IncrementalAlterConfigs, live) and measures produce latency the same
   way while the cleaner works, until the broker logs the round ("log cleaned", with its bytes and seconds).
4. Also cleans a copy of the same log in this process without a broker (`broker.log.clean`), the cleaner's raw
   throughput.

Prints the figures and writes JSON under bench/results/.
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
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from bench.clients import produce_with_room
from bench.servers import free_port, stop, wait_for_port


def start_broker(data: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(data.parent / "broker.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker", "--log-format", "json",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}",
         "--override", "log.cleaner.backoff.ms=200"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "SHOAL_LOG_LEVEL": "info"})
    wait_for_port(port, proc)
    return proc, port


def fill(bootstrap: str, topic: str, mib: int, keys: int, value_bytes: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 256 * 1024})
    total = count = 0
    payload = os.urandom(value_bytes)
    while total < mib << 20:
        key = b"key-%08d" % (count % keys)
        produce_with_room(producer, topic, payload[count % 7:] + payload[:count % 7], backoff_s=0.05, key=key,
                          partition=0)
        count += 1
        total += value_bytes + len(key)
    assert producer.flush(120) == 0
    return count


def latencies(bootstrap: str, topic: str, until, min_s: float = 3.0, rate: int = 200) -> list[float]:
    """Produce one record at a time (acks=all) at `rate`/s until `until()` is true (and at least `min_s`)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    out: list[float] = []
    started = time.monotonic()
    i = 0
    done: list[float] = []
    while time.monotonic() - started < min_s or not until():
        sent = time.perf_counter()
        done.clear()
        producer.produce(topic, value=b"x" * 100, on_delivery=lambda _err, _m: done.append(time.perf_counter()))
        producer.flush(30)
        if done:
            out.append((done[0] - sent) * 1000)
        i += 1
        pause = started + i / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        if time.monotonic() - started > 600:
            break
    return out


def summary(values: list[float]) -> dict:
    values = sorted(values)
    return {"count": len(values), "p50_ms": round(statistics.median(values), 2),
            "p99_ms": round(values[int(len(values) * 0.99) - 1], 2), "max_ms": round(values[-1], 2)}


def cleaned_line(log_path: Path, topic: str) -> dict | None:
    for line in log_path.read_text(errors="replace").splitlines():
        if '"log cleaned"' in line and f'"topic": "{topic}"' in line:
            return json.loads(line)
    return None


def clean_in_process(directory: Path) -> dict:
    """Clean a copy of the log with broker.log.clean alone (map + every group), timed."""
    from broker.log import LogConfig, PartitionLog
    from broker.log.clean import CleaningSession
    from broker.log.cleaner import LogToClean, make_job

    plog = PartitionLog(directory, LogConfig.from_topic_config({"cleanup.policy": "compact"}))
    plog.roll()
    todo = LogToClean(("bench", 0), plog, 0, plog.active.base_offset, 0, plog.size_bytes, False)
    job, _ = make_job(todo, int(time.time() * 1000), max_map_entries=1_000_000, io_buffer_bytes=512 * 1024,
                      max_io_bytes_per_second=float("inf"), producer_last_offsets={}, producer_expiration_ms=1)
    started = time.perf_counter()
    session = CleaningSession(job)
    plan = session.build_map()
    written = sum(session.clean_group(i).size for i in range(len(plan.groups)))
    seconds = time.perf_counter() - started
    plog.close()
    return {"bytes_read": plog.size_bytes, "bytes_written": written, "seconds": round(seconds, 2),
            "mib_per_s": round(plog.size_bytes / seconds / (1 << 20), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compaction")
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--value-bytes", type=int, default=200)
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    result: dict = {"machine": platform.platform(), "python": platform.python_version(), "mib": args.mib,
                    "keys": args.keys, "value_bytes": args.value_bytes}
    with tempfile.TemporaryDirectory(prefix="shoal-compaction-") as tmp:
        data = Path(tmp) / "data"
        proc, port = start_broker(data)
        bootstrap = f"127.0.0.1:{port}"
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topics = [NewTopic("compacted", 1, config={"cleanup.policy": "compact", "segment.bytes": str(16 << 20),
                                                      "min.cleanable.dirty.ratio": "1.0"}),
                      NewTopic("probe", 1)]
            for future in admin.create_topics(topics).values():
                future.result(30)
            result["latency_idle_before"] = summary(latencies(bootstrap, "probe", lambda: True, min_s=5))
            t0 = time.perf_counter()
            result["records"] = fill(bootstrap, "compacted", args.mib, args.keys, args.value_bytes)
            result["fill_s"] = round(time.perf_counter() - t0, 1)
            copy = Path(tmp) / "copy"
            shutil.copytree(data / "compacted-0", copy)  # nothing writes to it now; acks=all made it durable
            # the active segment rolls at the next pass (segment.ms) so the whole log is cleanable
            resource = ConfigResource(ResourceType.TOPIC, "compacted", incremental_configs=[
                ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("segment.ms", "1", incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([resource])[resource].result(30)
            log_path = data.parent / "broker.log"
            during = latencies(bootstrap, "probe", lambda: cleaned_line(log_path, "compacted") is not None,
                               min_s=0.5)
            result["latency_cleaning"] = summary(during)
            result["latency_idle_after"] = summary(latencies(bootstrap, "probe", lambda: True, min_s=5))
            line = cleaned_line(log_path, "compacted")
            assert line is not None  # `during` waited for it
            result["broker_round"] = {k: line[k] for k in ("bytes_read", "bytes_written", "records_read",
                                                          "records_retained", "seconds", "mb_per_s")}
        finally:
            stop(proc)
        shutil.rmtree(data)
        result["in_process"] = clean_in_process(copy)
    print(json.dumps(result, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"compaction-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
