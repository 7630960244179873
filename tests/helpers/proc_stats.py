"""Memory and descriptor figures of a process from /proc (Linux), for tests that bound a broker's resources."""

from __future__ import annotations

import os


def status_kib(pid: int, field: str) -> int:
    """A `/proc/<pid>/status` figure in KiB (VmRSS: resident now, VmHWM: peak resident)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def rss_mib(pid: int) -> float:
    return status_kib(pid, "VmRSS") / 1024


def peak_rss_mib(pid: int) -> float:
    return status_kib(pid, "VmHWM") / 1024


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def open_sockets(pid: int) -> int:
    """Descriptors of /proc/<pid>/fd that are sockets (listeners and connections)."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                count += 1
        except OSError:
            continue
    return count
