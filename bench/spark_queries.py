"""Records/s of 1, 2 and 4 streaming queries of the Spark source reading one share group, on a Spark standalone
cluster on loopback: what one query can read, and how adding queries to the group scales it out.

    python -m bench.spark_queries [--records 1000000] [--size 100] [--partitions 8] [--queries 1 2 4]
                                  [--rounds 1] [--workers 2] [--worker-cores 1]

Each query's driver-side runner is one share-group member that acquires every record of the query, ships it to
the executors in the task descriptions and acknowledges it, one micro-batch after the other: the ceiling of one
query. Several queries with the same group.id are several members; the group splits the partitions between them
and their micro-batches run side by side on the executors.

Set-up: one Shoal broker (group.share.partition.max.record.locks 10 000, as bench/spark_source.py), a Spark
standalone cluster (a master and `--workers` workers of `--worker-cores` cores and 1 GiB each, started from
PySpark's launch classes by bench/spark_cluster.py), one application (this process is its driver,
spark.cores.max = all the workers' cores, an executor of 1 core per worker core). For each N in `--queries`: a new
topic of `--partitions` partitions, a new group reading from the earliest offset, N queries of `format("shoal")`
with that group.id into the `noop` sink (minPartitions = maxPartitions = executor cores), started one after the
other (PySpark gives a source's runner 10 s to connect back to the JVM, which several starting at once on a busy
machine may miss); once every query's member has partitions assigned, `--records` records of `--size` B are
produced (so no query reads alone while the others join) and the queries run until the group has read them all.
A warm-up run (one query, a tenth of the records) comes first: the JVMs' JIT compiles Spark's code in the first
minutes.

Figures, from the queries' progress events: steady records/s = records of the micro-batches that started once
every query had read its first records and ended before the first query ran out, over that window (the tail
where only some queries still have records is left out); overall = records / (last batch end - first batch
start). CPU: user+sys seconds per million records of Spark's processes, from the first record produced to the
last one read, and per kind (bench/spark_source.py's sampler): `jvm` the driver's JVM, `runner` the queries'
runners, `executor_jvm` the executors, `python_workers` the Python processes of the executors and of the driver's
JVM, `spark_daemons` the master and workers; `driver` (this process, which also produces the records) and
`broker` are not Spark's. The load average (`uptime`) before and after each run is printed
beside them: on a shared machine other processes take CPU from Spark's. Results: a table and JSON under
bench/results/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.clients import produce_with_room
from bench.servers import start_shoal, stop
from bench.spark_cluster import SparkStandalone
from bench.spark_source import MAX_RECORD_LOCKS, CpuSampler, broker_config, new_group
from shoal_client.admin import ShareGroupAdmin


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 10, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"v" * size
    for i in range(records):
        produce_with_room(producer, topic, value, partition=i % partitions)
    if producer.flush(300):
        raise RuntimeError("produce did not finish")


def session(master: str, cores: int):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from shoal_spark import ShareSource

    spark = (SparkSession.builder.master(master).appName("shoal-bench-queries")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.memory", "1g")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.executor.cores", "1").config("spark.executor.memory", "768m")
             .config("spark.cores.max", str(cores))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ShareSource)
    return spark


class Progress:
    """Every micro-batch of the queries: (query id, start, end, rows), from a StreamingQueryListener."""

    def __init__(self, spark) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        self.batches: list[tuple[str, float, float, int]] = []
        self.lock = threading.Lock()
        outer = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event) -> None:
                pass

            def onQueryProgress(self, event) -> None:
                p = event.progress
                start = dt.datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
                with outer.lock:
                    outer.batches.append((str(p.id), start, start + p.batchDuration / 1000, p.numInputRows))

            def onQueryIdle(self, event) -> None:
                pass

            def onQueryTerminated(self, event) -> None:
                pass

        self.listener = Listener()
        spark.streams.addListener(self.listener)

    def rows(self) -> int:
        with self.lock:
            return sum(b[3] for b in self.batches)

    def take(self) -> list[tuple[str, float, float, int]]:
        with self.lock:
            out, self.batches = self.batches, []
        return out


def figures(batches: list[tuple[str, float, float, int]], queries: int) -> dict:
    with_rows = [b for b in batches if b[3] > 0]
    by_query: dict[str, list] = {}
    for b in with_rows:
        by_query.setdefault(b[0], []).append(b)
    total = sum(b[3] for b in with_rows)
    first, last = min(b[1] for b in with_rows), max(b[2] for b in with_rows)
    out = {"records": total, "overall_rps": round(total / (last - first)),
           "per_query": sorted((sum(b[3] for b in bs) for bs in by_query.values()), reverse=True),
           "batches": len(with_rows)}
    if len(by_query) == queries:
        begin = max(min(b[1] for b in bs) for bs in by_query.values())  # every query has read
        end = min(max(b[2] for b in bs) for bs in by_query.values())  # before the first one ran out
        steady = sum(b[3] for b in with_rows if b[1] >= begin and b[2] <= end)
        if end - begin > 1 and steady:
            out.update(steady_rps=round(steady / (end - begin)), steady_window_s=round(end - begin, 1))
    return out


def run(spark, progress: Progress, bootstrap: str, broker_pid: int, args, queries: int, records: int) -> dict:
    topic, group = f"q{queries}-{uuid.uuid4().hex[:6]}", new_group(bootstrap, f"bench-q{queries}")
    client = AdminClient({"bootstrap.servers": bootstrap})  # kept until the result is in
    client.create_topics([NewTopic(topic, num_partitions=args.partitions)])[topic].result(timeout=30)
    progress.take()
    tasks = str(args.workers * args.worker_cores)
    started: list[Any] = []
    deadline = time.monotonic() + args.timeout
    try:
        with ShareGroupAdmin(bootstrap) as admin:
            def joined(n: int) -> bool:
                members = admin.describe_share_group(group).members
                return len(members) >= n and (n < queries or all(m.assignment.get(topic) for m in members))

            def wait(n: int, what: str) -> None:
                while not joined(n):
                    if time.monotonic() > deadline or any(q.exception() for q in started):
                        raise RuntimeError(f"{what}: {[q.exception() for q in started]}")
                    time.sleep(0.2)

            for i in range(queries):
                started.append(
                    spark.readStream.format("shoal").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic).option("group.id", group).option("minPartitions", tasks)
                    .option("maxPartitions", tasks).load().writeStream.format("noop").queryName(f"{topic}-{i}")
                    .start())
                # One at a time: PySpark gives a source's runner process 10 s to connect back to the JVM, which
                # several starting at once on a busy driver may miss. A query has started once its member joined.
                wait(i + 1, f"query {i} did not join the group")
            wait(queries, "the group did not assign partitions to every query")  # before any record exists
        before, sampler = load(), CpuSampler(broker_pid)
        fill(bootstrap, topic, args.partitions, records, args.size)
        while progress.rows() < records:
            if time.monotonic() > deadline or any(q.exception() for q in started):
                raise RuntimeError(f"{queries} queries read {progress.rows()} of {records} records: "
                                   f"{[q.exception() for q in started]}")
            time.sleep(0.2)
    finally:
        for q in started:
            q.stop()
    cpu, _ = sampler.stop()
    result = figures(progress.take(), queries)
    spark_cpu = sum(v for k, v in cpu.items() if k not in ("driver", "broker", "other"))
    result.update(queries=queries, load_before=before, load_after=load(),
                  spark_cpu_s_per_million=round(spark_cpu / records * 1e6, 2),
                  cpu_s_per_million_by_kind={k: round(v / records * 1e6, 2) for k, v in sorted(cpu.items())})
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--queries", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=1, help="times each count runs (the counts alternate)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-cores", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="shoal-bench-queries-") as tmp:
        work = Path(tmp)
        proc, port = start_shoal(work, broker_config(MAX_RECORD_LOCKS))
        cluster = None
        try:
            cluster = SparkStandalone(work / "spark", args.workers, cores=args.worker_cores).start()
            spark = session(cluster.master_url, args.workers * args.worker_cores)
            progress = Progress(spark)
            bootstrap = f"127.0.0.1:{port}"
            warm = run(spark, progress, bootstrap, proc.pid, args, 1, args.records // 10)
            print(f"warm-up: {warm}", flush=True)
            for round_ in range(args.rounds):
                for n in args.queries:
                    r = run(spark, progress, bootstrap, proc.pid, args, n, args.records)
                    r["round"] = round_
                    results.append(r)
                    print(f"{n} queries: steady {r.get('steady_rps', '-')} records/s over "
                          f"{r.get('steady_window_s', '-')} s, overall {r['overall_rps']} records/s, per query "
                          f"{r['per_query']}, Spark's processes {r['spark_cpu_s_per_million']} CPU s per million records "
                          f"{r['cpu_s_per_million_by_kind']}; load {r['load_before']} -> {r['load_after']}",
                          flush=True)
            spark.stop()
        finally:
            if cluster is not None:
                cluster.stop()
            stop(proc)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"spark-queries-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"args": vars(args), "cpus": os.cpu_count(), "python": platform.python_version(),
                                "results": results}, indent=2))
    print(f"{'queries':>7} {'steady rec/s':>13} {'overall rec/s':>14} {'CPU s/M':>8}  load before -> after")
    for r in results:
        print(f"{r['queries']:>7} {r.get('steady_rps', '-'):>13} {r['overall_rps']:>14} "
              f"{r['spark_cpu_s_per_million']:>8}  {r['load_before']} -> {r['load_after']}")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
