"""CPU time and resident memory of a server's process tree, read from /proc (Linux).

A server may start helper processes (Shoal's log cleaner); its figures are those of the process and every live
descendant, plus the CPU time of descendants that have exited and were reaped (cutime/cstime of the root)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat_fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()  # fields from `state` on: fields[0] is field 3 of proc(5)


def tree(pid: int) -> list[int]:
    """`pid` and its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                children.setdefault(int(_stat_fields(int(entry))[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def cpu_seconds(pid: int) -> float:
    """CPU seconds of the tree: each live thread's time on a CPU (/proc/<pid>/task/<tid>/schedstat, in ns, finer
    than the 10 ms ticks of /proc/<pid>/stat), plus the ticks of descendants that exited and were reaped
    (cutime + cstime of the root)."""
    ns = 0
    ticks = 0
    for p in tree(pid):
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    ns += int(Path(f"/proc/{p}/task/{tid}/schedstat").read_text().split()[0])
        if p == pid:
            with contextlib.suppress(OSError, ValueError, IndexError):
                f = _stat_fields(p)
                ticks += int(f[13]) + int(f[14])  # cutime, cstime
    return ns / 1e9 + ticks / TICK


def rss_mib(pid: int) -> float:
    """Resident memory of the tree in MiB (the sum over its processes: shared pages count once per process)."""
    pages = 0
    for p in tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            pages += int(Path(f"/proc/{p}/statm").read_text().split()[1])
    return pages * PAGE / 2**20
