"""Run a real broker process for tests: `python -m broker` on an ephemeral loopback port.

    proc = BrokerProcess(data_dir, log_path)
    proc.start()            # waits for the port file
    proc.bootstrap          # "127.0.0.1:PORT"
    proc.restart()          # SIGTERM, then start again on the same data dir (the port may change)
    proc.kill9()            # SIGKILL, no clean shutdown
    proc.kill9_group()      # SIGKILL the broker and the processes it started, at once
    proc.spawn(); proc.wait_started()   # start() in two steps, for a test that acts during start-up
    proc.stop()             # SIGTERM, wait, SIGKILL fallback; returns the exit code

Only the process started here is ever signalled, by its PID.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


VENV_PYTHON = REPO / ".venv" / "bin" / "python"


def venv_python() -> str:
    """The repository venv's interpreter (`make install` makes it), else the one running the tests."""
    return str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable


class BrokerProcess:
    def __init__(self, data_dir: Path, log_path: Path, *, overrides: dict[str, str] | None = None,
                 start_timeout: float = 30.0, python: str | None = None, program: list[str] | None = None,
                 cwd: Path | None = None, max_open_files: int | None = None,
                 extra_args: list[str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.port_file = self.data_dir.parent / f"{self.data_dir.name}.port"
        self.overrides = dict(overrides or {})
        self.start_timeout = start_timeout
        self.python = python or sys.executable
        self.max_open_files = max_open_files  # RLIMIT_NOFILE (soft and hard) of the broker process, if set
        # What to run instead of `python -m broker` (e.g. an installed `shoal-broker` script) and where.
        self.program = program
        self.cwd = cwd or REPO
        self.extra_args = list(extra_args or ())  # e.g. ["--add-scram", "SCRAM-SHA-512=[name=admin,password=x]"]
        self.port: int | None = None
        self.ports: dict[str, int] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.returncodes: list[int] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def command(self) -> list[str]:
        props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.data_dir), **self.overrides}
        cmd = list(self.program or [self.python, "-m", "broker"])
        cmd += ["--port-file", str(self.port_file), "--log-format", "json"]
        for key, value in props.items():
            cmd += ["--override", f"{key}={value}"]
        cmd += self.extra_args
        return cmd

    def start(self) -> BrokerProcess:
        self.spawn()
        return self.wait_started()

    def spawn(self) -> None:
        """Start the process without waiting for it to listen (`wait_started` waits)."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("broker already running")
        self.port_file.unlink(missing_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.setdefault("SHOAL_LOG_LEVEL", "info")
        with open(self.log_path, "ab") as out:
            out.write(f"--- start: {' '.join(self.command())}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(self.command(), cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True, preexec_fn=self._limits())

    def _running(self) -> subprocess.Popen[bytes]:
        if self.proc is None:
            raise RuntimeError("the broker process is not started")
        return self.proc

    def started(self) -> bool:
        """True once the spawned process wrote its port file (its listeners are open); raises if it exited."""
        proc = self._running()
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} during start-up:\n{self.tail()}")
        try:
            text = self.port_file.read_text().strip()
        except FileNotFoundError:
            text = ""
        if not text:
            return False
        first, *others = text.splitlines()
        self.port = int(first)
        # "NAME PORT" per listener (PLAINTEXT, SASL_SSL, ...), for brokers with several listeners.
        self.ports = {name: int(port) for name, port in (line.split() for line in others)}
        return True

    def wait_started(self) -> BrokerProcess:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.started():
                return self
            time.sleep(0.02)
        self.kill9()
        raise TimeoutError(f"broker did not write {self.port_file} within {self.start_timeout}s:\n{self.tail()}")

    def _limits(self):
        limit = self.max_open_files
        if limit is None:
            return None

        def apply() -> None:  # runs in the child between fork and exec
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        return apply

    def open_files(self) -> int:
        """Descriptors the broker process holds open now."""
        return len(os.listdir(f"/proc/{self._running().pid}/fd"))

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.returncodes.append(proc.returncode)
        self.proc = None
        return proc.returncode

    def kill9(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        self.returncodes.append(proc.returncode)
        self.proc = None

    def kill9_group(self, timeout: float = 10.0, *, wait: bool = True) -> None:
        """SIGKILL the broker and every process it started (its session's group: the log cleaner's worker) at
        once and, with `wait`, wait until none of them runs (else call `reap_group`: a process blocked in a
        file system that does not answer dies only once that file system goes away)."""
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if wait:
            self.reap_group(timeout)

    def reap_group(self, timeout: float = 10.0) -> None:
        """Wait until the killed broker and the processes it started are gone."""
        proc = self.proc
        if proc is None:
            return
        proc.wait(timeout)
        deadline = time.monotonic() + timeout
        while _group_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.returncodes.append(proc.returncode)
        self.proc = None

    def restart(self) -> BrokerProcess:
        if self.proc is not None:
            self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no broker log)"
        return "\n".join(text.splitlines()[-lines:])



def start_broker(tmp: Path, overrides: dict[str, str] | None = None,
                 extra_args: list[str] | None = None) -> BrokerProcess:
    """A started broker process with its data and log under `tmp` (the tests' usual layout); stop it by its PID
    with `.stop()`."""
    return BrokerProcess(tmp / "data", tmp / "broker.log", overrides=overrides, python=venv_python(),
                         extra_args=extra_args).start()

def _group_members(pgid: int) -> list[int]:
    """Processes of group `pgid` still running (not zombies)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def free_port() -> int:
    """A port free now, for a broker that must come back on the same port after a restart. It is taken below the
    kernel's ephemeral range: a port from bind(("127.0.0.1", 0)) may be handed, while the broker is down, to any
    process's outgoing connection or ephemeral listener (other xdist workers run clients and brokers too)."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12_000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def restart(broker: BrokerProcess, how: str) -> None:
    """Stop the broker by `how` ("kill9", or a clean SIGTERM stop that must exit 0) and start it again."""
    if how == "kill9":
        broker.kill9()
    else:
        assert broker.stop() == 0  # SIGTERM: a clean shutdown
    broker.start()
