"""kill -9 of a streaming query's driver mid-stream, then a restart from its checkpoint: nothing is lost and the
duplicates are bounded by the batches in flight. In local[2], and with the driver's application on a Spark
standalone cluster (executors in JVMs of their own, which go when their driver goes)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.helpers.confluent_clients import share_from_earliest
from tests.spark.helpers import (
    create_topic,
    numbers,
    produce,
    read_rows,
    start_broker,
    stream_driver,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PER_TRIGGER = 1000
# records of the run: on the standalone cluster a micro-batch costs seconds more (tasks travel to other JVMs)
RECORDS = {"local": 20_000, "standalone": 8_000}


@pytest.mark.parametrize("where", ["local", "standalone"])
def test_driver_killed_mid_stream_restarts_from_its_checkpoint_without_loss(tmp_path, request, where):
    master = request.getfixturevalue("spark_standalone").master_url if where == "standalone" else "local[2]"
    records = RECORDS[where]

    def start_driver(broker, out, checkpoint, log):
        return stream_driver(broker.bootstrap, "kill", "g", out, checkpoint, records, PER_TRIGGER, log, master)

    broker = start_broker(tmp_path / "b")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    log_path = tmp_path / "driver.log"
    driver = None
    try:
        create_topic(broker.bootstrap, "kill", 2)
        share_from_earliest(broker.bootstrap, "g")
        produce(broker.bootstrap, "kill", 0, records, partitions=2)
        with open(log_path, "ab") as log:
            driver = start_driver(broker, out, checkpoint, log)
            wait_until(lambda: log_path.read_text().count("batch ") >= 3 or driver.poll() is not None, 300,
                       "three batches written")
            assert driver.poll() is None, log_path.read_text()[-3000:]
            os.killpg(driver.pid, signal.SIGKILL)  # the whole driver: JVM, runner and workers
            driver.wait(30)
            before = sum(numbers(read_rows(out)).values())
            assert 0 < before < records
            log.write(b"--- restart\n")
            log.flush()
            driver = start_driver(broker, out, checkpoint, log)
            try:
                assert driver.wait(400) == 0, log_path.read_text()[-3000:]
            except subprocess.TimeoutExpired:
                raise AssertionError(log_path.read_text()[-3000:]) from None
        counts = numbers(read_rows(out))
        assert set(counts) == set(range(records))  # nothing lost
        duplicates = sum(counts.values()) - records
        assert duplicates <= 2 * PER_TRIGGER, duplicates  # only batches in flight at the kill come again
    finally:
        if driver is not None and driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
        broker.stop()
