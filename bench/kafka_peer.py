"""Apache Kafka 4.4 as the bench's peer: one KRaft node (broker and controller in one JVM) on loopback ports,
from the jars `make kafka` installs (bench/kafka_dist.py), started as Kafka's own scripts would start it.

Settings are Kafka's defaults except what one node needs in place of the defaults made for three brokers
(SINGLE_NODE_CONFIG: internal topics with one replica) and share groups, enabled by the `share.version` feature
the storage tool writes when formatting (FEATURES); `group.share.*` stay at Kafka's defaults. The JVM gets
kafka-server-start.sh's heap (1 GiB) and kafka-run-class.sh's G1 options. tests/helpers/kafka_process.py, the
tests' referee, shares the single-node settings, the features and the cluster id format from here.

    peer = KafkaPeer(root, {"log.flush.interval.messages": "1"})
    peer.format(); peer.start(); peer.wait_ready()  # peer.bootstrap, peer.pid
    peer.stop()                                     # SIGTERM by PID, SIGKILL after a timeout
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from bench import kafka_dist

# What a lone node needs in place of the defaults made for three brokers.
SINGLE_NODE_CONFIG: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}

# The features the storage tool writes into the bootstrap metadata (4.4's defaults include them; explicit so that
# share groups are on whatever the default becomes).
FEATURES = ("share.version=2",)

# kafka-server-start.sh's KAFKA_HEAP_OPTS and kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS.
DEFAULT_JVM_OPTS = ("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                    "-Djava.awt.headless=true")

# The second variant: flush (fsync) every record before it is acknowledged, as Shoal does for acks=all.
FSYNC_CONFIG: dict[str, str] = {"log.flush.interval.messages": "1"}


def random_cluster_id() -> str:
    """A cluster id as Kafka's Uuid.randomUuid() renders one: 16 random bytes, URL-safe base64 without padding,
    never starting with '-' (it would read as an option)."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class KafkaPeer:
    """One single-node KRaft Kafka under `root` (its log directory, server.properties and kafka.log)."""

    def __init__(self, root: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.root = Path(root)
        self.overrides = dict(overrides or {})
        self.port = free_port()
        self.controller_port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("Kafka is not running")
        return self.proc.pid

    def properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.root / "data"),
            **SINGLE_NODE_CONFIG,
            **self.overrides,
        }

    def format(self, timeout: float = 120.0) -> None:
        """Kafka's storage tool formats the log directory (cluster id, KRaft metadata, FEATURES)."""
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        args = ["format", "--config", str(config), "--cluster-id", random_cluster_id()]
        for feature in FEATURES:
            args += ["--feature", feature]
        done = subprocess.run(kafka_dist.java_command(kafka_dist.TOOLS["kafka-storage"], args),
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format exited with {done.returncode}: {done.stdout}{done.stderr}")

    def start(self) -> None:
        cmd = kafka_dist.java_command("kafka.Kafka", [str(self.root / "server.properties")],
                                      jvm_opts=DEFAULT_JVM_OPTS, log4j=kafka_dist.SERVER_LOG4J)
        with open(self.root / "kafka.log", "ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=self.root, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until the node accepts connections and its metadata lists itself as a broker."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = None
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited during start-up:\n{self.tail()}")
            if admin is None:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
                    admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            if admin is not None:
                with contextlib.suppress(Exception):
                    if admin.list_topics(timeout=2).brokers:
                        return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka was not ready within {timeout:g} s:\n{self.tail()}")
            time.sleep(0.01)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL if it has not exited within `timeout` s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.root / "kafka.log").read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no Kafka log)"
