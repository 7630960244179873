"""A broker whose log directory lives on the power-loss file system, and power losses at seeded random moments.

    rig = PowerLossRig(tmp_path, rng, overrides={...})
    rig.start()                     # a broker on a fixed loopback port: clients reconnect across restarts
    rig.lose_power(traffic=...)     # crash point: the n-th next change to the file system (n random)
    rig.restart()                   # sometimes with one more loss in the middle of recovery
    rig.close()

The crash point of a loss is a random count of changes (writes, fsyncs, creates, renames, ...) ahead, with the
broker busy, so a loss can fall between a write and its fsync, or between a create and the directory fsync. A
loss is a SIGKILL of the broker's process group once the file system is frozen, then the file system drops what
was not fsynced ("drop") or keeps a random part of it ("torn"). Figures for the report are in `figures()`.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

from tests.helpers.broker_process import BrokerProcess, free_port, venv_python
from tests.helpers.confluent_clients import admin_client, create_topic
from tests.helpers.powerloss_mount import PowerLossMount
from tests.helpers.waiting import wait_until

# Changes a first start makes on the file system before it listens (~190 measured): the first range a crash
# point during start-up is drawn from. Later ranges are what the last start that got to listen made (a restart
# after a loss, recovering torn tails, makes ~80; one with nothing to recover none).
START_CHANGES = 190


class PowerLossRig:
    def __init__(self, tmp: Path, rng: random.Random, *, overrides: dict[str, str] | None = None,
                 start_timeout: float = 60.0) -> None:
        self.rng = rng
        self.fs = PowerLossMount(tmp / "backing", tmp / "disk", tmp / "fs.log").mount()
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        # The log directory is created by the broker on its first start, on the "disk" (the mount's root).
        self.broker = BrokerProcess(tmp / "disk" / "data", tmp / "broker.log", python=venv_python(),
                                    start_timeout=start_timeout,
                                    overrides={"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", **(overrides or {})})
        self.broker.port_file = tmp / "broker.port"  # off the mount: it is no broker data
        self.restarts = 0
        self.failed_restarts: list[str] = []
        self.recovery_losses = 0
        self.loss_times: list[float] = []  # time.monotonic() of each loss's crash point (an upper bound)
        self.start_changes = START_CHANGES
        self.topics: dict[str, int] = {}  # see create_topic

    # --- broker ------------------------------------------------------------------------------------------------
    def _spawn(self) -> None:
        self.broker.spawn()

    def _wait_started(self) -> None:
        end = time.monotonic() + self.broker.start_timeout
        while True:
            try:
                if self.broker.started():
                    return
            except RuntimeError as err:
                # The fixed port may still be held for a moment by the killed process's sockets.
                if "already in use" not in str(err).lower() or time.monotonic() > end:
                    raise
                self.broker.proc = None
                time.sleep(0.3)
                self._spawn()
                continue
            if time.monotonic() > end:
                raise TimeoutError(f"broker did not start within {self.broker.start_timeout}s:\n{self.broker.tail()}")
            time.sleep(0.02)

    def start(self) -> None:
        """Start the broker and wait until it listens; a failure is counted as a failed restart and raised."""
        self._spawn()
        try:
            self._wait_started()
        except (RuntimeError, TimeoutError) as err:
            self.failed_restarts.append(str(err)[-3000:])
            raise
        self.restarts += 1

    def restart(self, recovery_loss_chance: float = 0.0) -> None:
        """Start the broker after a loss; with `recovery_loss_chance`, first lose power once more at a random
        point of its start-up (recovery of the log the last loss left). Then the topics made with `create_topic`
        must all be there."""
        if self.rng.random() < recovery_loss_chance:
            self.lose_power_during_start()
        self.start()
        self.check_topics()

    def create_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        """Create a topic (acknowledged by the broker) that every restart must keep."""
        create_topic(self.bootstrap, name, partitions, config)
        self.topics[name] = partitions

    def check_topics(self) -> None:
        """Fail at once, saying what the log directory kept, if a topic made with `create_topic` is missing."""
        listed = admin_client(self.bootstrap).list_topics(timeout=20).topics
        missing = {name: n for name, n in self.topics.items()
                   if name not in listed or len(listed[name].partitions) != n}
        if missing:
            try:
                kept = sorted(os.listdir(self.broker.data_dir))
            except OSError as err:
                kept = [repr(err)]
            raise AssertionError(f"after power loss {len(self.fs.losses)}: acknowledged topics {missing} missing; "
                                 f"the log directory kept {kept[:40]}")

    def lose_power_during_start(self, on_started: Callable[[], None] | None = None) -> bool:
        """Spawn the broker, lose power at a random change of its start-up; True if it fell before the broker
        listened. Else the broker had started: `on_started` is called, then power is lost."""
        before = self.fs.stats()["ops"]
        self.fs.arm(self.rng.randint(1, self.start_changes))
        self._spawn()

        def frozen_or_started() -> bool:
            return self.fs.frozen() or self.broker.started()

        try:
            wait_until(frozen_or_started, self.broker.start_timeout, "a crash point during start-up")
        except RuntimeError as err:  # the broker exited: its start-up failed
            self.failed_restarts.append(str(err)[-3000:])
            raise
        during = self.fs.frozen()
        if not during and (made := self.fs.stats()["ops"] - before) > 0:
            self.start_changes = made
        if not during and on_started is not None:
            self.fs.arm(0)  # the client's look must not be frozen halfway
            on_started()
        self._lose()
        self.recovery_losses += 1
        return during

    # --- power loss --------------------------------------------------------------------------------------------
    def lose_power(self, changes: tuple[int, int] = (1, 200), wait_s: float = 15.0,
                   traffic: Callable[[], None] | None = None) -> dict:
        """Lose power at the n-th next change, n drawn from `changes` (or after `wait_s` if the broker makes
        fewer). `traffic` is called while waiting (e.g. to keep clients busy), and must return quickly."""
        self.fs.arm(self.rng.randint(*changes))
        end = time.monotonic() + wait_s
        while not self.fs.frozen() and time.monotonic() < end:
            if traffic is not None:
                traffic()
            time.sleep(0.02)
        return self._lose()

    def _lose(self) -> dict:
        mode = self.rng.choice(["drop", "torn"])
        self.loss_times.append(time.monotonic())
        return self.fs.power_loss(mode, self.rng.randrange(1 << 30),
                                  kill=lambda: self.broker.kill9_group(wait=False), reap=self.broker.reap_group)

    def close(self) -> None:
        self.broker.kill9_group(wait=False)
        self.fs.unmount()  # a broker blocked in the (maybe frozen) file system dies once it is gone
        with contextlib.suppress(Exception):
            self.broker.reap_group()

    def figures(self) -> dict:
        return {**self.fs.summary(), "recovery_losses": self.recovery_losses, "restarts": self.restarts,
                "failed_restarts": len(self.failed_restarts)}
