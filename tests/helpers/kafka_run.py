"""One Kafka per test run, shared by every pytest-xdist worker: who starts it, how the others find it, who stops it.

A run has a directory (its path chosen by the pytest process that controls the run and handed to the workers). The
first worker that needs the shared node `name` takes a file lock, formats and starts it, and writes its state
(ports, PID, start time) next to it; the others, under the same lock, read that state and use the same JVM. A
worker never stops it: the controlling process does, by PID, when the session ends (KafkaRun.finish), also after
a worker crashed. Every Kafka JVM of the run is recorded in `procs/` (pid_registry), and a watchdog process started
with the first of them stops them if the controlling process itself dies (kill -9, a pytest-timeout exit).
Nothing is created until a test asks for Kafka.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import kafka_dist, pid_registry
from tests.helpers.kafka_process import KafkaNode, KafkaStartError, start_single

# Where run directories go (default: the system's temporary directory); tests of this module point it elsewhere.
ROOT_ENV = "SHOAL_KAFKA_RUN_ROOT"


class KafkaRun:
    def __init__(self, directory: Path, owner_pid: int, owner_started: int) -> None:
        self.directory = Path(directory)
        self.owner_pid = owner_pid  # the controlling pytest process
        self.owner_started = owner_started

    @classmethod
    def new(cls) -> KafkaRun:
        """A run owned by this process; its directory is only named here, made by the first use."""
        root = Path(os.environ.get(ROOT_ENV) or tempfile.gettempdir())
        pid = os.getpid()
        return cls(root / f"shoal-kafka-{uuid.uuid4().hex[:12]}", pid, pid_registry.start_time(pid))

    def to_input(self) -> str:
        return json.dumps([str(self.directory), self.owner_pid, self.owner_started])

    @classmethod
    def from_input(cls, text: str) -> KafkaRun:
        directory, pid, started = json.loads(text)
        return cls(Path(directory), pid, started)

    @property
    def procs(self) -> Path:
        return self.directory / "procs"

    def shared(self, name: str, security: str = "PLAINTEXT") -> KafkaNode:
        """The run's single-node Kafka `name`, started by the first caller of the run, with `security`."""
        node_dir = self.directory / name
        with self._lock(name):
            state_path = node_dir / "state.json"
            failed_path = node_dir / "failed.txt"
            if failed_path.exists():  # started once and failed: every test needing it fails alike, at once
                raise KafkaStartError(f"the run's Kafka {name!r} failed to start:\n{failed_path.read_text()}")
            if state_path.exists():
                node = KafkaNode.from_state(json.loads(state_path.read_text()))
                if not node.alive():
                    raise KafkaStartError(f"the run's Kafka {name!r} (pid {node.pid}) is no longer running:\n"
                                          f"{node.tail()}")
                return node
            self.ensure_watchdog()
            try:
                node = start_single(node_dir / "node", security=security, registry=self.procs,
                                    label=f"the run's Kafka {name!r}")
            except Exception as exc:
                node_dir.mkdir(parents=True, exist_ok=True)
                failed_path.write_text(f"{type(exc).__name__}: {exc}")
                raise
            tmp = node_dir / "state.json.tmp"
            tmp.write_text(json.dumps(node.state()))
            tmp.replace(state_path)
            return node

    def finish(self, timeout: float = 15.0) -> list[dict]:
        """Stop every Kafka process of the run still running, by PID, and remove the run's directory. Returns
        what was stopped. Only the controlling process calls this; calling it again does nothing."""
        if not self.directory.exists():
            return []
        stopped = pid_registry.stop_all(self.procs, timeout)
        shutil.rmtree(self.directory, ignore_errors=True)  # the watchdog sees it gone and exits
        return stopped

    @contextlib.contextmanager
    def _lock(self, name: str) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / f"{name}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def ensure_watchdog(self) -> None:
        """Start the run's watchdog unless it runs already."""
        with self._lock("watchdog"):
            path = self.directory / "watchdog.json"
            if path.exists():
                entry = json.loads(path.read_text())
                if pid_registry.running(entry["pid"], entry["start_time"]):
                    return
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.kafka_watchdog", str(self.directory), str(self.owner_pid),
                 str(self.owner_started)],
                cwd=kafka_dist.REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(self.directory / "watchdog.log", "ab"), start_new_session=True)  # noqa: SIM115
            started = pid_registry.start_time(proc.pid)
            path.write_text(json.dumps({"pid": proc.pid, "start_time": started}))
