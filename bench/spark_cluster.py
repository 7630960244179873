"""A Spark standalone cluster on loopback: a master and workers started from PySpark's own launch classes
(`pyspark/bin/spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`, the jars PySpark ships),
so that applications run with `--master spark://127.0.0.1:PORT` get executors in JVMs of their own (children of
the workers) with Python workers of their own. For bench/spark_queries.py and the tests' `spark_standalone`
fixture (tests/helpers/spark_standalone.py).

    cluster = SparkStandalone(tmp_dir, workers=2).start()
    cluster.master_url                  # "spark://127.0.0.1:PORT"
    cluster.state()                     # the master's JSON status (workers, applications)
    cluster.executors(app_id)           # {executor id: PID} of an application's running executor JVMs
    cluster.stop()                      # SIGTERM every daemon (a worker stops its executors), by PID

Executors import `shoal_spark` the way an installed package is imported: from their interpreter's path, nothing
shipped by Spark (no --py-files). The application picks the interpreter (PYSPARK_PYTHON: the venv's); the workers
put this checkout first on PYTHONPATH, so a git worktree's executors import its own code rather than the checkout
the venv's editable install points at.

Only loopback: the daemons bind and advertise 127.0.0.1, web UIs included, and the master's REST submission
server (a fixed port 6066 by default) is off. `on_spawn(pid, what)` and `on_exit(pid)` are told of every daemon
(the tests record them for their watchdog). Standard library only (and PySpark's location).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

MASTER, WORKER = "org.apache.spark.deploy.master.Master", "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandaloneError(RuntimeError):
    pass


Spawned = Callable[[int, str], None]  # (pid, what) of a daemon just started
Exited = Callable[[int], None]  # pid of a daemon stopped


class _Daemon:
    def __init__(self, what: str, argv: list[str], env: dict[str, str], log_path: Path,
                 on_exit: Exited | None) -> None:
        self.what, self.log_path, self.on_exit = what, log_path, on_exit
        with open(log_path, "wb") as log:  # a new log: the start is read from it
            # spark-class execs the JVM: the PID is the daemon's own. A session of its own keeps it out of the
            # caller's signals.
            self.proc = subprocess.Popen(argv, env=env, cwd=log_path.parent, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

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
        """SIGTERM (a worker stops its executors first), SIGKILL after `timeout` s; by PID, our own child."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.on_exit is not None:
            self.on_exit(self.pid)


class SparkStandalone:
    def __init__(self, root: Path, workers: int = 2, *, cores: int = 1, memory: str = "1g",
                 start_timeout: float = 180.0, on_spawn: Spawned | None = None,
                 on_exit: Exited | None = None) -> None:
        self.root = Path(root)
        self.worker_count, self.cores, self.memory = workers, cores, memory
        self.start_timeout = start_timeout
        self.on_spawn, self.on_exit = on_spawn, on_exit
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
        daemon = _Daemon(what, argv, self._env(**env), self.root / log_name, self.on_exit)
        if self.on_spawn is not None:
            self.on_spawn(daemon.pid, what)
        return daemon

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
        master = self.master = self._daemon(
            "Spark master", MASTER, ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"], "master.log",
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")

        def master_up() -> bool:
            self._check(master)
            url = master.find(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
            ui = master.find(r"MasterWebUI: Bound MasterWebUI to 127\.0\.0\.1, and started at (http://\S+)")
            if url and ui and "I have been elected leader" in master.log():
                self.master_url, self.webui_url = url, ui
                return True
            return False

        _wait(master_up, self.start_timeout, "the Spark master to start")
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

        _wait(workers_up, self.start_timeout, f"{self.worker_count} Spark workers to register")

    def _check(self, daemon: _Daemon) -> None:
        if not daemon.alive():
            raise SparkStandaloneError(f"the {daemon.what} exited ({daemon.proc.returncode}):\n"
                                       f"{daemon.log()[-3000:]}")

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=10) as resp:
            state: dict[str, Any] = json.load(resp)
        return state

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
            executor = _arg(args, "--executor-id")
            if ppid in workers and EXECUTOR_CLASS in args and _arg(args, "--app-id") == app_id and executor:
                found[int(executor)] = int(entry.name)
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


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise SparkStandaloneError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


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
