"""kcat (librdkafka's command-line client) run as a subprocess; the tests use the Debian package."""

from __future__ import annotations

import shutil
import subprocess


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    path = shutil.which("kcat")
    assert path, "kcat is not installed; `make install` installs it from Debian"
    return subprocess.run([path, *args], input=stdin, capture_output=True, timeout=timeout, check=False)
