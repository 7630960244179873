"""The Docker image carries every tool: a wheel built from exactly the files docker/Dockerfile copies installs and
runs each console script the project declares.

No Docker daemon runs here, so the image's build step is replayed instead: the Dockerfile's COPY sources (relative
to the build context, the checkout) are copied into an empty directory, a wheel is built from that directory alone,
installed into a fresh venv (dependencies from the test venv through a .pth line, as tests/packaging/test_wheel.py
does) and every `[project.scripts]` entry is run with `--help`. A package missing from the COPY lines fails here
with the ModuleNotFoundError a user of the image would see.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from tests.helpers.broker_process import REPO

KAFKA_LIKE_TOOLS = {"shoal-share-groups", "shoal-transactions"}

pytestmark = pytest.mark.integration

DOCKERFILE = REPO / "docker" / "Dockerfile"


def copy_sources(dockerfile: Path) -> list[str]:
    """The build-context paths of the Dockerfile's COPY instructions (without --from: those come from other stages)."""
    sources: list[str] = []
    for line in dockerfile.read_text().splitlines():
        if line.split(maxsplit=1)[:1] != ["COPY"]:
            continue
        words = shlex.split(line, comments=True)
        args = [w for w in words[1:] if not w.startswith("--")]
        assert not any(w.startswith("--from") for w in words[1:]), line
        sources.extend(args[:-1])  # the last one is the destination
    return sources


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(cmd: list[str], cwd: Path) -> str:
    done = _run(cmd, cwd)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_copy_sources_parses_the_dockerfile() -> None:
    assert copy_sources(DOCKERFILE)[:2] == ["pyproject.toml", "README.md"]


def test_console_scripts_run_from_the_files_the_image_copies(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    for source in copy_sources(DOCKERFILE):
        origin = REPO / source
        assert origin.exists(), f"COPY {source}: not in the build context"
        if origin.is_dir():
            shutil.copytree(origin, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, context / source)
    dist = tmp_path / "dist"
    _ok([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(context)], tmp_path)
    (wheel,) = dist.glob("shoal-*.whl")
    venv = tmp_path / "venv"
    _ok([sys.executable, "-m", "venv", str(venv)], tmp_path)
    py = venv / "bin" / "python"
    site = Path(_ok([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path).strip())
    (site / "zz_test_venv_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _ok([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)], tmp_path)

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"shoal-broker", "shoal-share-groups", "shoal-transactions"} <= set(scripts)
    for name in scripts:
        done = _run([str(venv / "bin" / name), "--help"], tmp_path, timeout=60)
        # the tools mirroring Kafka's (kafka-share-groups, kafka-transactions) exit 1 after their help, as those do
        expected = 1 if name in KAFKA_LIKE_TOOLS else 0
        assert done.returncode == expected, f"{name} --help exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        assert "usage:" in (done.stdout + done.stderr).lower(), (name, done.stdout, done.stderr)
