"""Shared fixtures: `broker` (a real broker process per test) and `broker_module` (one per test module).

Both start `python -m broker` on 127.0.0.1 with an ephemeral port and a temporary data directory, capture its
output to a file, attach the tail of that file to the report of a failing test, and always stop the process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.broker_process import BrokerProcess, start_broker

# Apache Kafka 4.4, the referee: the `kafka`, `kafka_sasl` and `kafka_cluster` fixtures.
pytest_plugins = ["tests.helpers.kafka_fixtures", "tests.helpers.spark_standalone"]


@pytest.fixture
def broker(tmp_path: Path):
    proc = start_broker(tmp_path)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def broker_module(tmp_path_factory: pytest.TempPathFactory):
    proc = start_broker(tmp_path_factory.mktemp("broker"))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def broker_factory(tmp_path: Path):
    """Start brokers with extra overrides: `broker_factory({"num.partitions": "3"})`."""
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, extra_args: list[str] | None = None) -> BrokerProcess:
        proc = start_broker(tmp_path / f"b{len(started)}", overrides, extra_args)
        started.append(proc)
        return proc

    make.started = started  # type: ignore[attr-defined]  # read by the failure report below
    try:
        yield make
    finally:
        for proc in started:
            proc.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, BrokerProcess):
            report.sections.append((f"broker log ({name}, tail)", value.tail()))
        for index, proc in enumerate(getattr(value, "started", ()) if callable(value) else ()):
            if isinstance(proc, BrokerProcess):
                report.sections.append((f"broker log ({name} #{index}, tail)", proc.tail()))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks into the scheduling groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist's `--dist loadgroup` (what `make test` runs): a test module's tests stay on one
    worker (module-scoped brokers are started once), the Spark tests all share one worker, as each starts a
    JVM that wants both cores, and so do the Kafka Streams tests (each runs Streams JVMs beside its brokers). A
    module that names its group itself (`pytestmark = pytest.mark.xdist_group(NAME)`) keeps it: the cut-over
    tests of tests/kafka/ share one, so their three-broker clusters never run side by side."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        module = item.nodeid.split("::", 1)[0]
        shared = next((group for group in ("spark", "streams") if module.startswith(f"tests/{group}/")), None)
        item.add_marker(pytest.mark.xdist_group(shared or module))
