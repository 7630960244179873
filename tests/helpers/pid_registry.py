"""Processes a test run started and must stop, recorded as files so any process of the run can stop them.

A Kafka JVM started by one pytest-xdist worker outlives it (the run shares it); the controller, or the watchdog
when the controller itself dies, stops what is still recorded here at the end. A process is named by its PID and
its start time, so a PID the kernel has since given to another process is never signalled.

Standard library only: the watchdog imports it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), None when there is no
    such process or it has exited (a zombie is gone for our purposes)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state is fields[0]
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def running(pid: int, started: int) -> bool:
    """Whether the process PID that started at `started` is still running."""
    return start_time(pid) == started


def register(directory: Path, pid: int, what: str) -> int:
    """Record a process just started; returns its start time."""
    started = start_time(pid)
    if started is None:
        raise RuntimeError(f"{what} (pid {pid}) exited at once")
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{pid}.tmp"
    tmp.write_text(json.dumps({"pid": pid, "start_time": started, "what": what}))
    tmp.replace(directory / f"{pid}.json")
    return started


def unregister(directory: Path, pid: int) -> None:
    (directory / f"{pid}.json").unlink(missing_ok=True)


def registered(directory: Path) -> list[dict]:
    entries = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else ():
        with contextlib.suppress(OSError, ValueError):
            entries.append(json.loads(path.read_text()))
    return entries


def terminate(pid: int, started: int, timeout: float) -> None:
    """SIGTERM the process, SIGKILL it if it has not exited within `timeout` s, and wait until it is gone.
    Reaps it when it is our own child."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        if not running(pid, started):
            break
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while running(pid, started) and time.monotonic() < deadline:
            time.sleep(0.05)
    _reap(pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def stop_all(directory: Path, timeout: float = 10.0) -> list[dict]:
    """Stop every process still recorded in `directory` and forget it; returns what was stopped."""
    entries = registered(directory)
    for entry in entries:  # SIGTERM them all first: their shutdowns overlap
        if running(entry["pid"], entry["start_time"]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(entry["pid"], signal.SIGTERM)
    for entry in entries:
        terminate(entry["pid"], entry["start_time"], timeout)
        unregister(directory, entry["pid"])
    return entries
