"""A Spark standalone cluster on loopback: a master and workers started from PySpark's own launch classes
(`pyspark/bin/spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`, the jars PySpark ships),
so that applications run with `--master spark://127.0.0.1:PORT` get executors in JVMs of their own (children of
the workers) with Python workers of their own.

    cluster = SparkStandalone(tmp_dir, workers=2).start()
    cluster.master_url                  # "spark://127.0.0.1:PORT"
    cluster.state()                     # the master's JSON status (workers, applications)
    cluster.executors(app_id)           # {executor id: PID} of an application's running executor JVMs
    cluster.stop()                      # SIGTERM every daemon (a worker stops its executors), by PID

Executors import `shoal_spark` the way an installed package is imported: from their interpreter's path, nothing
shipped by Spark (no --py-files). The application picks the interpreter (PYSPARK_PYTHON: the venv's); the workers
put this checkout first on PYTHONPATH, so a worktree's executors import its own code rather than the checkout
the venv's editable install points at.

Only loopback: the daemons bind and advertise 127.0.0.1, web UIs included, and the master's REST submission
server (a fixed port 6066 by default) is off. Every daemon is recorded in `registry` (tests/helpers/pid_registry)
so the run's watchdog stops it if pytest dies.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import pid_registry
from tests.helpers.broker_process import REPO
from tests.helpers.waiting import wait_until

MASTER, WORKER = "org.apache.spark.deploy.master.Master", "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandaloneError(RuntimeError):
    pass


class _Daemon:
    def __init__(self, what: str, argv: list[str], env: dict[str, str], log_path: Path, registry: Path | None):
        self.what, self.log_path, self.registry = what, log_path, registry
        with open(log_path, "ab") as log:
            # spark-class execs the JVM: the PID is the daemon's own. A session of its own keeps it out of the
            # test's signals.
            self.proc = subprocess.Popen(argv, env=env, cwd=log_path.parent, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.started = pid_registry.start_time(self.proc.pid)
        if registry is not None and self.started is not None:
            pid_registry.register(registry, self.proc.pid, what)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def find(self, pattern: str) -> str | None:
        m = re.search(pattern, self.log())
        return m.group(1) if m else None

    def stop(self, timeout: float = 30.0) -> None:
        if self.started is not None:
            pid_registry.terminate(self.pid, self.started, timeout)
        self.proc.wait(10)
        if self.registry is not None:
            pid_registry.unregister(self.registry, self.pid)


class SparkStandalone:
    def __init__(self, root: Path, workers: int = 2, *, cores: int = 1, memory: str = "1g",
                 registry: Path | None = None, start_timeout: float = 180.0) -> None:
        self.root = Path(root)
        self.worker_count, self.cores, self.memory = workers, cores, memory
        self.registry, self.start_timeout = registry, start_timeout
        self.master: _Daemon | None = None
        self.workers: list[_Daemon] = []
        self.master_url = ""
        self.webui_url = ""

    def _env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_PUBLIC_DNS="127.0.0.1",
                   SPARK_DAEMON_MEMORY="256m", SPARK_CONF_DIR=str(self.root / "conf"), **extra)
        return env

    def _daemon(self, what: str, cls: str, args: list[str], log_name: str, **env: str) -> _Daemon:
        argv = [str(spark_home() / "bin" / "spark-class"), cls, *args]
        return _Daemon(what, argv, self._env(**env), self.root / log_name, self.registry)

    def start(self) -> SparkStandalone:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "conf").mkdir(exist_ok=True)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self.master = self._daemon("Spark master", MASTER, ["--host", "127.0.0.1", "--port", "0", "--webui-port",
                                                            "0"], "master.log",
                                   SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")

        def master_up() -> bool:
            self._check(self.master)
            url = self.master.find(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
            ui = self.master.find(r"MasterWebUI: Bound MasterWebUI to 127\.0\.0\.1, and started at (http://\S+)")
            if url and ui and "I have been elected leader" in self.master.log():
                self.master_url, self.webui_url = url, ui
                return True
            return False

        wait_until(master_up, self.start_timeout, "the Spark master to start", interval=0.2)
        for i in range(self.worker_count):
            work = self.root / f"worker{i + 1}"
            work.mkdir(exist_ok=True)
            self.workers.append(self._daemon(
                f"Spark worker {i + 1}", WORKER,
                [self.master_url, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores",
                 str(self.cores), "--memory", self.memory, "--work-dir", str(work)], f"worker{i + 1}.log",
                PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])))

        def workers_up() -> bool:
            for w in self.workers:
                self._check(w)
            return self.state().get("aliveworkers") == self.worker_count

        wait_until(workers_up, self.start_timeout, f"{self.worker_count} Spark workers to register", interval=0.2)

    def _check(self, daemon: _Daemon) -> None:
        if not daemon.alive():
            raise SparkStandaloneError(f"the {daemon.what} exited ({daemon.proc.returncode}):\n"
                                       f"{daemon.log()[-3000:]}")

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=10) as resp:
            return json.load(resp)

    def apps(self) -> list[dict]:
        """The master's running applications (id, name, cores, state)."""
        return self.state().get("activeapps", [])

    def executors(self, app_id: str) -> dict[int, int]:
        """{executor id: PID} of `app_id`'s executor JVMs that run now: the workers' child processes running
        CoarseGrainedExecutorBackend for that application."""
        workers = {w.pid for w in self.workers if w.alive()}
        found: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            args = [a.decode(errors="replace") for a in argv]
            if ppid in workers and EXECUTOR_CLASS in args and _arg(args, "--app-id") == app_id:
                found[int(_arg(args, "--executor-id"))] = int(entry.name)
        return found

    def logs(self) -> str:
        """The tails of every daemon's log and of the executors' stderr, for a failing test's report."""
        parts = [f"--- {d.what} ({d.log_path})\n{d.log()[-3000:]}" for d in [self.master, *self.workers] if d]
        for stderr in sorted(self.root.glob("worker*/app-*/*/stderr"))[-4:]:
            parts.append(f"--- {stderr}\n{stderr.read_text(errors='replace')[-2000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Workers first (each stops its executors), then the master."""
        for daemon in [*self.workers, self.master]:
            if daemon is not None:
                daemon.stop()
        self.workers = []
        self.master = None


def _arg(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args[:-1] else None


def descendants(pid: int) -> list[int]:
    """PIDs of the processes below `pid` (children first), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            out.append(child)
            todo.append(child)
    return out


# ---------------------------------------------------------------------------------------------- pytest fixture
# (a plugin: tests/conftest.py lists this module in pytest_plugins)

_RUNNING: list[SparkStandalone] = []  # the test process's cluster while it runs, for failing tests' reports


@pytest.fixture(scope="session")
def spark_standalone(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A master and two workers (1 core, 1 GiB each) for the tests that ask, started once per test process (all
    Spark tests share one xdist worker) and stopped at its end; the run's watchdog stops them if pytest dies.
    An application takes both cores (`tests/spark/conftest.py new_session`): one at a time."""
    from tests.helpers.kafka_fixtures import run_of

    run = run_of(request.config)
    run.ensure_watchdog()
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), 2, registry=run.procs).start()
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
