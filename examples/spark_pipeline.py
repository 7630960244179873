"""A whole pipeline in one command: a Shoal broker, a producer, and a Spark streaming query reading a share group.

    make example                                   # or: python examples/spark_pipeline.py
    python examples/spark_pipeline.py --sink parquet --out /tmp/events --records 200000
    python examples/spark_pipeline.py --master spark://127.0.0.1:7077      # on a Spark standalone cluster

What it does:
1. starts `python -m broker` on a free loopback port with a temporary data directory;
2. creates topic "events" (3 partitions) and sets the share group "spark-pipeline" to start at the earliest
   offset (group config share.auto.offset.reset, via AdminClient);
3. produces `--records` JSON records with a header from a background thread;
4. reads the share group with `spark.readStream.format("shoal")`, parses the JSON, and writes each micro-batch to
   the console (or to parquet files) until every record has been processed, then stops everything.

Needs `pip install 'shoal[spark]' confluent-kafka` (the Makefile's venv has both) and a Java runtime. On a Spark
cluster (`--master spark://...`) the executors' Python must have `shoal[spark]` installed too and be the one
PYSPARK_PYTHON names (this interpreter unless set), and a parquet `--out` must be a path every executor can write.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TOPIC, GROUP = "events", "spark-pipeline"


def start_broker(work: Path) -> tuple[subprocess.Popen, str]:
    port_file = work / "broker.port"
    log = open(work / "broker.log", "wb")  # noqa: SIM115 - lives as long as the broker
    proc = subprocess.Popen([sys.executable, "-m", "broker", "--port-file", str(port_file),
                             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                             "--override", f"log.dirs={work / 'data'}"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the broker did not start; see {work / 'broker.log'}")
        time.sleep(0.05)
    port = port_file.read_text().splitlines()[0].strip()  # first line: the port of the first listener
    return proc, f"127.0.0.1:{port}"


def prepare(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=3)])[TOPIC].result(timeout=30)
    group = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([group])[group].result(timeout=30)


def produce(bootstrap: str, records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(records):
        value = json.dumps({"id": i, "user": f"user-{i % 97}", "amount": i % 1000 / 10}).encode()
        while True:
            try:
                producer.produce(TOPIC, key=str(i % 97).encode(), value=value, headers=[("source", b"example")])
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(60)


def run_query(bootstrap: str, records: int, sink: str, out: Path, work: Path, master: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's Python workers: this interpreter
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from shoal_spark import ShareSource

    spark = (SparkSession.builder.master(master).appName("shoal-example")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ShareSource)
    events = (spark.readStream.format("shoal")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", TOPIC)
              .option("group.id", GROUP)
              .option("maxRecordsPerTrigger", "20000")
              .load())
    parsed = events.select(
        F.from_json(F.col("value").cast("string"), "id LONG, user STRING, amount DOUBLE").alias("e"),
        "partition", "offset", "deliveryCount").select("e.*", "partition", "offset", "deliveryCount")
    seen = [0]

    def write(batch, batch_id: int) -> None:
        # Anything this function writes is durable before the source acknowledges the batch (at least once).
        if sink == "parquet":
            batch.write.mode("overwrite").parquet(str(out / f"batch={batch_id:06d}"))
            n = batch.count()
        else:
            batch.persist()  # two actions below: decode the micro-batch once
            n = batch.count()
            print(f"--- batch {batch_id}: {n} records")
            batch.groupBy("user").agg(F.count("*").alias("events"), F.sum("amount").alias("amount")) \
                .orderBy(F.desc("events")).show(5, truncate=False)
            batch.unpersist()
        seen[0] += n

    query = (parsed.writeStream.foreachBatch(write).option("checkpointLocation", str(work / "checkpoint"))
             .trigger(processingTime="1 second").start())
    while query.isActive and seen[0] < records:
        time.sleep(0.5)
    query.stop()
    print(f"processed {seen[0]} records" + (f" into {out}" if sink == "parquet" else ""))
    spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--sink", choices=["console", "parquet"], default="console")
    parser.add_argument("--out", type=Path, default=None, help="parquet directory (default: a temporary one)")
    parser.add_argument("--master", default="local[2]", help="Spark master URL (default: local[2])")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shoal-example-") as tmp:
        work = Path(tmp)
        broker, bootstrap = start_broker(work)
        try:
            print(f"broker on {bootstrap}, data in {work / 'data'}")
            prepare(bootstrap)
            producer = threading.Thread(target=produce, args=(bootstrap, args.records), daemon=True)
            producer.start()
            run_query(bootstrap, args.records, args.sink, args.out or work / "out", work, args.master)
            producer.join(60)
        finally:
            broker.send_signal(signal.SIGTERM)
            broker.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
