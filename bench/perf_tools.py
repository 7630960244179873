"""Kafka's own performance tools as bench clients: kafka-producer-perf-test, kafka-consumer-perf-test and
kafka-share-consumer-perf-test, the Java classes of Kafka's tools jar (bench/kafka_dist.py runs them), against any
Kafka-wire server. Each returns the seconds its figure implies for the records it moved, from the tool's own
report:

- produce: records/sec of ProducerPerformance's summary line (acks=all; the Java producer's other defaults).
- consume: ConsumerPerformance's fetch.nMsg.sec (a group member subscribing; the join is outside the figure).
- share-consume: ShareConsumerPerformance (`threads` share consumers of one share group, which starts at the
  earliest offset) with its per-interval stats: the records after the first consumer's first report over the time
  from that report to the end of its summary. Its own nMsg.sec runs from the consumers' start, so it would
  include joining the group (a share consumer learns of its assignment at a heartbeat, seconds later); this
  window leaves the join out, as the confluent drains of bench/latency.py do.
"""

from __future__ import annotations

import re
from datetime import datetime

from bench import kafka_dist

TIMEOUT = 600.0


def available() -> bool:
    try:
        kafka_dist.lib_dir()
        kafka_dist.java()
    except kafka_dist.KafkaNotInstalled:
        return False
    return True


def _run(tool: str, args: list[str]) -> str:
    done = kafka_dist.run_tool(tool, args, timeout=TIMEOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tool} exited with {done.returncode}: {(done.stderr or done.stdout)[-400:]}")
    return done.stdout


def _columns(output: str) -> dict[str, str]:
    """The header line and the (last) data line of a consumer perf tool's CSV-like report."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    at = max(i for i, line in enumerate(lines) if line.startswith("start.time"))
    header = [h.strip() for h in lines[at].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    return dict(zip(header, values, strict=True))


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    out = _run("kafka-producer-perf-test", [
        "--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
        "--bootstrap-server", bootstrap, "--command-property", "acks=all"])
    summary = [line for line in out.splitlines() if f"{records} records sent" in line]
    if not summary:
        raise RuntimeError(f"kafka-producer-perf-test printed no summary: {out[-400:]}")
    match = re.search(r"([\d.]+) records/sec", summary[-1])
    if match is None:
        raise RuntimeError(f"kafka-producer-perf-test summary unreadable: {summary[-1]}")
    return records / float(match.group(1))


def consume(bootstrap: str, topic: str, records: int) -> float:
    cols = _columns(_run("kafka-consumer-perf-test", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records), "--timeout", "30000"]))
    got = int(cols["data.consumed.in.nMsg"])
    if got < records:
        raise RuntimeError(f"kafka-consumer-perf-test consumed {got} of {records}")
    return records / float(cols["fetch.nMsg.sec"])


def _when(text: str) -> float:
    """A perf tool's time field (its default --date-format yyyy-MM-dd HH:mm:ss:SSS) in seconds."""
    return datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S:%f").timestamp()


def share_consume(bootstrap: str, topic: str, records: int, group: str, threads: int = 1) -> float:
    out = _run("kafka-share-consumer-perf-test", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records), "--group", group,
        "--threads", str(threads), "--timeout", "30000", "--show-detailed-stats", "--reporting-interval", "1000"])
    cols = _columns(out)
    got = int(cols["data.consumed.in.nMsg"])
    if got < records:
        raise RuntimeError(f"kafka-share-consumer-perf-test consumed {got} of {records}")
    # per-interval lines: start, end, MB, MB/s, nMsg/s, nMsg, fetch ms, "for share consumer K"
    intervals = [(_when(f[1]), int(f[5])) for line in out.splitlines() if "for share consumer" in line
                 for f in [line.split(",")]]
    end = _when(cols["end.time"])
    if not intervals:
        return records / float(cols["nMsg.sec"])
    first = min(t for t, _ in intervals)
    before = sum(n for t, n in intervals if t <= first)
    if end <= first or records <= before:
        return records / float(cols["nMsg.sec"])
    return records / ((records - before) / (end - first))
