"""kill -9 of a streaming query's driver mid-stream, then a restart from its checkpoint: nothing is lost and the
duplicates are bounded by the batches in flight."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.helpers.broker_process import REPO
from tests.helpers.confluent_clients import share_from_earliest
from tests.spark.conftest import spark_env
from tests.spark.helpers import create_topic, numbers, produce, read_rows, start_broker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.spark]

RECORDS = 20_000
PER_TRIGGER = 1000


def start_driver(broker, out, checkpoint, log):
    from tests.helpers.broker_process import venv_python

    cmd = [venv_python(), "-m", "tests.spark.stream_driver", broker.bootstrap, "kill", "g", str(out), str(checkpoint),
           str(RECORDS), str(PER_TRIGGER)]
    # A session of its own: the driver, its JVM and the Python workers form one process group to kill.
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, **spark_env()}, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def test_driver_killed_mid_stream_restarts_from_its_checkpoint_without_loss(tmp_path):
    broker = start_broker(tmp_path / "b")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    log_path = tmp_path / "driver.log"
    driver = None
    try:
        create_topic(broker.bootstrap, "kill", 2)
        share_from_earliest(broker.bootstrap, "g")
        produce(broker.bootstrap, "kill", 0, RECORDS, partitions=2)
        with open(log_path, "ab") as log:
            driver = start_driver(broker, out, checkpoint, log)
            wait_until(lambda: log_path.read_text().count("batch ") >= 3 or driver.poll() is not None, 300,
                       "three batches written")
            assert driver.poll() is None, log_path.read_text()[-3000:]
            os.killpg(driver.pid, signal.SIGKILL)  # the whole driver: JVM, runner and workers
            driver.wait(30)
            before = sum(numbers(read_rows(out)).values())
            assert 0 < before < RECORDS
            log.write(b"--- restart\n")
            log.flush()
            driver = start_driver(broker, out, checkpoint, log)
            try:
                assert driver.wait(400) == 0, log_path.read_text()[-3000:]
            except subprocess.TimeoutExpired:
                raise AssertionError(log_path.read_text()[-3000:]) from None
        counts = numbers(read_rows(out))
        assert set(counts) == set(range(RECORDS))  # nothing lost
        duplicates = sum(counts.values()) - RECORDS
        assert duplicates <= 2 * PER_TRIGGER, duplicates  # only batches in flight at the kill come again
    finally:
        if driver is not None and driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
        broker.stop()
