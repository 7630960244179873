"""Run a `[project.scripts]` console script of pyproject.toml as installed wrappers run it (its entry point's
function, with the script's name as argv[0]) in a subprocess of the test interpreter, without installing the
checkout into the venv: the entry point is read from pyproject.toml, so a script that is not declared fails."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

from tests.helpers.broker_process import REPO


def entry_point(name: str) -> tuple[str, str]:
    """(module, function) of console script `name`."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = scripts[name].partition(":")
    return module, func


def run_script(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    module, func = entry_point(name)
    code = f"import sys; sys.argv[0] = {name!r}; from {module} import {func}; sys.exit({func}())"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env=env)
