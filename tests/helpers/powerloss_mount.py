"""Drive the power-loss file system (tests/helpers/powerloss_fs.py) from a test.

    fs = PowerLossMount(tmp / "backing", tmp / "mnt", tmp / "fs.log").mount()
    ... a broker with log.dirs under fs.mountpoint ...
    fs.arm(n)                       # optional: the crash point is the n-th next change (wait for fs.frozen())
    fs.power_loss("drop", kill=lambda: broker.kill9_group(wait=False), reap=broker.reap_group)
                                    # or "torn": part of the unsynced persists; then mounted afresh
    fs.unmount()

A power loss ends the file system's process at a point between two requests, unmounts the dead mount and mounts
the durable image again (a new process, so the kernel's caches of the old mount are gone too). Each loss's
figures (files, bytes and directory changes not fsynced; what a torn loss kept) are in `losses`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.helpers.broker_process import REPO, venv_python
from tests.helpers.waiting import wait_until


def fuse_available() -> str | None:
    """Why FUSE cannot be used here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None:
        return "no fusermount3 (Debian's fuse3: make install)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as err:  # OSError: libfuse itself is missing
        return f"mfusepy cannot load libfuse: {err!r}"
    return None


def is_mounted(path: Path) -> bool:
    """A file system is mounted on `path`, answering or not (os.path.ismount is False for a mount whose FUSE
    process is gone: stat fails there)."""
    target = str(Path(path).resolve()).replace(" ", "\\040")
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


class PowerLossMount:
    def __init__(self, backing: Path, mountpoint: Path, log_path: Path) -> None:
        self.backing = Path(backing)
        self.mountpoint = Path(mountpoint)
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.losses: list[dict] = []

    def mount(self) -> PowerLossMount:
        if self.proc is not None:
            raise RuntimeError("already mounted")
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen([venv_python(), "-m", "tests.helpers.powerloss_fs", str(self.backing),
                                          str(self.mountpoint)], cwd=REPO, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)

        def mounted() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the power-loss file system exited with {self.proc.returncode}: "
                                   f"{self.log_path.read_text(errors='replace')[-2000:]}")
            return is_mounted(self.mountpoint)

        wait_until(mounted, 30, f"the power-loss file system on {self.mountpoint}")
        return self

    def _ask(self, command: str) -> dict:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the power-loss file system gave no answer to {command!r}")
        return json.loads(line)

    def stats(self) -> dict:
        """What is not fsynced now, whether it is frozen, and the changes made since it was mounted (`ops`)."""
        return self._ask("stats")

    def arm(self, changes: int) -> None:
        """Freeze before the `changes`-th next change to the file system: the crash point of the next loss (0
        disarms)."""
        self._ask(f"arm {changes}")

    def frozen(self) -> bool:
        return bool(self.stats()["frozen"])

    def power_loss(self, mode: str = "drop", seed: int = 0, *, kill: Callable[[], None] | None = None,
                   reap: Callable[[], None] | None = None) -> dict:
        """Lose what was not fsynced (`mode` "drop"), or keep a random part of it ("torn", chosen by `seed`);
        then mount the durable image again. `kill` signals every process writing to the mount: it is called once
        the file system is frozen (if it was not already), so nothing changes between the crash point and the
        loss. A killed process blocked in a request the frozen file system holds dies only when the file system
        process exits: `reap` waits for them after that."""
        assert mode in ("drop", "torn"), mode
        if kill is not None:
            self.arm(1)  # a no-op when already frozen: nothing changes from here on
            kill()
        answer = self._ask(f"crash {mode} {seed}")
        self.proc.wait(30)
        self.proc = None
        if reap is not None:
            reap()
        self._unmount_dead()
        self.losses.append(answer)
        self.mount()
        return answer

    def _unmount_dead(self) -> None:
        subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=False, capture_output=True)
        wait_until(lambda: not is_mounted(self.mountpoint), 30, f"{self.mountpoint} unmounted")

    def unmount(self) -> None:
        """Unmount and end the process (nothing pending is kept). Safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                assert proc.stdin is not None
                proc.stdin.close()  # end of commands: the process unmounts itself
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            for stream in (proc.stdout,):
                if stream is not None:
                    stream.close()
        if is_mounted(self.mountpoint):
            self._unmount_dead()

    def summary(self) -> dict:
        """The losses' figures added up: how many, and what they dropped."""
        total = {"losses": len(self.losses), "torn": sum(1 for loss in self.losses if loss["mode"] == "torn")}
        for key in ("files", "bytes", "dir_changes", "kept_bytes", "zeroed_writes", "kept_dir_changes"):
            total[key] = sum(loss[key] for loss in self.losses)
        return total

    def __enter__(self) -> PowerLossMount:
        return self.mount()

    def __exit__(self, *exc) -> None:
        self.unmount()

