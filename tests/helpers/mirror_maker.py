"""MirrorMaker 2 as Kafka ships it, for tests: the dedicated-mode driver `org.apache.kafka.connect.mirror.MirrorMaker`
(what bin/connect-mirror-maker.sh runs) with a properties file, on the jars `make kafka-mirror` installs.

    mm = MirrorMaker(tmp / "mm2", {"clusters": "shoal, kafka", ...}, registry=kafka_registry).start()
    mm.log_text()       # its log (log4j2 at INFO), for what it did and any ERROR
    mm.stop()           # SIGTERM by PID (MirrorMaker's shutdown hook stops its herders), SIGKILL fallback

tools/kafka-mirror/pom.xml names the version: 4.3.1, the newest connect-mirror Maven Central serves here (4.4.0 is
not served), with the connect-runtime and kafka-clients of the same release. Only the process started here is
signalled, by its PID; with a `registry` (the run's pid_registry directory) the run's watchdog stops it if the
test's worker dies first.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from tests.helpers import kafka_dist, pid_registry

POM = kafka_dist.REPO / "tools" / "kafka-mirror" / "pom.xml"
MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
# Two herders (one per direction, the reverse one for heartbeats), each a Connect worker with its clients: more
# heap than a command-line tool needs, less than a broker. A test mirrors a few hundred records, so C1 alone (as
# for Kafka's tools) and the serial collector: no C2 or GC threads competing for the two cores at start-up.
JVM_OPTS = ("-Xms128m", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")


# Kafka's admin client logs a lookup of a topic just created that a broker of the 3-node cluster does not know
# yet as an ERROR, then retries (seen once under load, for MirrorMaker's own internal topics on the cluster).
_TRANSIENT_ERROR = re.compile(r"Received unknown topic error for topic mm2-\S+\.internal \(org\.apache\.kafka\."
                              r"clients\.admin\.internals\.PartitionLeaderStrategy\)")


class MirrorMakerNotInstalled(RuntimeError):
    pass


@cache
def version() -> str:
    """The connect-mirror version tools/kafka-mirror/pom.xml pins (its `mirror.version` property)."""
    pinned = kafka_dist.pom_property(POM, "mirror.version")
    if pinned is None:
        raise MirrorMakerNotInstalled(f"{POM} names no mirror.version")
    return pinned


def lib_dir() -> Path:
    """The directory of MirrorMaker's jars; raises MirrorMakerNotInstalled, saying what to run, when missing."""
    lib = kafka_dist.REPO / ".tools" / f"kafka-mirror-{version()}" / "lib"
    if not (lib / f"connect-mirror-{version()}.jar").is_file():
        raise MirrorMakerNotInstalled(f"MirrorMaker 2 (connect-mirror {version()}) is not installed in {lib}: run "
                                      "`make kafka-mirror` (mvn copies its jars from Maven Central)")
    return lib


def command(properties: Path) -> list[str]:
    """argv running MirrorMaker's dedicated mode on `properties`, logging at INFO to stdout (as a broker does)."""
    return [kafka_dist.java(), *JVM_OPTS, f"-Dlog4j2.configurationFile={kafka_dist.SERVER_LOG4J}",
            "-cp", f"{lib_dir()}/*", MAIN_CLASS, str(properties)]


class MirrorMaker:
    """One MirrorMaker 2 JVM: `properties` written to ROOT/mm2.properties, its output in ROOT/mm2.log."""

    def __init__(self, root: Path, properties: Mapping[str, str], *, registry: Path | None = None) -> None:
        self.root = Path(root)
        self.properties = dict(properties)
        self.registry = registry
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at: int | None = None

    @property
    def config_path(self) -> Path:
        return self.root / "mm2.properties"

    @property
    def log_path(self) -> Path:
        return self.root / "mm2.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> MirrorMaker:
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k} = {v}\n" for k, v in self.properties.items()))
        cmd = command(self.config_path)
        with open(self.log_path, "ab") as out:
            out.write(f"--- start: {' '.join(cmd)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(cmd, cwd=self.root, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        if self.registry is not None:
            self.started_at = pid_registry.register(self.registry, self.proc.pid, "MirrorMaker 2")
        else:
            self.started_at = pid_registry.start_time(self.proc.pid)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (its shutdown hook stops the herders and their clients), SIGKILL after `timeout` s."""
        if self.proc is None:
            return
        if self.started_at is not None:
            pid_registry.terminate(self.proc.pid, self.started_at, timeout)
        self.proc.wait(10)
        if self.registry is not None:
            pid_registry.unregister(self.registry, self.proc.pid)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def errors(self) -> list[str]:
        """Its ERROR lines until it began to stop (while stopping, its scheduled tasks may still call the admin
        clients it is closing, and log that as an ERROR)."""
        found = []
        for line in self.log_text().splitlines():
            if "INFO Kafka MirrorMaker stopping" in line:
                break
            if "] ERROR " in line and not _TRANSIENT_ERROR.search(line):
                found.append(line)
        return found

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])
