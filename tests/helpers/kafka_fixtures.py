"""pytest fixtures running Apache Kafka 4.4, the referee (a plugin: tests/conftest.py lists it in pytest_plugins).

kafka          one single-node KRaft Kafka (PLAINTEXT) for the whole test run, shared by every xdist worker:
               started by the first test that asks, stopped by PID when the run ends (tests/helpers/kafka_run.py)
kafka_sasl     the same, with only a SASL_PLAINTEXT listener: SCRAM-SHA-256/512 users admin (a super user) and
               alice, StandardAuthorizer; `kafka_sasl.client_config("alice")` gives confluent-kafka settings
kafka_cluster  three KRaft nodes (each broker and controller; replication factor 3, min.insync.replicas=2), per
               test module, for the tests that use it; stopped when the module is done. A module may override
               the `kafka_cluster_overrides` fixture (module-scoped) to start it with other broker settings
kafka_cluster_factory  clusters of another size or with other settings, per test
kafka_single_factory   single-node Kafkas with other settings (e.g. a token secret), per test module

Both shared nodes are KafkaNode objects (tests/helpers/kafka_process.py): `.bootstrap`, `.pid`, `.tail()`. They
belong to the run: a test must not stop or restart them (start its own KafkaNode for that), and names its topics
and groups uniquely, as other tests use the same broker. A failing test's report gets the tail of the Kafka logs
it used.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import kafka_dist
from tests.helpers.kafka_process import KafkaCluster, KafkaNode, start_single
from tests.helpers.kafka_run import KafkaRun

_RUN = pytest.StashKey[KafkaRun]()
_INPUT_KEY = "shoal_kafka_run"


class _XdistBridge:
    """Hands the controlling process's run to each worker it starts."""

    def __init__(self, run: KafkaRun) -> None:
        self.run = run

    def pytest_configure_node(self, node) -> None:
        node.workerinput[_INPUT_KEY] = self.run.to_input()


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        config.stash[_RUN] = KafkaRun.from_input(workerinput[_INPUT_KEY])
        return
    run = KafkaRun.new()
    config.stash[_RUN] = run
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistBridge(run), "shoal-kafka-xdist-bridge")


def _finish(config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None or _RUN not in config.stash:
        return
    stopped = config.stash[_RUN].finish()
    if stopped:
        line = "; ".join(f"stopped Kafka pid {e['pid']} ({e['what']})" for e in stopped)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(line)
        else:
            print(line, file=sys.stderr)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # In the controlling process, after every worker is done (or has crashed).
    _finish(session.config)


def pytest_unconfigure(config: pytest.Config) -> None:
    _finish(config)  # also when the session did not get to its end (an interrupted collection, a usage error)


def run_of(config: pytest.Config) -> KafkaRun:
    """The test run's process registry and watchdog (other fixtures record their daemons there too)."""
    return config.stash[_RUN]


def _require_kafka() -> None:
    try:
        kafka_dist.lib_dir()
    except kafka_dist.KafkaNotInstalled as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def kafka(request: pytest.FixtureRequest) -> KafkaNode:
    _require_kafka()
    return request.config.stash[_RUN].shared("single", "PLAINTEXT")


@pytest.fixture(scope="session")
def kafka_sasl(request: pytest.FixtureRequest) -> KafkaNode:
    _require_kafka()
    return request.config.stash[_RUN].shared("sasl", "SASL_PLAINTEXT")


def _start_cluster(config: pytest.Config, root, size: int, overrides) -> KafkaCluster:
    _require_kafka()
    run = config.stash[_RUN]
    run.ensure_watchdog()  # a worker dying mid-test leaves its cluster to the watchdog
    return KafkaCluster(root, size, overrides=overrides, registry=run.procs).start()


@pytest.fixture(scope="session")
def kafka_registry(request: pytest.FixtureRequest) -> Path:
    """The run's record of Kafka JVMs (pid_registry) for a test that starts a KafkaNode of its own
    (`start_single(..., registry=kafka_registry)`): the watchdog stops them if the run dies first."""
    _require_kafka()
    run = request.config.stash[_RUN]
    run.ensure_watchdog()
    return run.procs


@pytest.fixture(scope="module")
def kafka_cluster_overrides() -> dict[str, str] | None:
    """Broker settings of the module's `kafka_cluster` beyond the defaults (a module overrides this fixture)."""
    return None


@pytest.fixture(scope="module")
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  kafka_cluster_overrides: dict[str, str] | None):
    cluster = _start_cluster(request.config, tmp_path_factory.mktemp("kafka-cluster"), 3, kafka_cluster_overrides)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kafka_cluster_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Start clusters with other sizes or settings: `kafka_cluster_factory(3, {"broker.session.timeout.ms":
    "3000"})`; each is stopped when the test ends."""
    started: list[KafkaCluster] = []

    def make(size: int = 3, overrides: dict[str, str] | None = None) -> KafkaCluster:
        started.append(_start_cluster(request.config, tmp_path_factory.mktemp("kafka-cluster"), size, overrides))
        return started[-1]

    try:
        yield make
    finally:
        for cluster in started:
            cluster.stop()


@pytest.fixture(scope="module")
def kafka_single_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Start single-node Kafkas with broker-wide settings the shared ones must not get, for a test module:
    `kafka_single_factory("SASL_PLAINTEXT", {"delegation.token.secret.key": "..."})`; each is stopped when the
    module is done (the run's watchdog covers a crashed worker)."""
    started: list[KafkaNode] = []

    def make(security: str = "PLAINTEXT", overrides: dict[str, str] | None = None) -> KafkaNode:
        _require_kafka()
        run = request.config.stash[_RUN]
        run.ensure_watchdog()
        started.append(start_single(tmp_path_factory.mktemp("kafka-single") / "node", security=security,
                                    overrides=overrides, registry=run.procs,
                                    label=f"Kafka node of {request.node.name}"))
        return started[-1]

    try:
        yield make
    finally:
        for node in started:
            node.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, KafkaNode):
            report.sections.append((f"Kafka log ({name}, {value.log_path}, tail)", value.tail()))
        elif isinstance(value, KafkaCluster):
            report.sections.append((f"Kafka logs ({name}, tails)", value.tail()))
