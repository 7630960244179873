"""The package build: pure Python by default; `SHOAL_COMPILE=1` compiles the modules listed in pyproject.toml's
`[tool.shoal.mypyc] modules` with mypyc (black's way of shipping compiled modules).

Everything else (metadata, packages, package data) is in pyproject.toml. A compiled build holds an extension module
next to each listed module's source (Python imports the extension first) and one shared library of mypyc's
runtime (`<hash>__mypyc`, top level). `SHOAL_COMPILE_ONLY=path.py,...` compiles those paths instead of the list
(bench/compiled.py measures candidates one at a time with it). Which modules are listed, and why, is measured in
docs/performance.md ("Compiled modules"); `make test-compiled` builds and tests this path.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def compiled_modules() -> list[str]:
    """The source paths a compiled build compiles (relative to this directory)."""
    only = os.environ.get("SHOAL_COMPILE_ONLY")
    if only:
        return [p for p in only.split(",") if p]
    with open(HERE / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["tool"]["shoal"]["mypyc"]["modules"])


def _compile() -> bool:
    flag = os.environ.get("SHOAL_COMPILE", "0")
    if flag not in ("0", "1"):
        raise SystemExit(f"SHOAL_COMPILE must be 0 or 1, not {flag!r}")
    return flag == "1"


def _ext_modules() -> list:
    if not _compile():
        return []
    try:
        from mypyc.build import mypycify  # only the compiled build needs (and, below, requires) mypy
    except ImportError:
        # The build backend first runs `setup.py egg_info` to learn setup_requires (below), before mypy is
        # installed into an isolated build environment; any other step without mypyc fails loudly.
        if sys.argv[1:2] == ["egg_info"]:
            return []
        raise SystemExit("SHOAL_COMPILE=1: mypyc (mypy==2.4.1) is not installed in the build environment") from None

    # mypy reads [tool.mypy] from pyproject.toml; its overrides of modules not compiled here are not "unused"
    return mypycify(["--no-warn-unused-configs", *compiled_modules()], opt_level="3")


if __name__ == "__main__":
    setup(
        ext_modules=_ext_modules(),
        # setuptools' build backend installs these into an isolated build environment first: mypyc comes with
        # mypy, pinned as the [test] extra pins it
        setup_requires=["mypy==2.4.1"] if _compile() else [],
    )
