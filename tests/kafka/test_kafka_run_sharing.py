"""The `kafka` fixture starts one Kafka per test run, whatever the number of pytest-xdist workers, only when a
selected test needs it, and the run stops it by PID at its end, also when a worker or the run itself crashed.

Each case runs an inner pytest (its own run, its own Kafka) on a small test file written here, whose test
records the Kafka it was given."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import pid_registry
from tests.helpers.broker_process import venv_python
from tests.helpers.kafka_dist import REPO
from tests.helpers.kafka_run import ROOT_ENV
from tests.helpers.waiting import wait_until

INNER_TESTS = '''
import json
import os
from pathlib import Path


def test_uses_kafka(kafka):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    seen = {"pid": kafka.pid, "started_at": kafka.started_at, "bootstrap": kafka.bootstrap}
    Path(os.environ["OBSERVED"], f"{worker}.json").write_text(json.dumps(seen))
    if os.environ.get("CRASH"):
        os._exit(3)  # the process running this test dies at once: no teardown, no session end


def test_needs_no_kafka():
    pass
'''


class Inner:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.tests = root / "inner"
        self.tests.mkdir()
        (self.tests / "conftest.py").write_text('pytest_plugins = ["tests.helpers.kafka_fixtures"]\n')
        (self.tests / "test_inner.py").write_text(INNER_TESTS)
        (self.tests / "pytest.ini").write_text("[pytest]\n")
        self.runs = root / "runs"  # where the inner runs put their run directories
        self.observed = root / "observed"
        self.observed.mkdir()

    def pytest(self, *args: str, crash: bool = False) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(REPO), ROOT_ENV: str(self.runs), "OBSERVED": str(self.observed)}
        env.pop("PYTEST_XDIST_WORKER", None)
        if crash:
            env["CRASH"] = "1"
        return subprocess.run([venv_python(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                               "--rootdir", str(self.tests), "-c", str(self.tests / "pytest.ini"), *args,
                               str(self.tests)], cwd=self.tests, env=env, capture_output=True, text=True,
                              timeout=300)

    def seen(self) -> dict[str, dict]:
        return {p.stem: json.loads(p.read_text()) for p in self.observed.glob("*.json")}

    def leftovers(self) -> list[Path]:
        return list(self.runs.iterdir()) if self.runs.exists() else []


@pytest.fixture
def inner(tmp_path: Path) -> Inner:
    return Inner(tmp_path)


def report(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def test_two_workers_share_one_kafka_which_the_run_stops_at_its_end(inner: Inner) -> None:
    # --dist each: both workers run the test, each asking for Kafka at about the same time.
    done = inner.pytest("-n", "2", "--dist", "each", "-k", "uses_kafka")
    assert done.returncode == 0, report(done)
    seen = inner.seen()
    assert sorted(seen) == ["gw0", "gw1"], report(done)
    assert seen["gw0"] == seen["gw1"]  # same PID, same start time, same port
    pid, started = seen["gw0"]["pid"], seen["gw0"]["started_at"]
    # Stopped by the controlling process before it exited (not by the watchdog, which acts after it exited).
    assert not pid_registry.running(pid, started)
    assert f"stopped Kafka pid {pid}" in done.stdout, report(done)
    assert inner.leftovers() == []


def test_a_run_selecting_no_kafka_test_starts_none(inner: Inner) -> None:
    done = inner.pytest("-n", "2", "-k", "needs_no_kafka")
    assert done.returncode == 0, report(done)
    assert inner.seen() == {}
    assert not inner.runs.exists(), "the run made a Kafka run directory without any test asking for Kafka"
    assert "stopped Kafka" not in done.stdout


def test_kafka_is_stopped_when_the_worker_that_started_it_crashed(inner: Inner) -> None:
    done = inner.pytest("-n", "1", "-k", "uses_kafka", crash=True)
    assert done.returncode != 0 and "crashed" in done.stdout, report(done)  # xdist reports the lost worker
    (seen,) = inner.seen().values()
    assert not pid_registry.running(seen["pid"], seen["started_at"])
    assert f"stopped Kafka pid {seen['pid']}" in done.stdout, report(done)
    assert inner.leftovers() == []


def test_kafka_is_stopped_when_the_run_itself_died(inner: Inner) -> None:
    # Without xdist the test runs in the controlling process: its death leaves Kafka to the watchdog.
    done = inner.pytest("-k", "uses_kafka", crash=True)
    assert done.returncode == 3, report(done)
    (seen,) = inner.seen().values()
    wait_until(lambda: not pid_registry.running(seen["pid"], seen["started_at"]), 30,
               "the watchdog to stop the dead run's Kafka")
    wait_until(lambda: inner.leftovers() == [], 10, "the watchdog to remove the run directory")
