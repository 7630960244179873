"""Run a `[project.scripts]` console script of pyproject.toml as installed wrappers run it (its entry point's
function, with the script's name as argv[0]) in a subprocess of the test interpreter, without installing the
checkout into the venv: the entry point is read from pyproject.toml, so a script that is not declared fails."""

from __future__ import annotations

import json
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


# One interpreter running a console script's entry point once per command line, each with its own standard
# output and error (the streams are swapped under the script, which may have bound sys.stdout at import), its exit
# code where it exits: the imports are paid once, not per command line (~0.7 s each on the loaded test machine).
_BATCH = r"""
import io, json, sys, traceback
class Switch(io.TextIOBase):
    def __init__(self):
        self.target = io.StringIO()
    def write(self, text):
        return self.target.write(text)
    def isatty(self):
        return False
real, lines = sys.stdout, json.loads(sys.stdin.read())
out, err = Switch(), Switch()
sys.stdout, sys.stderr = out, err
name, module, func = sys.argv[1:4]
import importlib
entry = getattr(importlib.import_module(module), func)
results = []
for argv in lines:
    out.target, err.target = io.StringIO(), io.StringIO()
    sys.argv = [name, *argv]
    try:
        entry()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=err)
    except Exception:
        traceback.print_exc(file=err)
        code = 1
    results.append([code, out.target.getvalue(), err.target.getvalue()])
real.write(json.dumps(results))
"""


def run_script_batch(name: str, lines: list[list[str]], timeout: float = 300) -> list[subprocess.CompletedProcess]:
    """Console script `name` run with each of `lines` (its arguments), in one interpreter, in order: a
    CompletedProcess (args, returncode, stdout, stderr) for each."""
    module, func = entry_point(name)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", _BATCH, name, module, func], input=json.dumps(lines),
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)
    if done.returncode != 0:
        raise AssertionError(f"the {name} batch exited with {done.returncode}:\n{done.stderr[-4000:]}")
    return [subprocess.CompletedProcess([name, *argv], code, out, err)
            for argv, (code, out, err) in zip(lines, json.loads(done.stdout), strict=True)]
