"""Stops a test run's Kafka processes when the pytest process controlling the run dies without doing it.

    python -m tests.helpers.kafka_watchdog RUN_DIR OWNER_PID OWNER_START_TIME

Started by tests/helpers/kafka_run.py with the run's first Kafka JVM. Once a second it checks: the run directory
gone means the owner finished the run itself (exit); the owner gone means it died (kill -9, pytest-timeout's
exit of a run without xdist), and then the watchdog stops every process recorded in RUN_DIR/procs by PID and
removes the directory. Standard library only, so it starts fast.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from tests.helpers import pid_registry


def main(argv: list[str]) -> int:
    directory, owner_pid, owner_started = Path(argv[0]), int(argv[1]), int(argv[2])
    while directory.exists():
        if not pid_registry.running(owner_pid, owner_started):
            stopped = pid_registry.stop_all(directory / "procs", timeout=10.0)
            print(f"owner {owner_pid} is gone; stopped {[e['pid'] for e in stopped]}", file=sys.stderr)
            shutil.rmtree(directory, ignore_errors=True)
            return 0
        time.sleep(1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
