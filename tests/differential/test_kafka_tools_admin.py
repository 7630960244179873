"""Differential: Kafka 4.4's administration tools against Kafka and against Shoal (docs/kafka-differences.md,
"Kafka's command-line tools"): kafka-topics, kafka-configs, kafka-get-offsets, kafka-delete-records,
kafka-log-dirs, kafka-leader-election, kafka-features, kafka-metadata-quorum and kafka-client-metrics.

Each test sets up the same state on both brokers, runs the same commands (one JVM per broker, tests/helpers/
kafka_tools.py) and compares their exit codes and what they print, normalised (tests/helpers/tool_output.py).
Output about other tests' topics on the shared Kafka (and Shoal's internal topics) is left out: lines are kept when
they name this test's topics.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers.differential import Pair, Target, assert_same, known_difference
from tests.helpers.kafka_tools import barrier, on_pair, tool
from tests.helpers.tool_output import outcome
from tests.helpers.tool_state import BASE_TIMESTAMP, create_topic, json_file, offsets_topic, produce
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

METADATA = 3
REFUSED = "org.apache.kafka.common.errors.InvalidConfigurationException:"


def naming(lines: list[list[str]], *bases: str) -> list[list[str]]:
    """The lines that name one of `bases` (whole tokens, or `base-N` partitions), blank lines dropped."""
    ours = re.compile(rf"^({'|'.join(map(re.escape, bases))})(-\d{{1,4}}|:.*)?$")
    return [line for line in lines if any(ours.match(t) for t in line)]


# ------------------------------------------------------------------------------------------------- kafka-topics

def cluster_min_isr(seen: dict) -> list[tuple[str, str]]:
    """Where kafka-topics lists min.insync.replicas=1 among a topic's configs, taken out of `seen`: Kafka 4.4's
    storage tool sets it as a cluster-wide dynamic broker config, which kafka-topics shows as a topic's own
    (and --topics-with-overrides lists every topic for it); Shoal has no such dynamic default. A topic line left
    with no configs by it under --topics-with-overrides is dropped. The configs of a line are sorted: the order
    of DescribeConfigs' entries is a hash map's in Kafka, alphabetical in Shoal."""
    found: dict[str, list[tuple[str, str]]] = {}
    for side, runs in seen.items():
        found[side] = []
        for label, run in runs.items():
            kept = []
            for line in run["stdout"]:
                if "TopicId:" in line and "Configs:" in line:
                    at = line.index("Configs:") + 1
                    items = sorted(",".join(line[at:]).split(",")) if line[at:] else []
                    if "min.insync.replicas=1" in items:
                        items.remove("min.insync.replicas=1")
                        found[side].append((label, line[1]))
                        if not items and label == "describe, overrides":
                            continue
                    line = [*line[:at], ",".join(items)] if items else line[:at]
                kept.append(line)
            run["stdout"] = kept
    return {side: sorted(pairs) for side, pairs in found.items()}


def test_kafka_topics(pair: Pair) -> None:
    def script(t: Target) -> dict:
        b = ["--bootstrap-server", t.bootstrap]
        with t.raw() as c:
            offsets_topic(c)
        topic, other, made = t.unique("tool-topic"), t.unique("tool-other"), t.unique("tool-made")
        ours = "|".join((topic, other, made))
        return {
            "create": tool("kafka-topics", *b, "--create", "--topic", topic, "--partitions", "3",
                           "--config", "retention.ms=1000000", "--config", "max.message.bytes=2000"),
            "create other": tool("kafka-topics", *b, "--create", "--topic", other, "--replication-factor", "1"),
            "create existing": tool("kafka-topics", *b, "--create", "--topic", topic),
            "create existing, if not exists": tool("kafka-topics", *b, "--create", "--topic", topic,
                                                   "--if-not-exists"),
            "create, bad name": tool("kafka-topics", *b, "--create", "--topic", "bad name!"),
            "create, replication factor 3": tool("kafka-topics", *b, "--create", "--topic", t.unique("tool-rf"),
                                                 "--replication-factor", "3"),
            "create, no partitions": tool("kafka-topics", *b, "--create", "--topic", t.unique("tool-zero"),
                                          "--partitions", "0"),
            "create, bad config value": tool("kafka-topics", *b, "--create", "--topic", t.unique("tool-bad"),
                                             "--config", "retention.ms=soon"),
            "create, unknown config": tool("kafka-topics", *b, "--create", "--topic", t.unique("tool-bad"),
                                           "--config", "no.such.config=1"),
            "create, replica assignment": tool("kafka-topics", *b, "--create", "--topic", made,
                                               "--replica-assignment", "1,1"),
            "barrier, after creating": barrier(t),
            "describe": tool("kafka-topics", *b, "--describe", "--topic", topic),
            "describe, regex": tool("kafka-topics", *b, "--describe", "--topic", f"{topic[:-4]}.*"),
            "describe, missing": tool("kafka-topics", *b, "--describe", "--topic", t.unique("tool-missing")),
            "describe, missing, if exists": tool("kafka-topics", *b, "--describe", "--topic",
                                                 t.unique("tool-missing"), "--if-exists"),
            "alter, more partitions": tool("kafka-topics", *b, "--alter", "--topic", topic, "--partitions", "5"),
            "alter, fewer partitions": tool("kafka-topics", *b, "--alter", "--topic", topic, "--partitions", "2"),
            "alter, same partitions": tool("kafka-topics", *b, "--alter", "--topic", topic, "--partitions", "5"),
            "alter, missing topic": tool("kafka-topics", *b, "--alter", "--topic", t.unique("tool-missing"),
                                         "--partitions", "5"),
            "barrier, after altering": barrier(t),
            "describe after alter": tool("kafka-topics", *b, "--describe", "--topic", topic),
            # over every topic of ours (a regex): other tests' topics come and go between the tool's listing and
            # its describing
            "describe, overrides": tool("kafka-topics", *b, "--describe", "--topics-with-overrides", "--topic", ours),
            "describe, under-replicated": tool("kafka-topics", *b, "--describe", "--under-replicated-partitions",
                                               "--topic", ours),
            "describe, unavailable": tool("kafka-topics", *b, "--describe", "--unavailable-partitions", "--topic",
                                          ours),
            "describe, at min isr": tool("kafka-topics", *b, "--describe", "--at-min-isr-partitions", "--topic", ours),
            "describe, under min isr": tool("kafka-topics", *b, "--describe", "--under-min-isr-partitions", "--topic",
                                            ours),
            "list": tool("kafka-topics", *b, "--list"),
            "list, exclude internal": tool("kafka-topics", *b, "--list", "--exclude-internal"),
            "list, internal only": tool("kafka-topics", *b, "--list", "--topic", "__consumer_offsets"),
            "delete": tool("kafka-topics", *b, "--delete", "--topic", other),
        }

    runs = on_pair(pair, script)
    # Kafka's brokers see a deletion once the controller's record reaches their metadata image: the next
    # commands run when the topic is gone from both brokers' metadata
    for t in pair:
        with t.raw() as c:
            gone = {"topics": [{"name": _named(t, "tool-other")}], "allow_auto_topic_creation": False}
            wait_until(lambda c=c, gone=gone: c.call(METADATA, 12, gone).topics[0].error_code != 0, 30,
                       "the deleted topic gone from the metadata")
    after = on_pair(pair, lambda t: {
        "delete again": tool("kafka-topics", "--bootstrap-server", t.bootstrap, "--delete", "--topic",
                             _named(t, "tool-other")),
        "delete, if exists": tool("kafka-topics", "--bootstrap-server", t.bootstrap, "--delete", "--topic",
                                  _named(t, "tool-other"), "--if-exists"),
        "list after delete": tool("kafka-topics", "--bootstrap-server", t.bootstrap, "--list"),
    })
    runs = {side: {**runs[side], **after[side]} for side in runs}
    bases = ("tool-topic", "tool-other", "tool-made")

    def shape(label: str, seen: dict) -> dict:
        if label.startswith(("list", "describe,")) and label != "describe, missing":
            # the order of topics is that of Kafka's metadata image (a hash map's) where the tool does not sort
            seen["stdout"] = sorted(naming(seen["stdout"], *bases))
        return seen

    seen = outcome(pair, runs, shape)
    known_difference(cluster_min_isr(seen), kafka=[
        ("describe", "tool-topic"), ("describe after alter", "tool-topic"), ("describe, overrides", "tool-made"),
        ("describe, overrides", "tool-other"), ("describe, overrides", "tool-topic"), ("describe, regex", "tool-topic"),
    ], shoal=[],
        reason="min.insync.replicas, Kafka's cluster-wide dynamic default")
    assert_same(seen, "kafka-topics")


# ------------------------------------------------------------------------------------------------ kafka-configs

def test_kafka_configs(pair: Pair) -> None:
    """Alterations, then (after a barrier: Kafka's broker sees them moments after its controller answered) the
    describes and deletions, then (another barrier) what is left."""
    def script(t: Target) -> dict:
        b = ["--bootstrap-server", t.bootstrap]
        with t.raw() as c:
            topic = create_topic(t, c, "tool-cfg")
        group, client, user, metrics = t.unique("tool-grp"), t.unique("tool-cl"), t.unique("tool-u"), t.unique("tool-cm")

        def configs(*args: str) -> object:
            return tool("kafka-configs", *b, *args)
        topics, groups = ["--entity-type", "topics", "--entity-name", topic], ["--entity-type", "groups",
                                                                              "--entity-name", group]
        clients, users = ["--entity-type", "clients", "--entity-name", client], ["--entity-type", "users",
                                                                                "--entity-name", user]
        ips, broker = ["--entity-type", "ips", "--entity-name", "127.0.0.9"], ["--entity-type", "brokers",
                                                                              "--entity-name", "1"]
        return {
            "topic, add": configs("--alter", *topics, "--add-config",
                                  "retention.ms=123456,cleanup.policy=[compact,delete],max.message.bytes=5000"),
            # the shared Kafka is not reconfigured broker-wide: a config no broker reads, deleted again
            "broker, unknown config": configs("--alter", *broker, "--add-config", "tool.test.no.such.config=1"),
            "client quota, add": configs("--alter", *clients, "--add-config",
                                         "producer_byte_rate=1024,consumer_byte_rate=2048"),
            "user quota, add": configs("--alter", *users, "--add-config", "request_percentage=50"),
            "user and client quota, add": configs("--alter", *users, *clients, "--add-config",
                                                  "producer_byte_rate=4096"),
            "ip quota, add": configs("--alter", *ips, "--add-config", "connection_creation_rate=10"),
            "quota, unknown key": configs("--alter", *clients, "--add-config", "bytes_per_fortnight=1"),
            "group, add": configs("--alter", *groups, "--add-config",
                                  "consumer.session.timeout.ms=50000,share.record.lock.duration.ms=15000"),
            "group, bad value": configs("--alter", *groups, "--add-config", "consumer.session.timeout.ms=1"),
            "group, unknown": configs("--alter", *groups, "--add-config", "consumer.no.such=1"),
            "client metrics, add": configs("--alter", "--entity-type", "client-metrics", "--entity-name", metrics,
                                           "--add-config", "interval.ms=5000,metrics=org.apache.kafka.producer"),
            "barrier, after the alterations": barrier(t),
            "topic, describe": configs("--describe", *topics),
            "broker, describe the unknown config": configs("--describe", *broker),
            "broker, delete the unknown config": configs("--alter", *broker, "--delete-config",
                                                         "tool.test.no.such.config"),
            "client quota, describe": configs("--describe", *clients),
            "user quota, describe": configs("--describe", *users),
            "user and client quota, describe": configs("--describe", *users, *clients),
            "ip quota, describe": configs("--describe", *ips),
            "ip quota, delete": configs("--alter", *ips, "--delete-config", "connection_creation_rate"),
            "group, describe": configs("--describe", *groups),
            "group, describe all": configs("--describe", *groups, "--all"),
            "client metrics, describe": configs("--describe", "--entity-type", "client-metrics", "--entity-name",
                                                metrics),
            "topic, delete one": configs("--alter", *topics, "--delete-config", "retention.ms"),
            "topic, delete one not set": configs("--alter", *topics, "--delete-config", "segment.ms"),
            "topic, unknown config": configs("--alter", *topics, "--add-config", "no.such.config=1"),
            "topic, bad value": configs("--alter", *topics, "--add-config", "retention.ms=abc"),
            "topic, bad enum": configs("--alter", *topics, "--add-config", "cleanup.policy=sometimes"),
            "topic, missing": configs("--describe", "--entity-type", "topics", "--entity-name",
                                      t.unique("tool-missing")),
            "topic, alter missing": configs("--alter", "--entity-type", "topics", "--entity-name",
                                            t.unique("tool-missing"), "--add-config", "retention.ms=1"),
            "broker, static config": configs("--alter", *broker, "--add-config", "log.dirs=/tmp/x"),
            "broker, unknown broker": configs("--describe", "--entity-type", "brokers", "--entity-name", "7"),
            "broker logger, describe": configs("--describe", "--entity-type", "broker-loggers", "--entity-name",
                                               "1"),
            "barrier, after the deletions": barrier(t),
            "topic, describe after": configs("--describe", *topics),
            "topic, describe all": configs("--describe", *topics, "--all"),
            "broker, describe": configs("--describe", *broker),
        }

    seen = outcome(pair, on_pair(pair, script))
    # --all: each config's row by its name (DescribeConfigs' entries come in a hash map's order in Kafka)
    for side in seen:
        for label in ("topic, describe all", "group, describe all"):
            lines = seen[side][label]["stdout"]
            seen[side][label]["stdout"] = [lines[0], dict(sorted((line[0].split("=")[0], line) for line in lines[1:]))]
    # min.insync.replicas: Kafka's cluster-wide dynamic default, a synonym of the topic's (see "Topics and configs")
    rows = {side: seen[side]["topic, describe all"]["stdout"][1].pop("min.insync.replicas") for side in seen}
    known_difference(rows, kafka=["min.insync.replicas=1", "sensitive=false",
                                  "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1,",
                                  "DEFAULT_CONFIG:min.insync.replicas=1}"],
                     shoal=["min.insync.replicas=1", "sensitive=false", "synonyms={DEFAULT_CONFIG:min.insync.replicas=1}"],
                     reason="min.insync.replicas is not a cluster-wide dynamic config")
    # a broker config Kafka does not know: Kafka takes it (a plugin's, perhaps) and describes it as sensitive;
    # Shoal refuses it (see "Topics and configs")
    unknown = ("broker, unknown config", "broker, describe the unknown config", "broker, delete the unknown config")
    known_difference({side: [(seen[side][label]["exit"], seen[side][label]["stdout"][1:] or
                              [line[-5:] for line in seen[side][label]["stderr"][1:2]]) for label in unknown]
                      for side in seen},
                     kafka=[(0, []), (0, [["tool.test.no.such.config=null", "sensitive=true",
                                           "synonyms={DYNAMIC_BROKER_CONFIG:tool.test.no.such.config=null}"]]),
                            (0, [])],
                     shoal=[(1, [[REFUSED, "Unknown", "broker", "config", "tool.test.no.such.config"]]), (0, []),
                            (1, [[REFUSED, "Unknown", "broker", "config", "tool.test.no.such.config"]])],
                     reason="DescribeConfigs: a broker config Kafka does not know")
    for side in seen:
        for label in unknown:
            del seen[side][label]
    # Kafka lists each of its log4j loggers, Shoal its one (docs/kafka-differences.md, "Broker loggers")
    loggers = {side: [line[0] for line in seen[side].pop("broker logger, describe")["stdout"][1:]] for side in seen}
    known_difference({side: ("root=INFO" in names, len(names) > 50) for side, names in loggers.items()},
                     kafka=(True, True), shoal=(True, False), reason="Broker loggers: one logger")
    assert_same(seen, "kafka-configs")


def _named(t: Target, base: str) -> str:
    """The name `t.unique(base)` gave in this test (the latest)."""
    return [name for name, b in t.names().items() if b == base][-1]


# ----------------------------------------------------------------------------------------- kafka-client-metrics

def test_kafka_client_metrics(pair: Pair) -> None:
    def script(t: Target) -> dict:
        name, missing = t.unique("tool-cm"), t.unique("tool-cm-none")

        def cm(*args: str) -> object:
            return tool("kafka-client-metrics", "--bootstrap-server", t.bootstrap, *args)
        return {
            "alter": cm("--alter", "--name", name, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
                        "--interval", "10000", "--match", "client_id=abc,client_software_name=apache-kafka-java"),
            "barrier 1": barrier(t),
            "describe": cm("--describe", "--name", name),
            "alter interval": cm("--alter", "--name", name, "--interval", "20000"),
            "alter, empty metrics": cm("--alter", "--name", name, "--metrics", ""),
            "barrier 2": barrier(t),
            "describe after": cm("--describe", "--name", name),
            # every subscription matches no client of the shared Kafka (other tests' telemetry), and is deleted
            "only an interval": cm("--alter", "--name", missing, "--interval", "1000", "--match",
                                   "client_id=tool-cm-nobody"),
            "barrier 3": barrier(t),
            "describe, only an interval": cm("--describe", "--name", missing),
            "list": cm("--list"),
            "describe all": cm("--describe"),
            "unknown selector": cm("--alter", "--name", name, "--match", "nosuch=1"),
            "bad regex": cm("--alter", "--name", name, "--match", "client_id=(a"),
            "interval too short": cm("--alter", "--name", name, "--interval", "10"),
            "interval too long": cm("--alter", "--name", name, "--interval", "3600001"),
            "generated name": cm("--alter", "--generate-name", "--interval", "10000", "--match",
                                 "client_id=tool-cm-nobody"),
            "no name": cm("--alter", "--interval", "10000"),
            "delete": cm("--delete", "--name", name),
            "barrier 4": barrier(t),
            "describe deleted": cm("--describe", "--name", name),
            "delete missing": cm("--delete", "--name", t.unique("tool-cm-never")),
            "delete the other": cm("--delete", "--name", missing),
        }

    def shape(label: str, seen: dict) -> dict:
        if label == "list":  # other tests' subscriptions left out; the order is a hash map's in Kafka
            seen["stdout"] = sorted(naming(seen["stdout"], "tool-cm", "tool-cm-none"))
        if label == "describe all":  # each subscription's block of lines, ours only, in name order
            blocks: list[list[list[str]]] = []
            for line in seen["stdout"]:
                if line[:3] == ["Client", "metrics", "configs"]:
                    blocks.append([])
                blocks[-1].append(line)
            seen["stdout"] = sorted(b for b in blocks if naming(b[:1], "tool-cm", "tool-cm-none"))
        return seen

    runs = on_pair(pair, script)
    generated = {side: re.search(r"config for (\S+)\.", runs[side]["generated name"].stdout) for side in runs}
    runs_after = on_pair(pair, lambda t: {"delete the generated one": tool(
        "kafka-client-metrics", "--bootstrap-server", t.bootstrap, "--delete", "--name", generated[t.name].group(1))})
    assert_same(outcome(pair, {side: {**runs[side], **runs_after[side]} for side in runs}, shape),
                "kafka-client-metrics")


# ------------------------------------------------------------- kafka-get-offsets, kafka-delete-records, log dirs

def test_kafka_get_offsets_delete_records_and_log_dirs(pair: Pair, tmp_path) -> None:
    def script(t: Target) -> dict:
        b = ["--bootstrap-server", t.bootstrap]
        with t.raw() as c:
            topic = create_topic(t, c, "tool-offsets", 3)
            empty = create_topic(t, c, "tool-empty")
            for p in range(2):  # partition 2 stays empty
                produce(c, topic, p, [f"v{i}".encode() for i in range(6 + p)], per_batch=2)
        deletions = json_file(tmp_path, f"{t.name}-delete.json", {"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "offset": 2}, {"topic": topic, "partition": 1, "offset": 99},
            {"topic": topic, "partition": 2, "offset": -1}]})
        high = json_file(tmp_path, f"{t.name}-delete-all.json", {"version": 1, "partitions": [
            {"topic": topic, "partition": 1, "offset": -1}]})
        bad = json_file(tmp_path, f"{t.name}-bad.json", {"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "offset": 2}, {"topic": topic, "partition": 0, "offset": 3}]})

        def offsets(*args: str) -> object:
            return tool("kafka-get-offsets", *b, *args)
        return {
            "latest": offsets("--topic", topic),
            "earliest": offsets("--topic", topic, "--time", "-2"),
            "earliest by name": offsets("--topic", topic, "--time", "earliest"),
            "max timestamp": offsets("--topic", topic, "--time", "-3"),
            "by timestamp": offsets("--topic", topic, "--time", str(BASE_TIMESTAMP + 3000)),
            "after the last timestamp": offsets("--topic", topic, "--time", str(BASE_TIMESTAMP + 60_000)),
            "earliest local": offsets("--topic", topic, "--time", "-4"),
            "latest tiered": offsets("--topic", topic, "--time", "-5"),
            "earliest pending upload": offsets("--topic", topic, "--time", "-6"),
            "partitions": offsets("--topic", topic, "--partitions", "1,2"),
            "topic-partitions": offsets("--topic-partitions", f"{topic}:1-,{empty}"),
            "regex": offsets("--topic", f"{topic[:-4]}.*"),
            "no such topic": offsets("--topic", t.unique("tool-none")),
            "no such partition": offsets("--topic", topic, "--partitions", "7"),
            "bad time": offsets("--topic", topic, "--time", "yesterday"),
            "delete records": tool("kafka-delete-records", *b, "--offset-json-file", deletions),
            "delete records, to the end": tool("kafka-delete-records", *b, "--offset-json-file", high),
            "delete records, a partition twice": tool("kafka-delete-records", *b, "--offset-json-file", bad),
            "earliest after": offsets("--topic", topic, "--time", "-2"),
            "latest after": offsets("--topic", topic),
            "max timestamp after": offsets("--topic", topic, "--time", "-3"),
            "log dirs": tool("kafka-log-dirs", *b, "--describe", "--topic-list", f"{topic},{empty}"),
            "log dirs, a broker": tool("kafka-log-dirs", *b, "--describe", "--topic-list", empty,
                                       "--broker-list", "1"),
            "log dirs, no such broker": tool("kafka-log-dirs", *b, "--describe", "--topic-list", empty,
                                             "--broker-list", "1,5"),
        }

    def shape(label: str, seen: dict) -> dict:
        if label.startswith("delete records"):  # the tool prints partitions in a hash map's order
            seen["stdout"] = seen["stdout"][:2] + sorted(seen["stdout"][2:])
        if label.startswith("log dirs") and seen["exit"] == 0:
            seen["stdout"] = seen["stdout"][:2] + [log_dirs(line) for line in seen["stdout"][2:]]
        return seen

    seen = outcome(pair, on_pair(pair, script), shape)
    assert_same(seen, "kafka-get-offsets, kafka-delete-records, kafka-log-dirs")


def log_dirs(line: list[str]) -> object:
    """kafka-log-dirs' JSON with the log directory's path (each broker's own) left out and partitions sorted."""
    data = json.loads(" ".join(line))
    for broker in data["brokers"]:
        for d in broker["logDirs"]:
            d["logDir"] = "<dir>"
            d["partitions"].sort(key=lambda p: p["partition"])
    return data


# ---------------------------------------------------------------------------------------- kafka-leader-election

def test_kafka_leader_election(pair: Pair, tmp_path) -> None:
    """(--all-topic-partitions is not compared: on the run's shared Kafka, other tests' topics come and go between
    the tool's listing and its election.)"""
    def script(t: Target) -> dict:
        b = ["--bootstrap-server", t.bootstrap]
        with t.raw() as c:
            topic = create_topic(t, c, "tool-elect", 2)
        missing = t.unique("tool-none")
        listed = json_file(tmp_path, f"{t.name}-elect.json", {"partitions": [
            {"topic": topic, "partition": 1}, {"topic": missing, "partition": 0}]})
        twice = json_file(tmp_path, f"{t.name}-twice.json", {"partitions": [
            {"topic": topic, "partition": 1}, {"topic": topic, "partition": 1}]})

        def elect(*args: str) -> object:
            return tool("kafka-leader-election", *b, *args)
        return {
            "preferred": elect("--election-type", "preferred", "--topic", topic, "--partition", "0"),
            "unclean": elect("--election-type", "unclean", "--topic", topic, "--partition", "1"),
            "from a file": elect("--election-type", "preferred", "--path-to-json-file", listed),
            "a partition twice": elect("--election-type", "preferred", "--path-to-json-file", twice),
            "no such partition": elect("--election-type", "preferred", "--topic", topic, "--partition", "9"),
            "no such topic": elect("--election-type", "unclean", "--topic", missing, "--partition", "0"),
            "no election type": elect("--topic", topic, "--partition", "0"),
        }

    seen = outcome(pair, on_pair(pair, script))
    assert_same(seen, "kafka-leader-election")


# ------------------------------------------------------------------------ kafka-features, kafka-metadata-quorum

def test_kafka_features_and_metadata_quorum(pair: Pair) -> None:
    def script(t: Target) -> dict:
        b = ["--bootstrap-server", t.bootstrap]

        def features(*args: str) -> object:
            return tool("kafka-features", *b, *args)
        # nothing here changes the shared Kafka: upgrades to the current level, dry runs and refused updates
        return {
            "describe": features("describe"),
            "upgrade to the current level": features("upgrade", "--feature", "transaction.version=2"),
            "downgrade, dry run": features("downgrade", "--feature", "transaction.version=1", "--dry-run"),
            "upgrade, unknown feature": features("upgrade", "--feature", "nosuch.version=1"),
            "upgrade, too high": features("upgrade", "--feature", "group.version=9"),
            "upgrade, downgrading": features("upgrade", "--feature", "transaction.version=1"),
            "downgrade, upgrading": features("downgrade", "--feature", "group.version=3"),
            "version mapping": features("version-mapping", "--release-version", "4.0-IV3"),
            "feature dependencies": features("feature-dependencies", "--feature", "transaction.version=2"),
            "quorum status": tool("kafka-metadata-quorum", *b, "describe", "--status"),
            "quorum replication": tool("kafka-metadata-quorum", *b, "describe", "--replication"),
            "quorum replication, human readable": tool("kafka-metadata-quorum", *b, "describe", "--replication",
                                                       "--human-readable"),
            "quorum through a broker as a controller": tool("kafka-metadata-quorum", "--bootstrap-controller",
                                                            t.bootstrap, "describe", "--status"),
        }

    def shape(label: str, seen: dict) -> dict:
        for line in seen["stdout"]:
            for i, token in enumerate(line[:-1]):
                # the metadata log's offsets: Kafka's counts its records, Shoal's its own journal's
                if token in ("Epoch:", "HighWatermark:"):
                    line[i + 1] = "<offset>"
            if label.startswith("quorum replication") and line[:1] == ["1"]:
                line[2] = "<offset>"  # LogEndOffset
                line[4:-1] = ["<time>"] * (len(line) - 5)  # LastFetchTimestamp, LastCaughtUpTimestamp
        return seen

    seen = outcome(pair, on_pair(pair, script), shape)
    # What Shoal's features are (README, "Features"): no ELR, metadata.version 4.0-IV3, the
    # share.version of its share groups (KIP-932's 1); kraft.version and transaction.version as Kafka's.
    described = {side: {line[1]: line[3:8:2] for line in seen[side]["describe"]["stdout"]} for side in seen}
    known_difference(described, kafka={
        "eligible.leader.replicas.version": ["0", "1", "1"], "group.version": ["0", "1", "1"],
        "kraft.version": ["0", "1", "0"], "metadata.version": ["3.3-IV3", "4.4-IV2", "4.4-IV2"],
        "share.version": ["0", "2", "2"], "streams.version": ["0", "1", "1"], "transaction.version": ["0", "2", "2"]},
        shoal={"group.version": ["0", "1", "1"], "kraft.version": ["0", "1", "0"],
               "metadata.version": ["3.3-IV3", "4.0-IV3", "4.0-IV3"], "share.version": ["0", "1", "1"],
               "streams.version": ["0", "1", "1"], "transaction.version": ["0", "2", "2"]}, reason="Features")
    # the quorum's voter: Kafka's on its controller listener, Shoal's on its one listener
    voters = {side: seen[side]["quorum status"]["stdout"][6] for side in seen}
    known_difference(voters, kafka=["CurrentVoters:", '[{"id":', "1,", '"endpoints":', '["CONTROLLER://<host>:<port>"]}]'],
                     shoal=["CurrentVoters:", '[{"id":', "1,", '"endpoints":', '["PLAINTEXT://<host>:<port>"]}]'],
                     reason="The metadata quorum")
    for side in seen:
        del seen[side]["describe"]
        del seen[side]["quorum status"]["stdout"][6]
        # LeaderEpoch: the shared Kafka's quorum epoch grows with its controller's history in the run
        epoch = seen[side]["quorum status"]["stdout"][2]
        assert epoch[0] == "LeaderEpoch:" and int(epoch[1]) >= 1, epoch
        epoch[1] = "<epoch>"
    assert_same(seen, "kafka-features, kafka-metadata-quorum")
