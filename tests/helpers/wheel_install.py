"""Shoal as users install it, for the packaging tests: a wheel built from a copy of the checkout and installed into
a fresh venv outside it (the venv sees the test environment's dependencies through a .pth file, so nothing is
downloaded but what pip's isolated build environment needs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.helpers.broker_process import REPO, BrokerProcess

# What a copy of the checkout leaves out: state, caches, builds and compiled extension modules.
IGNORE = shutil.ignore_patterns(".git", ".venv", "data", "build", "dist", "*.egg-info", "__pycache__", "*.so",
                                ".pytest_cache", ".ruff_cache", ".hypothesis", "results", "test-artifacts", ".tools",
                                ".mypy_cache")


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    """Run `cmd` without the test run's PYTHONPATH/PYTHONHOME (plus `env`); its stdout, asserting success."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(cmd, cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout[-5000:]}\n{done.stderr[-5000:]}"
    return done.stdout


def wheel_in_venv(tmp: Path, build_env: dict[str, str] | None = None) -> tuple[Path, Path]:
    """(wheel, venv): the wheel built (with `build_env`, e.g. SHOAL_COMPILE=1) from a copy of the checkout in
    `tmp`, installed into a fresh venv there."""
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=IGNORE)
    dist = tmp / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(src)], cwd=tmp,
        env=build_env)
    (wheel,) = dist.glob("shoal-*.whl")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp)
    py = venv / "bin" / "python"
    site = Path(run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp).strip())
    (site / "zz_test_venv_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)], cwd=tmp)
    return wheel, venv


def installed_broker(venv: Path, tmp: Path, overrides: dict[str, str] | None = None) -> BrokerProcess:
    """A broker process (not started) run by the venv's `shoal-broker` script from a directory outside the
    checkout, its data there and its log in `tmp`."""
    work = tmp / "elsewhere"
    work.mkdir()
    return BrokerProcess(work / "data", tmp / "broker.log", program=[str(venv / "bin" / "shoal-broker")], cwd=work,
                         overrides=overrides)
