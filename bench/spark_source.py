"""Rows/s of the Spark share-group source, next to the share clients draining the same topic in the same run.

    python -m bench.spark_source [--records 2000000] [--kib-records 300000] [--partitions 64] [--max-bytes-per-trigger N]
                                 [--max-records-per-trigger N] [--variant acquireAhead=false ...] [--max-record-locks N]

For 100 B and 1 KiB records: one Shoal broker with group.share.partition.max.record.locks=10000 (Kafka's upper
bound; its bound group.share.max.partition.max.record.locks raised to match), so the Spark query may hold 10 000
records per partition; one topic of 64 partitions (640 000 locks: two micro-batches of 320 000 records, the one in
progress and the one the source acquires ahead, so the source's maxRecordsPerTrigger is 320 000); then each reader
drains the whole topic with a share group of its own (share.auto.offset.reset=earliest):

- `shoal_client` (ShareGroupMember): raw batches + ranges, ACCEPT riding on the next ShareFetch; once as is and
  once also decoding every batch into Arrow in the same process (the work Spark executors do);
- `confluent_kafka.ShareConsumer` (librdkafka), implicit acknowledgement, counting messages;
- Spark: `readStream.format("shoal")` (minPartitions=maxPartitions=2: one task per core) into the `noop` sink,
  local[2], spark.driver.memory=2g, trigger availableNow; with `--variant`, each variant (extra source options) runs its queries
  interleaved with the others' in the same session (same-run A/B comparisons). Steady state = rows of the batches after the first two (Python workers and
  the JIT warm up) and before the last (the remainder) over their triggerExecution time; the query start (start()
  until the first batch has finished) is reported apart. The query runs `--spark-runs` times (2) in one session,
  each with a new group, and the last run is reported (the JVM's JIT keeps compiling Spark's code for the first
  minutes, up to a third of the JVM's CPU during a first 2-million-record run). Each run also reports the
  average milliseconds per phase of a steady batch (latestOffset = acquisition in the source's runner, addBatch =
  executors) and user+sys CPU seconds per million rows of Spark's processes (JVM, runner, Python workers) and of
  the broker, over the whole query, and the same split per process kind (sampled from /proc every 0.2 s: the
  JVM, the source's runner, the Python workers, the driver's Python).

Before each Spark query of the source, in the same session, a ceiling query runs (`--skip ceiling` leaves it out):
a Python data source yielding the same rows as Arrow batches built in the executor from memory (no broker, no
data in the task descriptions, 80 000 -> maxRecordsPerTrigger rows a trigger, two tasks), the floor for any
Python source; the table ends with the source's rows/s and all-process CPU per million rows next to it.

Every rate is timed from the first record on (joining the group is not counted). Results: a table and JSON under
bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from bench.clients import produce_with_room
from bench.servers import start_shoal, stop
from shoal_client import ACCEPT, ShareGroupMember, acknowledgements

MAX_RECORD_LOCKS = 10_000  # Kafka's upper bound for group.share.max.partition.max.record.locks
RECORD_OVERHEAD = 12  # bytes a record takes in a record batch besides its value (no key, no headers)


def broker_config(record_locks: int) -> dict[str, str]:
    return {"group.share.partition.max.record.locks": str(record_locks),
            "group.share.max.partition.max.record.locks": str(record_locks)}


def setup(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 10, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"v" * size
    start = time.perf_counter()
    for i in range(records):
        produce_with_room(producer, topic, value, partition=i % partitions)
    if producer.flush(300):
        raise RuntimeError("produce did not finish")
    return time.perf_counter() - start


def new_group(bootstrap: str, name: str) -> str:
    group = f"{name}-{uuid.uuid4().hex[:6]}"
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    return group


def drain_ours(bootstrap: str, topic: str, records: int, decode_arrow: bool) -> float:
    from shoal_spark.decode import decode

    group = new_group(bootstrap, "bench-ours")
    with ShareGroupMember(bootstrap, group, [topic]) as member:
        member.wait_for_assignment(30)
        seen = 0
        acks: dict = {}
        first = None
        deadline = time.perf_counter() + 600
        while seen < records:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"shoal_client stalled at {seen}/{records}")
            result = member.fetch(max_records=200_000, max_bytes=32 << 20, max_wait_ms=500, acknowledgements=acks)
            if result.acquired and first is None:
                first = time.perf_counter()
            if decode_arrow:
                seen += sum(decode(a.topic, a.partition, a.records, a.ranges).num_rows for a in result.acquired)
            else:
                seen += result.count
            acks = acknowledgements(result.acquired, ACCEPT)
        end = time.perf_counter()
        member.acknowledge(acks)
    assert first is not None  # records arrived
    return end - first


def drain_confluent(bootstrap: str, topic: str, records: int) -> float:
    group = new_group(bootstrap, "bench-librdkafka")
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "implicit"})
    consumer.subscribe([topic])
    seen = 0
    first = None
    deadline = time.perf_counter() + 600
    try:
        while seen < records:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"ShareConsumer stalled at {seen}/{records}")
            got = sum(1 for m in consumer.poll(0.5) if m.error() is None)
            if got and first is None:
                first = time.perf_counter()
            seen += got
        assert first is not None  # records arrived
        return time.perf_counter() - first
    finally:
        consumer.close()


def spark_session(conf: dict[str, str]):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from shoal_spark import ShareSource

    builder = (SparkSession.builder.master("local[2]").appName("shoal-bench")
               .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ShareSource)
    spark.dataSource.register(ceiling_source())
    return spark


def ceiling_source():
    """The ceiling for any Python data source: a streaming source yielding the same rows as the Shoal source
    (value of the same size, key null, topic, partition, offset, timestamp, no headers, deliveryCount 1) as
    Arrow batches built in the executor from memory (numpy, no per-row Python), with no broker, no network and
    no data in the task descriptions. Options: rows, size, partitions (topic partitions the rows are spread
    over), maxRecordsPerTrigger, tasks (InputPartitions per micro-batch). Built inside a function so that
    cloudpickle ships the classes by value to Python workers (the bench is not an installed package)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

    class CeilingPartition(InputPartition):
        def __init__(self, first: int, end: int) -> None:
            super().__init__((first, end))
            self.first, self.end = first, end

    class CeilingReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, options: dict) -> None:
            options = {k.lower(): v for k, v in options.items()}  # Spark's option map is case-insensitive
            self.rows = int(options["rows"])
            self.size = int(options["size"])
            self.topic_partitions = int(options["partitions"])
            self.per_trigger = int(options["maxrecordspertrigger"])
            self.tasks = int(options["tasks"])
            self.topic = options["topic"]

        def initialOffset(self) -> dict:
            return {"row": 0}

        def getDefaultReadLimit(self) -> ReadLimit:
            return ReadMaxRows(self.per_trigger)

        def prepareForTriggerAvailableNow(self) -> None:
            pass  # the end is `rows`

        def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
            n = limit.max_rows if isinstance(limit, ReadMaxRows) else self.rows
            return {"row": min(self.rows, int(start["row"]) + n)}

        def partitions(self, start: dict, end: dict) -> list:
            a, b = int(start["row"]), int(end["row"])
            cuts = [a + (b - a) * i // self.tasks for i in range(self.tasks + 1)]
            return [CeilingPartition(x, y) for x, y in zip(cuts[:-1], cuts[1:], strict=True) if y > x]

        def commit(self, end: dict) -> None:
            pass

        def read(self, partition):
            import numpy as np
            import pyarrow as pa

            from shoal_spark.schema import ARROW_SCHEMA

            row = np.arange(partition.first, partition.end, dtype=np.int64)
            n = len(row)
            value_offsets = pa.py_buffer(np.arange(n + 1, dtype=np.int32) * self.size)
            topic = self.topic.encode()
            header_type = ARROW_SCHEMA.field("headers").type
            no_headers = pa.ListArray.from_arrays(
                pa.array(np.zeros(n + 1, dtype=np.int32)),
                pa.array([], header_type.value_type), type=header_type)
            yield pa.RecordBatch.from_arrays([
                pa.nulls(n, pa.binary()),
                pa.Array.from_buffers(pa.binary(), n, [None, value_offsets, pa.py_buffer(b"v" * (self.size * n))]),
                pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)
                                                                          * len(topic)),
                                                       pa.py_buffer(topic * n)]),
                pa.array((row % self.topic_partitions).astype(np.int32)),
                pa.array(row // self.topic_partitions),
                pa.array(np.full(n, 1_700_000_000_000_000, dtype=np.int64), type=pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(n, dtype=np.int32)),
                no_headers,
                pa.array(np.ones(n, dtype=np.int32)),
            ], schema=ARROW_SCHEMA)

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "shoal_ceiling"

        def schema(self):
            from shoal_spark.schema import spark_schema

            return spark_schema()

        def streamReader(self, schema):
            return CeilingReader(dict(self.options))

    return CeilingSource


def proc_stat_fields() -> dict[int, list[str]]:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...) of every live process."""
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stats[int(entry)] = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
    return stats


def tree_cpu_s(root: int) -> float:
    """user+sys CPU seconds of `root` and its descendants (Linux /proc; the JVM, the source runner and the Python
    workers are all below the bench process, the broker too). Live processes count their own time and that of
    the children they reaped (a query's runner process ends with the query and is reaped by the JVM)."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, float] = {}
    for pid, fields in proc_stat_fields().items():
        children.setdefault(int(fields[1]), []).append(pid)
        stats[pid] = sum(int(v) for v in fields[11:15]) / tick  # utime, stime, cutime, cstime
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, 0.0)
        todo += children.get(pid, [])
    return total


def _process_kind(pid: int, broker_pids: set[int]) -> str:
    if pid == os.getpid():
        return "driver"
    if pid in broker_pids:
        return "broker"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return "other"
    if b"java" in cmdline.split(b"\0", 1)[0]:
        # on a standalone cluster (bench/spark_cluster.py) the executors and the Spark daemons are JVMs below us
        if b"CoarseGrainedExecutorBackend" in cmdline:
            return "executor_jvm"
        if b"org.apache.spark.deploy.master." in cmdline or b"org.apache.spark.deploy.worker." in cmdline:
            return "spark_daemons"
        return "jvm"
    if b"streaming_source_runner" in cmdline:
        return "runner"
    return "python_workers"


class CpuSampler:
    """user+sys CPU seconds per process kind below this process, from /proc every `interval_s` (a process that
    ends loses at most its last interval). Its own CPU (`own_cpu_s`: reading /proc for every process and JVM
    thread, tens of ms a second on a busy machine) is the bench's, not the query's: the driver's figure leaves it
    out, or a query that runs longer would look costlier per row."""

    def __init__(self, broker_pid: int, interval_s: float = 0.2, idle_pids: tuple[int, ...] = ()) -> None:
        self.broker_pid = broker_pid
        self.idle_pids = idle_pids  # processes (with their children) not part of the query: kind "idle"
        self.interval_s = interval_s
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._kind: dict[int, str] = {}
        self._threads_first: dict[tuple[int, int], float] = {}
        self._threads_last: dict[tuple[int, int], float] = {}
        self._thread_name: dict[tuple[int, int], str] = {}
        self._stop = threading.Event()
        self.own_cpu_s = 0.0
        self._sample(initial=True)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self, initial: bool = False) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        parent: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for pid, fields in proc_stat_fields().items():
            parent[pid] = int(fields[1])
            cpu[pid] = (int(fields[11]) + int(fields[12])) / tick  # own utime + stime
        mine = {os.getpid()}
        broker = {self.broker_pid}
        idle = set(self.idle_pids)
        changed = True
        while changed:
            changed = False
            for pid, ppid in parent.items():
                if ppid in mine and pid not in mine:
                    mine.add(pid)
                    changed = True
                    if ppid in broker or pid == self.broker_pid:
                        broker.add(pid)
                    if ppid in idle:
                        idle.add(pid)
        for pid in mine:
            if pid not in cpu:
                continue
            if pid not in self._kind:
                self._kind[pid] = "idle" if pid in idle else _process_kind(pid, broker)
                self._first[pid] = cpu[pid] if initial else 0.0
            self._last[pid] = cpu[pid]
            if self._kind[pid] == "jvm":
                self._sample_threads(pid, tick, initial)

    def _sample_threads(self, pid: int, tick: int, initial: bool) -> None:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            name, _, rest = text.partition(" (")[2].rpartition(")")
            fields = rest.split()
            key = (pid, int(tid))
            if key not in self._thread_name:
                # JVM thread names (15 characters in /proc) without their numbers: one entry per pool
                self._thread_name[key] = "".join(c for c in name if not c.isdigit()).strip(" -#")
                self._threads_first[key] = (int(fields[11]) + int(fields[12])) / tick if initial else 0.0
            self._threads_last[key] = (int(fields[11]) + int(fields[12])) / tick

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            started = time.thread_time()
            self._sample()
            self.own_cpu_s += time.thread_time() - started

    def stop(self) -> tuple[dict[str, float], dict[str, float]]:
        """CPU seconds per process kind, and per JVM thread pool."""
        self._stop.set()
        self._thread.join()
        self._sample()
        out: dict[str, float] = {}
        for pid, kind in self._kind.items():
            out[kind] = out.get(kind, 0.0) + self._last[pid] - self._first[pid]
        out["driver"] = out.get("driver", 0.0) - self.own_cpu_s
        threads: dict[str, float] = {}
        for key, name in self._thread_name.items():
            threads[name] = threads.get(name, 0.0) + self._threads_last[key] - self._threads_first[key]
        return out, threads


def drain_spark(spark, bootstrap: str, topic: str, records: int, work: Path, max_bytes: int,
                broker_pid: int, options: dict[str, str], ceiling: dict[str, str] | None = None) -> dict:
    """One query draining the topic through the Shoal source, or with `ceiling` (the ceiling source's options)
    the same rows from memory."""
    if ceiling is not None:
        group = f"ceiling-{uuid.uuid4().hex[:6]}"
        reader = spark.readStream.format("shoal_ceiling").option("topic", topic).option("tasks", "2")
        options = {**ceiling, "source": "ceiling"}
    else:
        group = new_group(bootstrap, "bench-spark")
        reader = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("group.id", group).option("minPartitions", "2")
                  .option("maxPartitions", "2").option("maxBytesPerTrigger", str(max_bytes)))
    for key, value in options.items():
        if key != "source":
            reader = reader.option(key, value)
    return measure_query(reader.load(), records, work / f"ck-{group}", broker_pid, options)


def measure_query(df, records: int, checkpoint: Path, broker_pid: int, options: dict,
                  idle_pids: tuple[int, ...] = ()) -> dict:
    """Run `df` into the noop sink with trigger availableNow until it has read `records` rows: steady rows/s,
    phases, and user+sys CPU per million rows of this process's tree (Spark's processes) and of the broker's;
    the trees of `idle_pids` (another broker the query does not read) are left out."""
    load_before = os.getloadavg()
    start = time.perf_counter()
    cpu_start = tree_cpu_s(os.getpid())
    broker_cpu_start = tree_cpu_s(broker_pid)
    idle_cpu_start = sum(tree_cpu_s(pid) for pid in idle_pids)
    sampler = CpuSampler(broker_pid, idle_pids=idle_pids)
    q = (df.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    first_done = None
    while q.isActive and first_done is None:
        if any(p["numInputRows"] for p in q.recentProgress):
            first_done = time.perf_counter()
        time.sleep(0.05)
    q.awaitTermination(900)
    total = time.perf_counter() - start
    per_kind, jvm_threads = sampler.stop()
    broker_cpu = tree_cpu_s(broker_pid) - broker_cpu_start
    # the broker is a child of this process too; the sampler's CPU is the bench's own
    idle_cpu = sum(tree_cpu_s(pid) for pid in idle_pids) - idle_cpu_start
    cpu = tree_cpu_s(os.getpid()) - cpu_start - broker_cpu - idle_cpu - sampler.own_cpu_s
    if q.exception() is not None:
        raise RuntimeError(f"query failed: {q.exception()}")
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in batches)
    if rows != records:
        raise RuntimeError(f"the query read {rows} of {records} records")
    steady = batches[2:-1] if len(batches) > 3 else batches[1:]  # warm-up batches and the remainder left out
    steady_rows = sum(p["numInputRows"] for p in steady)
    steady_s = sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000
    phases = sorted({k for p in steady for k in p["durationMs"]} - {"triggerExecution"})
    return {"options": options, "query_start_s": round((first_done or time.perf_counter()) - start, 2),
            "first_batch_rows": batches[0]["numInputRows"],
            "steady_batches": len(steady), "steady_rows": steady_rows,
            "steady_rows_s": round(steady_rows / steady_s) if steady_s else None,
            "batch_rows": [p["numInputRows"] for p in batches],
            "batch_ms": [p["durationMs"]["triggerExecution"] for p in batches],
            "whole_query_rows_s": round(rows / total), "load_before": load_before,
            "load_average": os.getloadavg(),
            # Where a steady batch's time goes (ms per batch, averaged), and CPU of the whole query (all of
            # Spark's processes, without the broker; includes the query start) per million rows.
            "steady_phase_ms": {k: round(sum(p["durationMs"].get(k, 0) for p in steady) / len(steady))
                                for k in phases} if steady else {},
            "cpu_s_per_m_rows": round(cpu / rows * 1e6, 2),
            "all_cpu_s_per_m_rows": round((cpu + broker_cpu) / rows * 1e6, 2),
            "broker_cpu_s_per_m_rows": round(broker_cpu / rows * 1e6, 2),
            "cpu_s_per_m_rows_by_process": {k: round(v / rows * 1e6, 2) for k, v in sorted(per_kind.items())},
            "sampler_cpu_s_left_out": round(sampler.own_cpu_s, 2),
            "jvm_cpu_s_per_m_rows_by_thread": {k: round(v / rows * 1e6, 2) for k, v in
                                               sorted(jvm_threads.items(), key=lambda kv: -kv[1]) if v / rows > 1e-8}}


def drain_spark_retrying(*args, **kwargs) -> dict:
    """drain_spark, once more (a new group) when Spark could not start a Python process: on a loaded machine
    the runner or a worker misses Spark's connect-back timeout, which says nothing about the source."""
    for attempt in range(3):
        try:
            return drain_spark(*args, **kwargs)
        except Exception as err:
            if "failed to connect back" not in str(err) or attempt == 2:
                raise
            print(f"retrying a query: {str(err)[:120]}", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_source")
    parser.add_argument("--records", type=int, default=2_000_000, help="100 B records")
    parser.add_argument("--kib-records", type=int, default=300_000, help="1 KiB records")
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--max-bytes-per-trigger", type=int, default=64 << 20, help="the source option")
    parser.add_argument("--max-records-per-trigger", type=int, default=320_000,
                        help="the source option maxRecordsPerTrigger (0: not set); the default is half of what the "
                             "broker locks over 64 partitions, so the next micro-batch can be acquired ahead")
    parser.add_argument("--max-record-locks", type=int, default=MAX_RECORD_LOCKS,
                        help="the broker's group.share.partition.max.record.locks (and its upper bound)")
    parser.add_argument("--variant", action="append", default=[],
                        help="extra source options k=v[,k=v...] of one variant; several: their queries alternate "
                             "in one session (A/B), each variant's last is reported")
    parser.add_argument("--driver-memory", default="2g",
                        help="spark.driver.memory (local mode: the executors' heap too); with the default 1g, G1's "
                             "concurrent cycles for the micro-batches' large task descriptions cost 0.6 CPU s a "
                             "million rows")
    parser.add_argument("--spark-conf", action="append", default=[],
                        help="k=v: a Spark setting of the session (e.g. spark.driver.memory=2g)")
    parser.add_argument("--spark-runs", type=int, default=2,
                        help="Spark queries per record size, one after the other in one session (each a new share "
                             "group draining the whole topic); the last is reported: the JVM compiles Spark's code "
                             "paths for minutes, so the first run is still warming up")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--skip", default="", help="comma-separated: ours,arrow,librdkafka,spark,ceiling")
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    variants = [dict(kv.split("=", 1) for kv in v.split(",") if kv) for v in args.variant] or [{}]
    if args.max_records_per_trigger:
        for v in variants:
            v.setdefault("maxRecordsPerTrigger", str(args.max_records_per_trigger))
    broker = broker_config(args.max_record_locks)
    results = []
    import tempfile

    with tempfile.TemporaryDirectory(prefix="shoal-bench-spark-") as tmp:
        work = Path(tmp)
        proc, port = start_shoal(work, broker)
        bootstrap = f"127.0.0.1:{port}"
        spark = None
        try:
            for size, records in ((100, args.records), (1024, args.kib_records)):
                if records <= 0:
                    continue
                topic = f"spark-bench-{size}-{uuid.uuid4().hex[:6]}"
                produce_s = setup(bootstrap, topic, args.partitions, records, size)
                row: dict = {"record_bytes": size, "records": records, "partitions": args.partitions,
                             "max_bytes_per_trigger": args.max_bytes_per_trigger,
                             "produce_rows_s": round(records / produce_s)}
                if "ours" not in skip:
                    row["shoal_client_rows_s"] = round(records / drain_ours(bootstrap, topic, records, False))
                if "arrow" not in skip:
                    row["shoal_client_arrow_rows_s"] = round(records / drain_ours(bootstrap, topic, records, True))
                if "librdkafka" not in skip:
                    row["share_consumer_rows_s"] = round(records / drain_confluent(bootstrap, topic, records))
                if "spark" not in skip:
                    conf = {"spark.driver.memory": args.driver_memory,
                            **dict(kv.split("=", 1) for kv in args.spark_conf)}
                    spark = spark or spark_session(conf)
                    # the ceiling's micro-batches as large as the source's: maxRecordsPerTrigger, or as many
                    # records as maxBytesPerTrigger holds (a record takes its value and ~12 B in a batch)
                    per_trigger = min(args.max_records_per_trigger or records,
                                      args.max_bytes_per_trigger // (size + RECORD_OVERHEAD))
                    ceiling = None if "ceiling" in skip else {
                        "rows": str(records), "size": str(size), "partitions": str(args.partitions),
                        "maxRecordsPerTrigger": str(per_trigger)}
                    runs, ceilings = [], []
                    for _ in range(args.spark_runs):
                        # the ceiling and the source back to back, so both see the same load and JIT state
                        if ceiling is not None:
                            ceilings.append(drain_spark_retrying(spark, bootstrap, topic, records, work,
                                                        args.max_bytes_per_trigger, proc.pid, {}, ceiling))
                        runs += [drain_spark_retrying(spark, bootstrap, topic, records, work, args.max_bytes_per_trigger,
                                             proc.pid, variant) for variant in variants]
                    row["spark"] = runs[-1]
                    row["spark_variants"] = runs[-len(variants):]
                    row["spark_earlier_runs"] = runs[:-len(variants)]
                    if ceilings:
                        row["spark_ceiling"] = ceilings[-1]
                        row["spark_ceiling_earlier_runs"] = ceilings[:-1]
                results.append(row)
                print(json.dumps(row), flush=True)
        finally:
            if spark is not None:
                spark.stop()
            stop(proc)
    print()
    print(f"{'record':>7} {'records':>9} {'shoal_client':>13} {'+ Arrow':>9} {'ShareConsumer':>14} "
          f"{'Spark steady':>13} {'Spark start':>12}")
    for r in results:
        s = r.get("spark", {})
        print(f"{r['record_bytes']:>6}B {r['records']:>9} {r.get('shoal_client_rows_s', '-'):>13} "
              f"{r.get('shoal_client_arrow_rows_s', '-'):>9} {r.get('share_consumer_rows_s', '-'):>14} "
              f"{s.get('steady_rows_s', '-'):>13} {str(s.get('query_start_s', '-')) + ' s':>12}")
    for r in results:
        c = r.get("spark_ceiling")
        if c is not None and c["steady_rows_s"] and r["spark"]["steady_rows_s"]:
            s = r["spark"]
            print(f"{r['record_bytes']:>6}B ceiling: steady {c['steady_rows_s']} rows/s, "
                  f"{c['all_cpu_s_per_m_rows']} CPU s per M rows {c['cpu_s_per_m_rows_by_process']}; source: "
                  f"{s['steady_rows_s'] / c['steady_rows_s']:.2f}x its rows/s, "
                  f"+{s['all_cpu_s_per_m_rows'] - c['all_cpu_s_per_m_rows']:.2f} CPU s per M rows "
                  f"({s['all_cpu_s_per_m_rows'] / c['all_cpu_s_per_m_rows']:.2f}x)")
        for v in r.get("spark_variants", []):
            print(f"{r['record_bytes']:>6}B {json.dumps(v['options'])}: steady {v['steady_rows_s']} rows/s, "
                  f"phases {v['steady_phase_ms']}, CPU s per M rows {v['cpu_s_per_m_rows_by_process']}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"spark-source-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(),
                                "python": platform.python_version(), "broker": broker,
                                "driver_memory": args.driver_memory, "spark_conf": args.spark_conf,
                                "results": results},
                               indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
