"""Kafka 4.4's command-line tools run against a pair of brokers (the differential suite's tests/differential/
test_kafka_tools*.py), many runs to a JVM.

Each tool is run by its main class on the Maven classpath (tests/helpers/kafka_dist.py). A JVM start costs seconds
on the loaded test machine, so the runs of one step go to one JVM: tests/helpers/java/ToolBatch.java runs them one
after the other, each with its own standard output, error and input, its exit code taken where the tool exits
(Kafka's tools exit through Exit.exit, which ToolBatch intercepts; nothing the tool does after that is seen, as its
JVM would have ended). tests/differential/test_kafka_tools_harness.py checks that a batch answers as separate JVMs.

    runs = on_pair(pair, lambda t: {"list": tool("kafka-topics", "--bootstrap-server", t.bootstrap, "--list")})
    runs["kafka"]["list"].exit, runs["shoal"]["list"].stdout

A Kafka broker's metadata (what its DescribeConfigs, DescribeAcls, Metadata, ... answer from) follows its
controller's answers by moments, where Shoal applies a change before it answers: a tool that reads what an earlier
tool of its batch changed runs after a `barrier(target)` step, so both brokers are read in the same state.

The Kafka and Shoal batches of a step run side by side. ToolBatch is compiled with the JDK's javac on first use
into .tools/java-classes/ (never committed), keyed by its source and Kafka's version.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import kafka_dist
from tests.helpers.differential import Pair, Target

SOURCE = Path(__file__).resolve().parent / "java" / "ToolBatch.java"
MAIN = "shoal.tooltest.ToolBatch"
BARRIER = "barrier"  # not a Kafka tool: ToolBatch.Barrier, a step between two tools of a batch


@dataclass(frozen=True)
class Tool:
    """One run of a Kafka tool: its script's name (kafka_dist.TOOLS), its arguments, what it reads on stdin."""

    name: str
    args: tuple[str, ...]
    stdin: str = ""
    timeout_s: float = 60.0


def tool(name: str, *args: str, stdin: str = "", timeout_s: float = 60.0) -> Tool:
    return Tool(name, tuple(str(a) for a in args), stdin, timeout_s)


def barrier(target: Target, command_config: str | None = None) -> Tool:
    """A step of a batch (not compared: `on_pair` checks that it passed and leaves it out) after which the tools
    see every change made before it: Kafka's broker answers from a metadata image that follows its controller's
    answers by moments (ToolBatch.Barrier creates a topic, `target.unique("tool-barrier")`, and waits until the
    broker lists it). Label it "barrier ..." in a script."""
    args = [target.bootstrap, target.unique("tool-barrier")]
    return Tool(BARRIER, tuple(args + ([command_config] if command_config else [])))


@dataclass
class ToolRun:
    """What a tool's run showed: its exit code, standard output and standard error."""

    exit: int
    stdout: str
    stderr: str
    timed_out: bool = False
    args: tuple[str, ...] = field(default=(), repr=False)

    def check(self) -> ToolRun:
        assert self.exit == 0 and not self.timed_out, (
            f"{' '.join(self.args)} exited with {self.exit}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}")
        return self


def _java_home_bin(name: str) -> str:
    java = Path(kafka_dist.java()).resolve()
    candidate = java.parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise kafka_dist.KafkaNotInstalled(f"no `{name}` next to {java} nor on PATH: a JDK 17+ is needed")
    return found


def classes_dir() -> Path:
    """ToolBatch compiled against the installed Kafka (once per source and version; safe across xdist workers)."""
    key = hashlib.sha256(SOURCE.read_bytes() + kafka_dist.kafka_version().encode()).hexdigest()[:16]
    root = kafka_dist.REPO / ".tools" / "java-classes"
    out = root / f"toolbatch-{key}"
    if (out / "shoal" / "tooltest" / "ToolBatch.class").is_file():
        return out
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".toolbatch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_dir():
            tmp = Path(tempfile.mkdtemp(dir=root, prefix=".toolbatch-"))
            done = subprocess.run([_java_home_bin("javac"), "-nowarn", "-cp", kafka_dist.classpath(), "-d", str(tmp),
                                   str(SOURCE)], capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                raise RuntimeError(f"javac {SOURCE} failed:\n{done.stdout}\n{done.stderr}")
            os.rename(tmp, out)
    return out


class Batch:
    """One JVM running `tools` in order (started at once; `result()` waits for it)."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = list(tools)
        spec = [{"main": f"{MAIN}$Barrier" if t.name == BARRIER else kafka_dist.TOOLS[t.name], "args": list(t.args),
                 "stdin": t.stdin,
                 "timeout_ms": int(t.timeout_s * 1000)} for t in self.tools]
        fd, self.spec_path = tempfile.mkstemp(prefix="toolbatch-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(spec, f)
        cmd = kafka_dist.java_command(MAIN, [self.spec_path])
        at = cmd.index("-cp")
        cmd[at + 1] = f"{classes_dir()}{os.pathsep}{cmd[at + 1]}"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL)

    def result(self) -> list[ToolRun]:
        limit = 60 + sum(t.timeout_s for t in self.tools)
        try:
            stdout, stderr = self.proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise
        finally:
            os.unlink(self.spec_path)
        if self.proc.returncode != 0:
            raise AssertionError(f"ToolBatch exited with {self.proc.returncode}:\n{stdout[-4000:]}\n{stderr[-4000:]}")
        answers = json.loads(stdout)
        return [ToolRun(a["exit"], a["stdout"], a["stderr"], a["timed_out"], (t.name, *t.args))
                for t, a in zip(self.tools, answers, strict=True)]


def run_batch(tools: Sequence[Tool]) -> list[ToolRun]:
    return Batch(tools).result()


def on_pair(pair: Pair, script: Callable[[Target], Mapping[str, Tool]]) -> dict[str, dict[str, ToolRun]]:
    """The tools `script` names for each broker (label -> Tool, run in that order), Kafka's and Shoal's batches
    side by side: {broker: {label: run}}, barriers left out once passed."""
    scripts = {t.name: dict(script(t)) for t in pair}
    batches = {name: Batch(list(tools.values())) for name, tools in scripts.items()}
    out = {}
    for name, batch in batches.items():
        runs = dict(zip(scripts[name], batch.result(), strict=True))
        for label, tool_ in scripts[name].items():
            if tool_.name == BARRIER:
                runs.pop(label).check()
        out[name] = runs
    return out


def command_config(directory: Path, target: Target, user: str = "admin", mechanism: str = "SCRAM-SHA-512") -> str:
    """A --command-config file reaching `target` (over SASL/SCRAM as `user` on a SASL target); its path, under
    `directory`/`target.name` (tools that echo their arguments print it: map that directory to one name)."""
    lines = []
    if target.security == "SASL_PLAINTEXT":
        password = target.users[user]
        lines += ["security.protocol=SASL_PLAINTEXT", f"sasl.mechanism={mechanism}",
                  "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                  f'username="{user}" password="{password}";']
    path = Path(directory) / target.name / f"{user}-{mechanism}.properties"  # the same name for each broker
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return str(path)
