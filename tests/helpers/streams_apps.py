"""Kafka Streams applications (tests/java/src/shoal/streams/StreamsApps.java) against a broker: deterministic
inputs, the JVM that runs the apps, and the outputs as a read_committed consumer sees them.

    apps = [workload("wordcount", suffix) ...]           # topics, input records, expected output count
    create_topics(bootstrap, apps); produce_inputs(bootstrap, apps)
    run = StreamsRun.start(bootstrap, "exactly_once_v2", apps, state_dir, log)   # one JVM, several apps
    run.wait_exit(120) == 0                                # expect>0: it stops once every output is complete
    outputs(bootstrap, app)                                # {partition: {key: [(value, timestamp), ...]}}

Every topic has PARTITIONS partitions and the keyed inputs are spread with Java's partitioner (murmur2), so a
key's records are in the partition a Streams producer would choose. The inputs' timestamps are fixed (record
time, from BASE_TS), so windows and join order do not depend on when the test runs. The record caches are off
in the apps, so an aggregation emits one record per update and the outputs' sizes are known in advance.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from tests.helpers import java_clients, kafka_dist
from tests.helpers.confluent_clients import read_partitions
from tests.helpers.waiting import wait_until

MAIN_CLASS = "shoal.streams.StreamsApps"
PARTITIONS = 3
# The inputs' record time starts on the hour before the run's (ms): a window boundary, the same for every test of
# a run, and recent, so that no broker's time-based retention (7 days for the inputs, a day past the window for
# the windowed store's changelog) deletes anything while the test runs.
BASE_TS = (int(time.time()) // 3600 - 1) * 3_600_000
WINDOW_MS = 10_000
# Several Streams instances with RocksDB in one JVM: a little more heap than a client scenario.
JVM_OPTS = ("-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
TOPOLOGIES = ("stateless", "wordcount", "join", "windowed")
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta")


@dataclass
class Record:
    key: str
    value: str
    ts: int
    partition: int | None = None  # None: the partitioner's choice (murmur2 of the key)


@dataclass
class Workload:
    """One app: its topology, application id, topics, input records per input topic, and how many output records
    it must produce."""
    topology: str
    app_id: str
    inputs: dict[str, list[Record]]
    output: str
    expect: int
    expected: dict[str, list[str]] = field(default_factory=dict)  # key -> values in order, where computable
    guarantee: str | None = None  # its processing.guarantee, over the run's

    def spec(self, expect: int | None = None) -> str:
        count = self.expect if expect is None else expect
        own = f",guarantee={self.guarantee}" if self.guarantee else ""
        return (f"topology={self.topology},id={self.app_id},input={'+'.join(self.inputs)},output={self.output},"
                f"expect={count}{own}")


def workload(topology: str, suffix: str | None = None, *, scale: int = 1, guarantee: str | None = None) -> Workload:
    """The deterministic input of `topology` and what its output must be; `scale` multiplies the input;
    `guarantee` the app's own processing.guarantee."""
    load = _workload(topology, suffix, scale)
    load.guarantee = guarantee
    return load


def _workload(topology: str, suffix: str | None, scale: int) -> Workload:
    suffix = suffix or uuid.uuid4().hex[:8]
    name = f"streams-{topology}-{suffix}"
    inp, out = f"{name}-in", f"{name}-out"
    if topology == "stateless":
        records = [Record(f"k{i % 7}", f"skip{i}" if i % 4 == 0 else f"v{i}", BASE_TS + i * 100)
                   for i in range(60 * scale)]
        expected: dict[str, list[str]] = defaultdict(list)
        for r in records:
            if not r.value.startswith("skip"):
                expected[r.key].append(r.value.upper())
        return Workload(topology, name, {inp: records}, out, sum(map(len, expected.values())), dict(expected))
    if topology == "wordcount":
        records = []
        for i in range(40 * scale):
            words = [WORDS[(i * 3 + j * 5) % len(WORDS)] for j in range(1 + i % 4)]
            records.append(Record(f"line{i}", " ".join(words), BASE_TS + i * 100))
        counts = word_counts(records)
        return Workload(topology, name, {inp: records}, out, sum(map(len, counts.values())), counts)
    if topology == "join":
        table = f"{name}-table"
        rows = [Record(f"u{u}", f"region{u}", BASE_TS + u) for u in range(4)]  # u4, u5: no row at first
        rows += [Record("u1", "region1b", BASE_TS + 25_000), Record("u4", "region4", BASE_TS + 30_000)]
        clicks = [Record(f"u{i % 6}", f"page{i}", BASE_TS + 1_000 + i * 1_000) for i in range(48 * scale)]
        expected = defaultdict(list)
        for c in clicks:  # the table row with the latest timestamp not after the click's (timestamp order)
            before = [r for r in rows if r.key == c.key and r.ts <= c.ts]
            expected[c.key].append(f"{c.value}@{max(before, key=lambda r: r.ts).value if before else 'none'}")
        return Workload(topology, name, {inp: clicks, table: rows}, out, len(clicks), dict(expected))
    if topology == "windowed":
        records = [Record(f"w{i % 5}", str(i % 9 + 1), BASE_TS + i * 700) for i in range(90 * scale)]
        sums: dict[str, int] = defaultdict(int)
        for r in records:
            sums[f"{r.key}@{r.ts - r.ts % WINDOW_MS}"] += int(r.value)
        end = records[-1].ts + 100 * WINDOW_MS
        # Stream time is per task: a late record in every partition closes all the data's windows (the marker's
        # own window stays open, so it is never emitted).
        records += [Record(f"~end{p}", "0", end, partition=p) for p in range(PARTITIONS)]
        return Workload(topology, name, {inp: records}, out, len(sums),
                        {key: [str(total)] for key, total in sums.items()})
    raise ValueError(f"unknown topology {topology}")


def word_counts(records: list[Record]) -> dict[str, list[str]]:
    """The counts a word count emits per word, in order: 1, 2, 3, ..."""
    totals = Counter(word for r in records for word in r.value.split(" "))
    return {word: [str(n) for n in range(1, total + 1)] for word, total in totals.items()}


def create_topics(bootstrap: str, loads: list[Workload]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for load in loads for t in (*load.inputs, load.output)]
    futures = admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in names])
    for future in futures.values():
        future.result(timeout=30)


def produce_inputs(bootstrap: str, loads: list[Workload]) -> None:
    """Every input record, acks=all and idempotent, in order; murmur2 spreads keys as a Java producer does."""
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "partitioner": "murmur2_random", "linger.ms": 5})
    for load in loads:
        for topic, records in load.inputs.items():
            for r in records:
                extra = {} if r.partition is None else {"partition": r.partition}
                producer.produce(topic, key=r.key.encode(), value=r.value.encode(), timestamp=r.ts,
                                 on_delivery=lambda err, _msg: errors.append(err) if err else None, **extra)
                producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []


def outputs(bootstrap: str, load: Workload, timeout: float = 60.0) -> dict[int, dict[str, list]]:
    """The committed output (read_committed, to the LSO) per partition, then per key: [(value, timestamp), ...]
    in offset order. A key's records are in one partition and in processing order, which the inputs fix; the
    interleaving of different keys within a partition is not fixed (tasks of several input partitions write to
    one output partition, and the Kafka and Shoal runs interleave them differently), so it is left out.

    The word count's repartition topic takes a word's occurrences from the tasks of every input partition, in an
    order no run fixes: its counts per word are 1, 2, 3, ... whatever that order, but an update's timestamp is the
    largest of the timestamps counted so far (Kafka's rule for aggregates), which that order decides, but for the
    last one: a word gets {"counts": [...], "last_timestamp": ...}."""
    got = read_partitions(bootstrap, load.output, PARTITIONS, committed=True, timeout=timeout, keys=True,
                          timestamps=True)
    by_key: dict[int, dict[str, list]] = {}
    for p, records in got.items():
        keyed: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for _offset, key, value, ts in records:
            keyed[key.decode()].append((value.decode(), ts))
        if load.topology == "wordcount":
            by_key[p] = {k: [{"counts": [v for v, _ in items], "last_timestamp": items[-1][1]}]
                         for k, items in sorted(keyed.items())}
        else:
            by_key[p] = dict(sorted(keyed.items()))
    return by_key


def values_by_key(out: dict[int, dict[str, list]]) -> dict[str, list[str]]:
    """The output's values per key, partitions merged (a key is in one partition)."""
    merged: dict[str, list[str]] = {}
    for keyed in out.values():
        for key, items in keyed.items():
            assert key not in merged, f"key {key!r} in two partitions"
            merged[key] = items[0]["counts"] if isinstance(items[0], dict) else [value for value, _ts in items]
    return merged


class StreamsRun:
    """One JVM running StreamsApps: its state-change events, its exit. Signalled only by its own PID."""

    def __init__(self, proc: subprocess.Popen[str], log: Path) -> None:
        self.proc = proc
        self.log = log
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, bootstrap: str, guarantee: str, apps: list[str], state_dir: Path, log: Path, *,
              group_protocol: str = "classic", timeout_s: int = 150,
              config: dict[str, str] | None = None) -> StreamsRun:
        """Start the apps of `apps` (Workload.spec strings) in one JVM, with Streams settings `config` over the
        program's; stderr goes to `log`."""
        args = ["--bootstrap", bootstrap, "--guarantee", guarantee, "--group-protocol", group_protocol,
                "--state-dir", str(state_dir), "--timeout-s", str(timeout_s)]
        for name, value in (config or {}).items():
            args += ["--config", f"{name}={value}"]
        for spec in apps:
            args += ["--app", spec]
        cmd = kafka_dist.java_command(MAIN_CLASS, args, jvm_opts=JVM_OPTS, classpath_prefix=[java_clients.classes()])
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, stdin=subprocess.DEVNULL)
        return cls(proc, log)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def states(self, app_id: str) -> list[str]:
        return [e["state"] for e in list(self.events) if e.get("app") == app_id]

    def wait_state(self, app_id: str, state: str, timeout: float) -> None:
        wait_until(lambda: state in self.states(app_id) or self.proc.poll() is not None, timeout,
                   f"app {app_id} to reach {state}")
        assert state in self.states(app_id), f"the apps exited with {self.proc.returncode}:\n{self.tail()}"

    def wait_exit(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"the Streams apps did not exit within {timeout:g} s:\n{self.tail()}") from None
        self._reader.join(5)
        return rc

    def done(self) -> bool:
        return any(e.get("done") for e in list(self.events))

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM: the shutdown hook closes the apps (committing), then the JVM exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The JVM stopped (SIGSTOP) for the block, continued (SIGCONT) after it unless it has exited."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGCONT)

    def tail(self, chars: int = 6000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"


def run_apps(bootstrap: str, guarantee: str, loads: list[Workload], tmp: Path, *, timeout: float = 150.0,
             group_protocol: str = "classic") -> float:
    """Run `loads` to completion in one JVM against `bootstrap` (`group.protocol` classic or streams); returns the
    wall time (s)."""
    start = time.monotonic()
    run = StreamsRun.start(bootstrap, guarantee, [load.spec() for load in loads], tmp / "state", tmp / "apps.log",
                           timeout_s=int(timeout), group_protocol=group_protocol)
    try:
        rc = run.wait_exit(timeout + 30)
    finally:
        run.kill9()
    assert rc == 0 and run.done(), f"the Streams apps exited with {rc}:\n{run.tail()}"
    return time.monotonic() - start


class OutputWatcher:
    """A read_committed consumer following a topic from its start: how many committed records it holds now."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watch-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest"})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.seen = 0
        self.closed = False

    def count(self) -> int:
        for m in self.consumer.consume(500, 0.2):
            if m.error() is None:
                self.seen += 1
        return self.seen

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


class LineProducer(threading.Thread):
    """Produces `lines` (key, text) to `topic` at about `rate` a second, idempotent, riding out a broker restart
    (librdkafka keeps the records queued and retries them within message.timeout.ms)."""

    def __init__(self, bootstrap: str, topic: str, lines: list[tuple[str, str]], rate: float) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "partitioner": "murmur2_random", "linger.ms": 5,
                                  "message.timeout.ms": 120_000})
        self.topic, self.lines, self.rate = topic, lines, rate
        self.errors: list[object] = []
        self.sent = 0

    def run(self) -> None:
        start = time.monotonic()
        for i, (key, text) in enumerate(self.lines):
            while time.monotonic() - start < i / self.rate:
                self.producer.poll(0.01)
            self.producer.produce(self.topic, key=key.encode(), value=text.encode(),
                                  on_delivery=lambda err, _m: self.errors.append(err) if err else None)
            self.sent += 1
            self.producer.poll(0)
        if self.producer.flush(120) != 0:
            self.errors.append("records still queued after 120 s")


def internal_topics(bootstrap: str, load: Workload) -> dict[str, dict]:
    """The topics the app created for itself (named after its application id, which is replaced by "APP"): their
    partition counts and the topic configs set on them (what CreateTopics carried: cleanup policies, retention,
    segment sizes, timestamp type)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=30)
    names = sorted(t for t in metadata.topics if t.startswith(f"{load.app_id}-") and t not in load.inputs
                   and t != load.output)
    out: dict[str, dict] = {}
    for name in names:
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        configs = admin.describe_configs([resource])[resource].result(timeout=30)
        set_on_topic = {k: c.value for k, c in configs.items()
                        if c.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        out[name.replace(load.app_id, "APP")] = {"partitions": len(metadata.topics[name].partitions),
                                                 "configs": dict(sorted(set_on_topic.items()))}
    return out


def committed_offsets(bootstrap: str, load: Workload) -> dict[str, dict[int, int]]:
    """The app's group's committed offsets on its input topics (named by their position, "input0", ...)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(load.app_id, [TopicPartition(t, p) for t in load.inputs
                                                         for p in range(PARTITIONS)])
    [future] = admin.list_consumer_group_offsets([request]).values()
    names = {t: f"input{i}" for i, t in enumerate(load.inputs)}
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for tp in future.result(timeout=30).topic_partitions:
        out[names[tp.topic]][tp.partition] = tp.offset
    return dict(out)


def input_end_offsets(bootstrap: str, load: Workload) -> dict[str, dict[int, int]]:
    """The high watermarks of the app's input topics, named as committed_offsets names them."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:8]}"})
    try:
        return {f"input{i}": {p: c.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1]
                              for p in range(PARTITIONS)}
                for i, t in enumerate(load.inputs)}
    finally:
        c.close()
