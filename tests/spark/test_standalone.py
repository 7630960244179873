"""The streaming source on a Spark standalone cluster on loopback (the `spark_standalone` fixture: a master and two
workers from PySpark's launch classes): the executors are JVMs of their own with Python workers of their own,
which import shoal_spark from their interpreter's path (PYSPARK_PYTHON; nothing shipped by Spark). The example
pipeline runs there; a stopped query releases what it held; an executor killed with SIGKILL while it runs a
micro-batch's tasks loses nothing (Spark runs the tasks again elsewhere, with the records in the task
descriptions). The driver-kill test (tests/spark/test_kill.py) runs on the cluster too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import ShareConsumer

from tests.helpers.broker_process import REPO
from tests.helpers.confluent_clients import share_from_earliest
from tests.helpers.spark_session import new_session, spark_env
from tests.helpers.spark_standalone import descendants
from tests.spark.helpers import (
    create_topic,
    group_members,
    numbers,
    produce,
    read_rows,
    start_broker,
    value_of,
    wait_until,
    written,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]

RECORDS, PER_TRIGGER = 4000, 1000  # the executor-kill test: four micro-batches


@pytest.fixture(scope="module")
def spark(spark_standalone):
    session = new_session("shoal-tests-standalone", spark_standalone.master_url)
    # getOrCreate would hand back a local session some earlier test left running
    assert session.sparkContext.master == spark_standalone.master_url, session.sparkContext.master
    try:
        yield session
    finally:
        for q in session.streams.active:
            q.stop()
        session.stop()


def source(spark, bootstrap: str, topic: str, group: str, **options):
    reader = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("group.id", group))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def test_the_example_pipeline_runs_on_the_cluster(spark_standalone, tmp_path):
    out = tmp_path / "events"
    r = subprocess.run([sys.executable, "examples/spark_pipeline.py", "--master", spark_standalone.master_url,
                        "--records", "5000", "--sink", "parquet", "--out", str(out)],
                       cwd=REPO, env={**os.environ, **spark_env()}, capture_output=True, text=True, timeout=480)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert f"into {out}" in r.stdout, r.stdout[-2000:]
    # it ran as an application of the cluster, with an executor on each worker (their work directories)
    [app] = [a for a in spark_standalone.state()["completedapps"] if a["name"] == "shoal-example"]
    for worker in ("worker1", "worker2"):
        assert list((spark_standalone.root / worker).glob(f"{app['id']}/*/stderr")), (worker, app)
    ids = Counter(row["id"] for f in out.glob("batch=*/*.parquet") for row in pq.read_table(f).to_pylist())
    assert set(ids) == set(range(5000))  # every record, parsed by the executors


def test_stop_releases_held_records_to_another_member_at_once(spark, tmp_path):
    # Locks last 60 s: records that come back sooner were released, not expired.
    broker = start_broker(tmp_path / "b", {"group.share.record.lock.duration.ms": "60000"})
    try:
        create_topic(broker.bootstrap, "stop")
        share_from_earliest(broker.bootstrap, "g")
        produce(broker.bootstrap, "stop", 0, 100)
        entered, leave = threading.Event(), threading.Event()

        def hold(df, batch_id):
            entered.set()
            leave.wait(120)  # the batch is abandoned: nothing written

        q = source(spark, broker.bootstrap, "stop", "g").writeStream.foreachBatch(hold).option(
            "checkpointLocation", str(tmp_path / "ck")).start()
        assert entered.wait(180)
        assert len(group_members(broker.bootstrap, "g")) == 1
        stopper = threading.Thread(target=q.stop)
        stopper.start()
        leave.set()
        stopper.join(120)
        assert not q.isActive
        wait_until(lambda: group_members(broker.bootstrap, "g") == [], 20, "the query's member to leave")
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
        consumer.subscribe(["stop"])
        got: set[bytes] = set()
        try:
            wait_until(lambda: got.update(m.value() for m in consumer.poll(0.5) if m.error() is None) or
                       len(got) == 100, 40, "the released records at another member (before lock expiry)")
        finally:
            consumer.close()
        assert got == {value_of(i) for i in range(100)}
    finally:
        broker.stop()


def block_in_executor(marks: Path):
    """A mapInArrow function for one micro-batch: each task notes its Python worker's PID and where it imports
    shoal_spark from, then waits for marks/go (the test kills an executor meanwhile) before passing its rows on."""
    def run(batches):
        from pyspark import TaskContext

        import shoal_spark

        ctx = TaskContext.get()
        (marks / f"task-{ctx.partitionId()}-{ctx.attemptNumber()}").write_text(
            f"{os.getpid()} {shoal_spark.__file__}")
        deadline = time.monotonic() + 120
        while not (marks / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        yield from batches
    return run


def test_an_executor_killed_mid_batch_loses_nothing(spark, spark_standalone, tmp_path):
    broker = start_broker(tmp_path / "b")
    marks, out = tmp_path / "marks", tmp_path / "out"
    marks.mkdir()
    try:
        create_topic(broker.bootstrap, "exec", 2)
        share_from_earliest(broker.bootstrap, "g")
        produce(broker.bootstrap, "exec", 0, RECORDS, partitions=2)
        app = spark.sparkContext.applicationId
        wait_until(lambda: len(spark_standalone.executors(app)) == 2, 120, "an executor on each worker")
        before = spark_standalone.executors(app)

        def write(df, batch_id: int) -> None:
            if batch_id == 1:  # the second batch: runs while an executor is killed
                df = df.mapInArrow(block_in_executor(marks), df.schema)
            df.write.mode("overwrite").parquet(str(out / f"batch={batch_id:06d}"))

        q = source(spark, broker.bootstrap, "exec", "g", maxRecordsPerTrigger=PER_TRIGGER).writeStream.foreachBatch(
            write).option("checkpointLocation", str(tmp_path / "ck")).start()
        try:
            tasks = wait_until(lambda: sorted(marks.glob("task-*")), 180, "a task of batch 1 in an executor")
            pid, imported = tasks[0].read_text().split()
            # The task's Python worker runs below one of the executor JVMs (the workers' children), not below the
            # driver's JVM; it imports shoal_spark from its own path (the checkout: PYTHONPATH of the workers).
            [victim] = [e for e, jvm in before.items() if int(pid) in descendants(jvm)]
            assert int(pid) not in descendants(spark._jvm.java.lang.ProcessHandle.current().pid())
            assert Path(imported).is_relative_to(REPO), imported
            os.kill(before[victim], signal.SIGKILL)
            wait_until(lambda: victim not in spark_standalone.executors(app), 30, "the executor gone")
            (marks / "go").write_text("")
            wait_until(lambda: set(written(out)) == set(range(RECORDS)) or not q.isActive, 300, "every record")
            assert q.isActive, q.exception()
            # The task that ran on the killed executor ran again (attempt 1); the worker started another.
            assert any(t.name.endswith("-1") for t in marks.glob("task-*")), sorted(marks.iterdir())
            wait_until(lambda: len(spark_standalone.executors(app)) == 2, 120, "a new executor")
            assert set(spark_standalone.executors(app)) - set(before)
        finally:
            q.stop()
        counts = numbers(read_rows(out))
        assert set(counts) == set(range(RECORDS))
        assert sum(counts.values()) - RECORDS <= 2 * PER_TRIGGER  # only the batches in flight may come twice
    finally:
        broker.stop()
