"""Real Apache Kafka 4.4 processes for tests: KRaft nodes on loopback ports, formatted by Kafka's storage tool.

    node = KafkaNode.single(tmp / "kafka")       # one combined broker+controller, PLAINTEXT
    node.format(); node.start()                  # kafka.tools.StorageTool, then kafka.Kafka; waits until ready
    node.bootstrap                               # "127.0.0.1:PORT"
    node.stop()                                  # SIGTERM by PID, SIGKILL fallback

    cluster = KafkaCluster(tmp / "cluster", 3)   # three combined nodes, a quorum of three controllers
    cluster.start(); cluster.nodes[1].kill9(); cluster.nodes[1].start(); cluster.stop()

The settings are Kafka's defaults except where a test run needs otherwise (REFEREE_CONFIG): no initial rebalance
delay, and lower minimums for the share and consumer groups' lock durations, heartbeats and sessions so a test may
set short ones on its group (the defaults themselves are unchanged). Share groups run at share.version=2 (what
their dead-letter queue needs), set explicitly when formatting. Each node's output goes to `kafka.log` in its
directory; `tail()` shows its end. Only processes started here are signalled, by PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

# One node's settings, the features and the cluster id format are the bench's Kafka peer's (bench/kafka_peer.py).
from bench.kafka_peer import FEATURES, SINGLE_NODE_CONFIG, random_cluster_id
from tests.helpers import kafka_dist, pid_registry
from tests.helpers.broker_process import free_port

# Settings every node gets: see the module docstring.
REFEREE_CONFIG: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "50",
    "group.share.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "50",
    "group.consumer.min.session.timeout.ms": "1000",
}

# SCRAM users of a SASL node, created by the storage tool (--add-scram) with both mechanisms. `admin` is a super
# user, `alice` has only what ACLs grant her.
SCRAM_USERS: dict[str, str] = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class KafkaStartError(RuntimeError):
    pass


class KafkaNode:
    """One Kafka JVM in KRaft combined mode (broker and controller). `security` is "PLAINTEXT" or
    "SASL_PLAINTEXT" (SCRAM users SCRAM_USERS, StandardAuthorizer, `admin` a super user)."""

    def __init__(self, root: Path, node_id: int = 1, *, security: str = "PLAINTEXT",
                 overrides: Mapping[str, str] | None = None, registry: Path | None = None,
                 start_timeout: float = 120.0, label: str | None = None) -> None:
        if security not in ("PLAINTEXT", "SASL_PLAINTEXT"):
            raise ValueError(f"unsupported security protocol {security}")
        self.root = Path(root)
        self.node_id = node_id
        self.security = security
        self.overrides = dict(overrides or {})
        self.registry = registry  # a pid_registry directory: who stops this JVM if its owner cannot
        self.start_timeout = start_timeout
        self.label = label or f"Kafka node {node_id}"  # names it in logs and reports
        self.port = free_port()
        self.controller_port = free_port()
        self.voters = f"{node_id}@127.0.0.1:{self.controller_port}"
        self.expected_brokers = 1  # readiness: how many brokers the metadata must list
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.started_at: int | None = None  # the process's start time (pid_registry), with the PID its identity

    @classmethod
    def single(cls, root: Path, **kwargs) -> KafkaNode:
        node = cls(root, 1, **kwargs)
        node.overrides = {**SINGLE_NODE_CONFIG, **node.overrides}
        return node

    # -- layout ------------------------------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def config_path(self) -> Path:
        return self.root / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.root / "kafka.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        listener = self.security
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": f"{listener}://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"{listener}://127.0.0.1:{self.port}",
            "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": listener,
            "log.dirs": str(self.data_dir),
            **REFEREE_CONFIG,
        }
        if self.security == "SASL_PLAINTEXT":
            admin = SCRAM_USERS["admin"]
            props.update({
                "sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS),
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "authorizer.class.name": STANDARD_AUTHORIZER,
                # The controller listener is PLAINTEXT: the broker reaches its controller as ANONYMOUS, which
                # StandardAuthorizer must let through. Clients only reach the SASL listener.
                "super.users": "User:admin;User:ANONYMOUS",
            })
            for mechanism in SCRAM_MECHANISMS:  # the login the broker uses for itself (inter-broker) per mechanism
                props[f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="admin" password="{admin}";')
        props.update(self.overrides)
        return props

    def write_config(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        lines = [f"{key}={value}" for key, value in self.properties().items()]
        self.config_path.write_text("\n".join(lines) + "\n")

    def client_config(self, user: str = "admin", mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """confluent-kafka settings reaching this node (as `user` over SASL/SCRAM on a SASL node)."""
        config = {"bootstrap.servers": self.bootstrap}
        if self.security == "SASL_PLAINTEXT":
            config.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
                           "sasl.username": user, "sasl.password": SCRAM_USERS[user]})
        return config

    # -- storage -----------------------------------------------------------------------------------------------

    def format(self, cluster_id: str | None = None) -> subprocess.Popen:
        """Start Kafka's storage tool formatting this node's log directory (KRaft metadata, features, SCRAM
        users); returns the process, for `finish_format` (formats of several nodes run side by side)."""
        self.write_config()
        args = ["format", "--config", str(self.config_path), "--cluster-id", cluster_id or random_cluster_id()]
        for feature in FEATURES:
            args += ["--feature", feature]
        if self.security == "SASL_PLAINTEXT":
            for mechanism in SCRAM_MECHANISMS:
                for user, password in SCRAM_USERS.items():
                    args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        cmd = kafka_dist.java_command(kafka_dist.TOOLS["kafka-storage"], args)
        with open(self.root / "format.log", "wb") as out:
            return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def finish_format(self, proc: subprocess.Popen, timeout: float = 120.0) -> None:
        if proc.wait(timeout) != 0:
            output = (self.root / "format.log").read_text(errors="replace")
            raise KafkaStartError(f"kafka-storage format exited with {proc.returncode}:\n{output}")

    def format_now(self, cluster_id: str | None = None) -> None:
        self.finish_format(self.format(cluster_id))

    # -- process -----------------------------------------------------------------------------------------------

    def start(self, wait: bool = True) -> KafkaNode:
        """Start the JVM on the formatted log directory and, with `wait`, wait until it serves as a broker."""
        if self.alive():
            raise RuntimeError(f"{self.label} is already running")
        self.write_config()
        cmd = kafka_dist.java_command("kafka.Kafka", [str(self.config_path)], jvm_opts=kafka_dist.SERVER_JVM_OPTS,
                                      log4j=kafka_dist.SERVER_LOG4J)
        with open(self.log_path, "ab") as out:
            out.write(f"--- start: {' '.join(cmd)}\n".encode())
            out.flush()
            # Its own session: a Ctrl-C at the terminal reaches pytest, which stops it, not the JVM directly.
            self.proc = subprocess.Popen(cmd, cwd=self.root, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.proc.pid
        if self.registry is not None:
            self.started_at = pid_registry.register(self.registry, self.pid, self.label)
        else:
            self.started_at = pid_registry.start_time(self.pid)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the node accepts connections and its metadata lists `expected_brokers` brokers; a node
        that exits or does not get there in time is stopped and reported with its log's tail."""
        deadline = time.monotonic() + (timeout or self.start_timeout)
        admin = None
        while True:
            if not self.alive():
                self._forget()
                raise KafkaStartError(f"{self.label} exited during start-up:\n{self.first_error()}"
                                      f"\n...\n{self.tail(20)}")
            if admin is None and _accepts(self.port):
                from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - only once the port is open

                admin = AdminClient({**self.client_config(), "log_level": 0})
            if admin is not None:
                try:
                    if len(admin.list_topics(timeout=2).brokers) >= self.expected_brokers:
                        return
                except Exception:  # noqa: BLE001 - not ready yet: KafkaException until it answers
                    pass
            if time.monotonic() > deadline:
                self.kill9()
                raise KafkaStartError(f"{self.label} was not ready within "
                                      f"{timeout or self.start_timeout:g} s:\n{self.tail()}")
            time.sleep(0.1)

    def alive(self) -> bool:
        return self.pid is not None and self.started_at is not None and \
            pid_registry.running(self.pid, self.started_at)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL if it has not exited within `timeout` s."""
        if self.pid is not None and self.started_at is not None:
            pid_registry.terminate(self.pid, self.started_at, timeout)
        self._forget()

    def kill9(self) -> None:
        """SIGKILL: no clean shutdown."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            pid_registry.terminate(self.pid, self.started_at, 10.0)
        self._forget()

    def _forget(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        if self.registry is not None and self.pid is not None:
            pid_registry.unregister(self.registry, self.pid)
        self.proc = None
        self.pid = None
        self.started_at = None

    def rss_kb(self) -> int:
        """Resident memory of the JVM, in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def first_error(self, lines: int = 12) -> str:
        """The first ERROR line of the node's log and what follows it (a stack trace), or ""."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        at = next((i for i, line in enumerate(text) if "] ERROR " in line), None)
        return "" if at is None else "\n".join(text[at:at + lines])

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no Kafka log)"
        return "\n".join(text.splitlines()[-lines:])

    # -- sharing with other processes of the test run -----------------------------------------------------------

    def state(self) -> dict:
        """What another process needs to use and stop this running node (KafkaNode.from_state)."""
        return {"root": str(self.root), "node_id": self.node_id, "label": self.label, "security": self.security,
                "overrides": self.overrides, "port": self.port, "controller_port": self.controller_port,
                "voters": self.voters, "pid": self.pid, "started_at": self.started_at}

    @classmethod
    def from_state(cls, state: Mapping, registry: Path | None = None) -> KafkaNode:
        node = cls.__new__(cls)
        node.root = Path(state["root"])
        node.node_id = state["node_id"]
        node.label = state["label"]
        node.security = state["security"]
        node.overrides = dict(state["overrides"])
        node.registry = registry
        node.start_timeout = 120.0
        node.port = state["port"]
        node.controller_port = state["controller_port"]
        node.voters = state["voters"]
        node.expected_brokers = 1
        node.proc = None
        node.pid = state["pid"]
        node.started_at = state["started_at"]
        return node


def start_single(root: Path, *, security: str = "PLAINTEXT", overrides: Mapping[str, str] | None = None,
                 registry: Path | None = None, label: str | None = None, attempts: int = 3) -> KafkaNode:
    """A formatted, started and ready single-node Kafka under `root`. Its ports are picked free beforehand; when
    another process takes one first, it starts again on new ports."""
    for attempt in range(attempts):
        node = KafkaNode.single(root.with_name(f"{root.name}-retry{attempt}") if attempt else root, security=security,
                                overrides=overrides, registry=registry, label=label)
        node.format_now()
        try:
            return node.start()
        except KafkaStartError as exc:
            if "Address already in use" not in str(exc) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


class KafkaCluster:
    """`size` Kafka JVMs, each broker and controller, the controllers one quorum (static voters). Topics are
    created with replication factor 3 and min.insync.replicas=2 unless `overrides` say otherwise."""

    def __init__(self, root: Path, size: int = 3, *, overrides: Mapping[str, str] | None = None,
                 registry: Path | None = None) -> None:
        self.root = Path(root)
        defaults = {"default.replication.factor": str(min(size, 3)), "min.insync.replicas": str(min(size, 2))}
        self.nodes = [KafkaNode(self.root / f"node{i}", i, overrides={**defaults, **(overrides or {})},
                                registry=registry) for i in range(1, size + 1)]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        for node in self.nodes:
            node.voters = voters
            node.expected_brokers = size

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def start(self) -> KafkaCluster:
        """Format every node (side by side), start every JVM, and wait until each lists all the brokers."""
        cluster_id = random_cluster_id()
        formats = [(node, node.format(cluster_id)) for node in self.nodes]
        for node, proc in formats:
            node.finish_format(proc)
        try:
            for node in self.nodes:
                node.start(wait=False)
            for node in self.nodes:
                node.wait_ready()
        except BaseException:
            self.kill9()
            raise
        return self

    def stop(self) -> None:
        """SIGKILL every node: a test cluster's data is thrown away, and a controlled shutdown of a whole quorum
        only waits on the controllers leaving one by one."""
        self.kill9()

    def kill9(self) -> None:
        for node in self.nodes:
            node.kill9()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(f"--- node {n.node_id} ({n.log_path})\n{n.tail(lines)}" for n in self.nodes)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True
