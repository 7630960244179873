"""Another client's view of the broker's event loop: ApiVersions round trips from a connection of their own, every
few milliseconds, in a thread, so a test can tell how long the broker kept everyone else waiting while it served
something heavy; and the stalls the broker's own loop-lag watchdog logged.

On a loaded two-core machine a round trip can be slow because the broker waited for a CPU, not because its loop was
busy. With the broker's pid, each round trip also records how much CPU the broker's event-loop thread (the main
thread: its tid is the pid) used meanwhile (`/proc/<pid>/task/<pid>/schedstat`, nanoseconds): a callback that
holds the loop for 100 ms while a ping waits makes that thread run for 100 ms during the ping. It also records how
long that thread and the threads of the probe's own process (the probe waits for their GIL) sat runnable in a
CPU's queue meanwhile (the same files' second field), so that what is left of a round trip is time nobody waited for
a CPU: a loop thread blocked without running."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from tests.helpers import prometheus_scrape
from tests.helpers.raw_client import RawClient

API_VERSIONS = 18


class PingProbe(threading.Thread):
    """ApiVersions v3 round trips every `interval_s`; `samples` holds (sent at, round trip seconds)."""

    def __init__(self, port: int, interval_s: float = 0.005, pid: int | None = None) -> None:
        super().__init__(name="ping-probe", daemon=True)
        self.client = RawClient(port, "ping-probe")
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self.loop_cpu: list[tuple[float, float]] = []  # (sent at, CPU seconds of the broker's loop thread meanwhile)
        # (sent at, round trip less the seconds the loop thread and this process's threads waited in a run queue)
        self.unqueued: list[tuple[float, float]] = []
        self._schedstat = Path(f"/proc/{pid}/task/{pid}/schedstat") if pid is not None else None
        self.failures: list[str] = []
        self._halt = threading.Event()

    def __enter__(self) -> PingProbe:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self._halt.set()
        self.join(timeout=60)
        self.client.close()

    def run(self) -> None:
        body = {"client_software_name": "ping-probe", "client_software_version": "1"}
        while not self._halt.is_set():
            cpu, queued = _schedstat(self._schedstat)
            own_queued = _own_queued()
            sent = time.monotonic()
            try:
                self.client.call(API_VERSIONS, 3, body)
            except Exception as err:  # noqa: BLE001 - reported through `failures`
                self.failures.append(repr(err))
                return
            rtt = time.monotonic() - sent
            cpu_after, queued_after = _schedstat(self._schedstat)
            own_queued_after = _own_queued()
            self.samples.append((sent, rtt))
            self.loop_cpu.append((sent, cpu_after - cpu))
            self.unqueued.append((sent, rtt - (queued_after - queued) - (own_queued_after - own_queued)))
            self._halt.wait(self.interval_s)

    def worst_loop_cpu_ms(self, since: float = 0.0) -> float:
        """The most CPU (ms) the broker's loop thread used during one round trip sent at or after `since`."""
        return max((cpu for sent, cpu in self.loop_cpu if sent >= since), default=0.0) * 1000

    def worst_unqueued_ms(self, since: float = 0.0) -> float:
        """The longest round trip (ms) sent at or after `since`, less what the broker's loop thread and the probe
        process's threads waited for a CPU during it."""
        return max((rest for sent, rest in self.unqueued if sent >= since), default=0.0) * 1000

    def worst_ms(self, since: float = 0.0) -> float:
        """The longest round trip (ms) of the pings sent at or after `since` (monotonic)."""
        return max((rtt for sent, rtt in self.samples if sent >= since), default=0.0) * 1000

    def count(self, since: float = 0.0) -> int:
        return sum(1 for sent, _ in self.samples if sent >= since)


def _schedstat(path: Path | None) -> tuple[float, float]:
    """A thread's (CPU seconds, seconds runnable in a run queue) from its schedstat file; zeros without one."""
    if path is None:
        return 0.0, 0.0
    try:
        fields = path.read_text().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0


def _own_queued() -> float:
    """Seconds the threads of this process have sat runnable in a run queue (threads that ended are not counted,
    so the difference of two readings can only err towards less)."""
    total = 0.0
    for task in Path("/proc/self/task").iterdir():
        total += _schedstat(task / "schedstat")[1]
    return total


def logged_stalls_ms(log_path: Path, after_line: int = 0) -> list[float]:
    """The lag (ms) of every "event loop stalled" line the broker logged (JSON log) after line `after_line`,
    the worst a quiet period hid included."""
    out: list[float] = []
    with open(log_path, errors="replace") as f:
        for number, line in enumerate(f):
            if number < after_line or "event loop stalled" not in line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            out.append(float(entry.get("lag_ms", 0.0)))
            if entry.get("worst_since_last_warning_ms"):
                out.append(float(entry["worst_since_last_warning_ms"]))
    return out


def log_lines(log_path: Path) -> int:
    with open(log_path, errors="replace") as f:
        return sum(1 for _ in f)


def lag_histogram(metrics_port: int) -> dict[float, float]:
    """The broker's `shoal_event_loop_lag_seconds` histogram: upper bound -> cumulative count (Prometheus)."""
    return {float(s.labels["le"]): s.value for family in prometheus_scrape.families(metrics_port)
            for s in family.samples if s.name == "shoal_event_loop_lag_seconds_bucket"}


def lags_over(histogram: dict[float, float], bound_s: float) -> float:
    """How many loop wake-ups of `histogram` were later than `bound_s` (a bucket bound)."""
    return histogram[float("inf")] - histogram[bound_s]
