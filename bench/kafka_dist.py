"""Apache Kafka: where `make kafka` put its jars and how to run its main classes (the tests' referee and the
bench's peer share this module; tests/helpers/kafka_dist.py re-exports it).

`make kafka` (part of `make test` and `make bench`) installs Kafka's broker, command-line tools, Java clients and
Streams with their dependencies from Maven Central into .tools/kafka-VERSION/lib (tools/kafka/install.sh,
tools/kafka/pom.xml). There is no Kafka distribution here and no bin/*.sh: a tool is run by its main class on that
classpath.

    java_command("kafka.Kafka", ["server.properties"])           # argv for subprocess
    run_tool("kafka-topics", ["--bootstrap-server", b, "--list"])  # CompletedProcess, stdout/stderr captured
"""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POM = REPO / "tools" / "kafka" / "pom.xml"
SERVER_LOG4J = REPO / "tools" / "kafka" / "log4j2-server.properties"
TOOLS_LOG4J = REPO / "tools" / "kafka" / "log4j2-tools.properties"

# The main classes behind the scripts of Kafka 4.4's bin/ directory (kafka-topics.sh -> TopicCommand, ...).
# tests/kafka/test_kafka_dist.py checks that each one is in the installed jars and has a main method.
TOOLS: dict[str, str] = {
    "kafka-server-start": "kafka.Kafka",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-share-consumer-perf-test": "org.apache.kafka.tools.ShareConsumerPerformance",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-share-consumer": "org.apache.kafka.tools.VerifiableShareConsumer",
    "kafka-streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
    "kafka-replica-verification": "org.apache.kafka.tools.ReplicaVerificationTool",
}

# A modest heap: several Kafka JVMs share the 2-core test machine with Shoal's brokers and the clients.
SERVER_JVM_OPTS = ("-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true")
# A command is short-lived: a small heap, and C1 only, which starts it about 0.3 s faster (measured).
TOOL_JVM_OPTS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
# The tools that drive a workload keep the full JIT, so their figures are Kafka's.
WORKLOAD_JVM_OPTS = ("-Xmx512m", "-Djava.awt.headless=true")
WORKLOAD_TOOLS = frozenset({
    "kafka-producer-perf-test", "kafka-consumer-perf-test", "kafka-share-consumer-perf-test", "kafka-e2e-latency",
    "kafka-verifiable-producer", "kafka-verifiable-consumer", "kafka-verifiable-share-consumer",
})


class KafkaNotInstalled(RuntimeError):
    pass


def pom_property(pom: Path, name: str) -> str | None:
    """The value of property `name` in the `<properties>` of the Maven `pom` (the versions tools/*/pom.xml pin),
    or None when it names none."""
    node = ET.parse(pom).getroot().find(f"m:properties/m:{name}", {"m": "http://maven.apache.org/POM/4.0.0"})
    return node.text.strip() if node is not None and node.text else None


@cache
def kafka_version() -> str:
    """The Kafka version tools/kafka/pom.xml pins (its `kafka.version` property)."""
    version = pom_property(POM, "kafka.version")
    if version is None:
        raise KafkaNotInstalled(f"{POM} names no kafka.version")
    return version


def kafka_home() -> Path:
    return REPO / ".tools" / f"kafka-{kafka_version()}"


def lib_dir() -> Path:
    """The directory of Kafka's jars; raises KafkaNotInstalled, saying what to run, when they are missing."""
    lib = kafka_home() / "lib"
    if not (lib / f"kafka_2.13-{kafka_version()}.jar").is_file():
        raise KafkaNotInstalled(f"Apache Kafka {kafka_version()} is not installed in {lib}: run `make kafka` "
                                "(mvn copies its jars from Maven Central)")
    return lib


def classpath() -> str:
    """Every jar of the installation, as a JVM classpath wildcard."""
    return f"{lib_dir()}/*"


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaNotInstalled("no `java` on PATH and no JAVA_HOME: Kafka needs a Java 17+ runtime (make java)")
    return found


def java_command(main_class: str, args: Sequence[str] = (), *, jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
                 log4j: Path = TOOLS_LOG4J, system_properties: Mapping[str, str] | None = None,
                 classpath_prefix: Sequence[Path | str] = ()) -> list[str]:
    """argv running `main_class` of Kafka's jars with `args`; logging configured by `log4j` (a log4j2 file).
    `classpath_prefix` puts more class directories or jars before Kafka's (programs compiled against them)."""
    props = {"log4j2.configurationFile": str(log4j), **(system_properties or {})}
    return [java(), *jvm_opts, *(f"-D{key}={value}" for key, value in props.items()),
            "-cp", os.pathsep.join([*map(str, classpath_prefix), classpath()]), main_class, *args]


def tool_command(tool: str, args: Sequence[str] = (), **kwargs) -> list[str]:
    """argv running one of Kafka's command-line tools by its script's name, e.g. "kafka-topics"."""
    try:
        main_class = TOOLS[tool]
    except KeyError:
        raise KeyError(f"unknown Kafka tool {tool!r}; known: {', '.join(sorted(TOOLS))}") from None
    if tool in WORKLOAD_TOOLS:
        kwargs.setdefault("jvm_opts", WORKLOAD_JVM_OPTS)
    return java_command(main_class, args, **kwargs)


def run_tool(tool: str, args: Sequence[str] = (), *, timeout: float = 120.0, check: bool = True,
             input: str | None = None, **kwargs) -> subprocess.CompletedProcess[str]:
    """Run a Kafka tool to completion, its stdout and stderr captured as text. With `check` a non-zero exit
    raises AssertionError showing both."""
    cmd = tool_command(tool, args, **kwargs)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise AssertionError(f"{tool} {' '.join(args)} exited with {done.returncode}\n"
                             f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done
