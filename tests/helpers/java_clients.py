"""Kafka's own Java clients (4.4) driven by small Java programs: the differential suite's Java scenarios.

The programs are under tests/java/src (package shoal.javaclients): each scenario group ("share", "clients",
"admin", ...) is one JVM that runs its scenarios in a row against one broker and prints one JSON document of
what the clients observed. They are compiled here with javac against Kafka's jars (.tools/kafka-VERSION/lib) into
.tools/java-classes/<hash of the sources>, on first use and again only when a source changes; a file lock lets
the xdist workers (and checkouts sharing .tools) share one build. A failed build fails the tests that need it,
with javac's output.

    seen = run_pair(pair, "share")       # {"kafka": {scenario: ...}, "shoal": {scenario: ...}}, normalised
    compare(seen, "implicit")            # assert_same; fails if either side's scenario crashed
    compare(seen, "admin", known={("offsets", "start_offset"): (0, 2, "entry in docs/kafka-differences.md")})
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.helpers import kafka_dist
from tests.helpers.differential import KAFKA, SHOAL, Pair, Target, assert_same, known_difference, normalize

SOURCES = kafka_dist.REPO / "tests" / "java" / "src"
BUILD_ROOT = kafka_dist.REPO / ".tools" / "java-classes"
MAIN_CLASS = "shoal.javaclients.Main"
# Short-lived client JVMs: C1 only and the serial collector start faster and leave the cores to the brokers.
JVM_OPTS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
STALE_AFTER_S = 7 * 24 * 3600  # .tools may be shared by several checkouts of other sources
UNKNOWN_TOPIC_ID = uuid.UUID("00000000-0000-4000-8000-00000000d1ff")  # an id no broker gives a topic


class JavaBuildError(RuntimeError):
    pass


def _sources(root: Path) -> list[Path]:
    return sorted(root.rglob("*.java"))


def _digest(sources: Sequence[Path], root: Path) -> str:
    h = hashlib.sha256(kafka_dist.kafka_version().encode())
    for path in sources:
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    found = shutil.which("javac")
    if found is None:
        raise JavaBuildError("no `javac` on PATH and no JAVA_HOME with one: the Java client tests need a JDK "
                             "(make kafka installs openjdk-17-jdk-headless)")
    return found


def classes(source_root: Path = SOURCES, build_root: Path = BUILD_ROOT, keep_s: float = STALE_AFTER_S) -> Path:
    """The compiled programs' class directory, compiling the sources first when they changed. A failed build raises
    JavaBuildError with javac's output (the tests that need it fail with it, under CI as anywhere). Builds of
    other sources older than `keep_s` are removed; younger ones may belong to another checkout sharing .tools."""
    sources = _sources(source_root)
    if not sources:
        raise JavaBuildError(f"no Java sources under {source_root}")
    out = build_root / _digest(sources, source_root)
    if (out / ".complete").exists():
        return out
    with _locked(build_root / ".lock"):
        if (out / ".complete").exists():  # another worker built it while we waited
            return out
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        cmd = [javac(), "-d", str(tmp), "-cp", kafka_dist.classpath(), "--release", "17", "-encoding", "UTF-8",
               "-Xlint:all", "-Xlint:-serial", "-Werror", *map(str, sources)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise JavaBuildError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        (tmp / ".complete").write_text(" ".join(cmd) + "\n")
        for stale in build_root.iterdir():  # builds of older sources
            if stale.is_dir() and stale != tmp and time.time() - stale.stat().st_mtime > keep_s:
                shutil.rmtree(stale, ignore_errors=True)
        tmp.rename(out)
    return out


def command(group: str, target: Target, suffix: str, only: Sequence[str] | None = None) -> list[str]:
    args: dict[str, Any] = {"bootstrap": target.bootstrap, "security": target.security,
                            "users": dict(target.users), "suffix": suffix}
    if only:
        args["only"] = list(only)
    return kafka_dist.java_command(MAIN_CLASS, [group, json.dumps(args)], jvm_opts=JVM_OPTS,
                                   classpath_prefix=[classes()])


def run(group: str, target: Target, only: Sequence[str] | None = None, timeout: float = 300.0) -> dict[str, Any]:
    """The scenarios of `group` against `target`: {scenario: observations}, the names they made adopted by
    `target` (normalised back to their bases)."""
    suffix = uuid.uuid4().hex[:8]
    cmd = command(group, target, suffix, only)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # our own child, by its handle
        stdout, stderr = proc.communicate()
        raise AssertionError(f"the Java {group} scenarios against {target.name} did not finish within "
                             f"{timeout:g} s:\n{stderr[-6000:]}") from None
    done = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    if done.returncode != 0:
        raise AssertionError(f"the Java {group} scenarios against {target.name} exited with {done.returncode}:\n"
                             f"{done.stderr[-6000:]}")
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"the Java {group} scenarios printed no JSON document ({exc}):\n"
                             f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}") from None
    for name, base in document.pop("_names").items():
        target.adopt(name, base)
    document["_stderr"] = done.stderr  # kept for a failing comparison's report, dropped by the normaliser
    return document


def run_pair(pair: Pair, group: str, only: Sequence[str] | None = None) -> dict[str, Any]:
    """The scenarios of `group` against Kafka and Shoal side by side (two JVMs at once), each normalised:
    {"kafka": {scenario: ...}, "shoal": {scenario: ...}}."""
    classes()  # once, before two workers race for it
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {target.name: pool.submit(run, group, target, only) for target in pair}
        raw = {name: future.result() for name, future in futures.items()}
    seen = {}
    for target in pair:
        document = raw[target.name]
        seen[target.name] = {"_stderr": document["_stderr"],
                             **{name: normalize(_named_keys(value, target), target)
                                for name, value in document.items() if not name.startswith("_")}}
    return seen


def _named_keys(value: Any, target: Target) -> Any:
    """`value` with the unique names in its mappings' keys replaced by their bases (the programs key results by
    partition, "orders-1f3a9c2b-0"; `normalize` only rewrites values)."""
    names = sorted(target.names().items(), key=lambda item: len(item[0]), reverse=True)

    def key(text: str) -> str:
        for name, base in names:
            text = text.replace(name, base)
        return text

    def walk(value: Any) -> Any:
        if isinstance(value, dict):  # in the order of the bases, so that ids are numbered alike on both sides
            renamed = {key(k) if isinstance(k, str) else k: v for k, v in value.items()}
            return {k: walk(renamed[k]) for k in sorted(renamed, key=str)}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(value)


def compare(seen: dict[str, Any], name: str, known: Mapping[tuple, tuple[Any, Any, str]] | None = None,
            kafka_only: Mapping[tuple, tuple[Sequence[str], str]] | None = None) -> None:
    """Scenario `name` of `run_pair` agrees on Kafka and Shoal, but for the documented differences, each taken out
    of the comparison and pinned on both sides with `known_difference`:

    known       path (a tuple of keys and list indices) -> (Kafka's value, Shoal's value, the entry of
                docs/kafka-differences.md);
    kafka_only  path of a mapping -> (the keys only Kafka's has, the entry): Kafka has each, Shoal none.
    """
    both = copy.deepcopy(scenario(seen, name))
    for path, (kafka_value, shoal_value, reason) in (known or {}).items():
        pinned = {side: _pop(both[side], path, side) for side in (KAFKA, SHOAL)}
        known_difference(pinned, kafka=kafka_value, shoal=shoal_value, reason=reason)
    for path, (keys, reason) in (kafka_only or {}).items():
        pinned = {}
        for side in (KAFKA, SHOAL):
            mapping = _pop(both[side], path, side)
            pinned[side] = sorted(key for key in keys if key in mapping)
            _put(both[side], path, {k: v for k, v in mapping.items() if k not in keys})
        known_difference(pinned, kafka=sorted(keys), shoal=[], reason=reason)
    assert_same(both, f"scenario {name!r}")


def _put(value: Any, path: tuple, item: Any) -> None:
    *parents, last = path
    for step in parents:
        value = value[step]
    value[last] = item


def _pop(value: Any, path: tuple, side: str) -> Any:
    *parents, last = path
    for step in parents:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            raise AssertionError(f"{side} has nothing at {path!r} (a known difference's path)") from None
    try:
        found = value[last]
    except (KeyError, IndexError, TypeError):
        raise AssertionError(f"{side} has nothing at {path!r} (a known difference's path)") from None
    if isinstance(value, list):
        value[last] = "<pinned>"  # list items keep their places: the other paths' indices stay right
    else:
        del value[last]
    return found


def scenario(seen: dict[str, Any], name: str) -> dict[str, Any]:
    """One scenario's observations from `run_pair`, {"kafka": ..., "shoal": ...}; fails when the scenario did not
    run to its end on either side (a crash on both must not compare equal)."""
    out = {}
    for side in (KAFKA, SHOAL):
        if name not in seen[side]:
            raise AssertionError(f"scenario {name!r} did not run against {side}")
        value = seen[side][name]
        if isinstance(value, dict) and "scenario_failed" in value:
            raise AssertionError(f"scenario {name!r} failed against {side}: {value['scenario_failed']}\n"
                                 f"client log:\n{seen[side]['_stderr'][-4000:]}")
        out[side] = value
    return out
