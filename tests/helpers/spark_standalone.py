"""The `spark_standalone` fixture: a Spark standalone cluster on loopback (bench/spark_cluster.py: a master and
two workers started from PySpark's launch classes, executors in JVMs of their own) for the tests that run the
Spark source with `--master spark://127.0.0.1:PORT`.

    cluster.master_url                  # "spark://127.0.0.1:PORT"
    cluster.executors(app_id)           # {executor id: PID} of an application's running executor JVMs
    descendants(pid)                    # the processes below a PID (an executor's Python workers)
"""

from __future__ import annotations

import pytest

from bench.spark_cluster import SparkStandalone, descendants
from tests.helpers import pid_registry

__all__ = ["SparkStandalone", "descendants", "spark_standalone"]

# A pytest plugin: tests/conftest.py lists this module in pytest_plugins.

_RUNNING: list[SparkStandalone] = []  # the test process's cluster while it runs, for failing tests' reports


@pytest.fixture(scope="session")
def spark_standalone(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A master and two workers (1 core, 1 GiB each) for the tests that ask, started once per test process (all
    Spark tests share one xdist worker) and stopped at its end; the run's watchdog stops them if pytest dies.
    An application takes both cores (`tests/spark/conftest.py new_session`): one at a time."""
    from tests.helpers.kafka_fixtures import run_of

    run = run_of(request.config)
    run.ensure_watchdog()

    def spawned(pid: int, what: str) -> None:
        pid_registry.register(run.procs, pid, what)

    def exited(pid: int) -> None:
        pid_registry.unregister(run.procs, pid)

    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), 2, on_spawn=spawned,
                              on_exit=exited).start()
    _RUNNING.append(cluster)
    try:
        yield cluster
    finally:
        _RUNNING.remove(cluster)
        cluster.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    # a test that takes the fixture by name, or by request.getfixturevalue in its "standalone" parametrization
    uses = "spark_standalone" in getattr(item, "fixturenames", ()) or "standalone" in item.name
    if report.failed and uses and _RUNNING:
        report.sections.append(("Spark standalone logs (tails)", _RUNNING[-1].logs()))
