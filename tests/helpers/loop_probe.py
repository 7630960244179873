"""Another client's view of the broker's event loop: ApiVersions round trips from a connection of their own, every
few milliseconds, in a thread, so a test can tell how long the broker kept everyone else waiting while it served
something heavy; and the stalls the broker's own loop-lag watchdog logged.

On a loaded two-core machine a round trip can be slow because the broker waited for a CPU, not because its loop was
busy. With the broker's pid, each round trip also records how much CPU the broker's event-loop thread (the main
thread: its tid is the pid) used meanwhile (`/proc/<pid>/task/<pid>/schedstat`, nanoseconds): a callback that
holds the loop for 100 ms while a ping waits makes that thread run for 100 ms during the ping."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

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
            cpu = self._cpu()
            sent = time.monotonic()
            try:
                self.client.call(API_VERSIONS, 3, body)
            except Exception as err:  # noqa: BLE001 - reported through `failures`
                self.failures.append(repr(err))
                return
            self.samples.append((sent, time.monotonic() - sent))
            self.loop_cpu.append((sent, self._cpu() - cpu))
            self._halt.wait(self.interval_s)

    def _cpu(self) -> float:
        if self._schedstat is None:
            return 0.0
        try:
            return int(self._schedstat.read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            return 0.0

    def worst_loop_cpu_ms(self, since: float = 0.0) -> float:
        """The most CPU (ms) the broker's loop thread used during one round trip sent at or after `since`."""
        return max((cpu for sent, cpu in self.loop_cpu if sent >= since), default=0.0) * 1000

    def worst_ms(self, since: float = 0.0) -> float:
        """The longest round trip (ms) of the pings sent at or after `since` (monotonic)."""
        return max((rtt for sent, rtt in self.samples if sent >= since), default=0.0) * 1000

    def count(self, since: float = 0.0) -> int:
        return sum(1 for sent, _ in self.samples if sent >= since)


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
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return {float(s.labels["le"]): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "shoal_event_loop_lag_seconds_bucket"}


def lags_over(histogram: dict[float, float], bound_s: float) -> float:
    """How many loop wake-ups of `histogram` were later than `bound_s` (a bucket bound)."""
    return histogram[float("inf")] - histogram[bound_s]
