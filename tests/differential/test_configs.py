"""Configs against Kafka 4.4 and Shoal: DescribeConfigs (v1..v4) of topics, groups, the broker (its id and the
cluster-wide defaults), broker loggers and client-metrics subscriptions, with synonyms and documentation;
IncrementalAlterConfigs and AlterConfigs of topics, groups, the broker and broker loggers, each followed by a
describe of what it changed. Raw requests through our codecs.

Shoal runs here with the settings the Kafka fixture is given statically (its single-node replication factors and
node.id), so both report them from the same source. Changes to the broker itself are validate-only: the shared
Kafka must not be reconfigured broker-wide. What is compared and what is taken out:
- Kafka lists configs in hash-map order; rows are compared sorted by name.
- Documentation strings are Shoal's own (Kafka's prose is not copied): compared only as present or absent.
- The broker's listeners, log directories and KRaft wiring (process.roles, controller.*) are the machine's: their
  values and sources are taken out, their presence and types kept.
- Every other difference is listed in docs/kafka-differences.md ("Topics and configs") and pinned here with
  known_difference.
"""

from __future__ import annotations

import pytest

from tests.helpers.differential import Target, assert_same, known_difference
from tests.helpers.differential_admin import (
    APPEND,
    BROKER,
    BROKER_LOGGER,
    CLIENT_METRICS,
    DELETE,
    GROUP,
    SET,
    SUBTRACT,
    TOPIC,
    alter_configs,
    barrier,
    by_name,
    create_topics,
    describe_configs,
    incremental_alter,
)
from tests.helpers.kafka_process import SINGLE_NODE_CONFIG

pytestmark = pytest.mark.integration

REASON = "Topics and configs"


@pytest.fixture(scope="module")
def shoal_overrides() -> dict[str, str]:
    return {**SINGLE_NODE_CONFIG, "node.id": "1"}


def _rows(result, *, documentation: bool = False) -> list[dict]:
    """A describe result's rows sorted by name, documentation reduced to whether it is there."""
    rows = []
    for row in by_name(result["configs"]):
        row = dict(row)
        doc = row.pop("documentation")
        if documentation:
            row["documented"] = doc is not None
        rows.append(row)
    return rows


# --- the broker ---------------------------------------------------------------------------------------------------

# The machine's: listeners, log directories, KRaft wiring (Shoal is its own controller).
MACHINE = {"listeners", "advertised.listeners", "listener.security.protocol.map", "inter.broker.listener.name",
           "controller.listener.names", "controller.quorum.voters", "process.roles", "log.dirs"}
# Shoal's own configs (docs/kafka-differences.md): listed by Shoal only.
SHOAL_OWN = ["connections.max.unsent.bytes", "metrics.prometheus.listener", "shoal.loop.lag.warn.ms",
             "shoal.share.state.fsync.interval.ms"]
# Broker defaults Shoal chose differently (docs/kafka-differences.md): name -> (Kafka's, Shoal's).
OTHER_DEFAULTS = {
    "group.coordinator.rebalance.protocols": ("classic,consumer,streams", "classic,consumer,share,streams"),
    "group.initial.rebalance.delay.ms": ("3000", "0"),
    "log.dir": ("/tmp/kafka-logs", "./data"),
    "log.flush.interval.ms": (None, "0"),
    "node.id": (None, "1"),
    "offsets.topic.num.partitions": ("50", "4"),
    "offsets.topic.replication.factor": ("3", "1"),
    "queued.max.request.bytes": ("-1", "268435456"),
    "queued.max.requests": ("500", "100"),
    "sasl.enabled.mechanisms": ("GSSAPI", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
    "share.coordinator.state.topic.replication.factor": ("3", "1"),
    "socket.listen.backlog.size": ("50", "1024"),
    "socket.receive.buffer.bytes": ("102400", "-1"),
    "socket.send.buffer.bytes": ("102400", "-1"),
    "ssl.keystore.type": ("JKS", "PEM"),
    "ssl.truststore.type": ("JKS", "PEM"),
    "transaction.state.log.num.partitions": ("50", "4"),
    "transaction.state.log.replication.factor": ("3", "1"),
}
# Kafka-dynamic configs Shoal reads only at start, so it describes them read-only (docs/kafka-differences.md).
READ_ONLY_IN_SHOAL = sorted({
    "listeners", "listener.security.protocol.map", "sasl.enabled.mechanisms", "sasl.jaas.config", "ssl.cipher.suites",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.key.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol",
    "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
    "transaction.partition.verification.enable", "group.share.assignment.interval.ms"})


def _defaults(row: dict) -> str | None:
    return next((s["value"] for s in row["synonyms"] if s["source"] == 5 and s["name"] == row["name"]), None)


def test_describe_the_broker(pair):
    """Every config of broker 1 (v4, synonyms and documentation): the same names, and for each its value, source,
    type, read-only flag, sensitivity and synonyms. The documented differences (Shoal's own configs, other
    defaults, configs Shoal cannot change at run time, the cluster-wide min.insync.replicas) are pinned, then
    taken out, and the rest must be equal."""
    def scenario(target: Target):
        with target.raw() as raw:
            result = describe_configs(raw, [(BROKER, "1", None)], documentation=True).results[0]
        return {"error": [result.error_code, result.error_message], "rows": _rows(result, documentation=True)}

    seen = pair.run(scenario)
    rows = {side: {r["name"]: r for r in seen[side].pop("rows")} for side in seen}
    known_difference({side: sorted(set(rows[side]) - set(rows["kafka" if side == "shoal" else "shoal"]))
                      for side in rows}, kafka=[], shoal=SHOAL_OWN, reason=f"{REASON}: Shoal's own broker configs")
    for name in SHOAL_OWN:
        del rows["shoal"][name]
    known_difference({side: {n: _defaults(rows[side][n]) for n in OTHER_DEFAULTS} for side in rows},
                     kafka={n: k for n, (k, _) in OTHER_DEFAULTS.items()},
                     shoal={n: s for n, (_, s) in OTHER_DEFAULTS.items()}, reason=f"{REASON}: broker defaults")
    known_difference({side: sorted(n for n, r in rows[side].items() if r["read_only"]
                                   and not rows["kafka"][n]["read_only"]) for side in rows},
                     kafka=[], shoal=READ_ONLY_IN_SHOAL, reason=f"{REASON}: configs Shoal cannot change at run time")
    known_difference({side: rows[side]["min.insync.replicas"]["config_source"] for side in rows}, kafka=3, shoal=5,
                     reason=f"{REASON}: min.insync.replicas is not a cluster-wide dynamic config")
    for side in rows:
        for name, row in rows[side].items():
            if name in OTHER_DEFAULTS or name in MACHINE or name == "min.insync.replicas":
                rows[side][name] = {"type": row["config_type"], "sensitive": row["is_sensitive"]}
            elif name in READ_ONLY_IN_SHOAL:
                row["read_only"] = "<Kafka: dynamic, Shoal: read-only>"
    seen = {side: {**seen[side], "rows": rows[side]} for side in seen}
    assert_same(seen, "DescribeConfigs of the broker")


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_broker_configs_by_name(pair, version):
    """Chosen keys (a derived key unset, its hours, a double, a password, a list, an unknown name, an internal
    config not set), with synonyms (v1+) and documentation asked (v3+)."""
    keys = ["log.retention.ms", "log.retention.hours", "log.retention.bytes", "log.cleaner.io.max.bytes.per.second",
            "log.cleaner.min.cleanable.ratio", "sasl.jaas.config", "log.cleanup.policy", "no.such.config",
            "group.streams.num.warmup.replicas", "log.roll.jitter.ms", "max.decompressed.message.bytes",
            "message.max.bytes", "broker.id"]

    def scenario(target: Target):
        with target.raw() as raw:
            result = describe_configs(raw, [(BROKER, "1", keys)], documentation=True, version=version).results[0]
        return {"error": [result.error_code, result.error_message], "rows": _rows(result, documentation=True)}

    seen = pair.run(scenario)
    known_difference({side: [r["read_only"] for r in seen[side]["rows"] if r["name"] == "sasl.jaas.config"]
                      for side in seen}, kafka=[False], shoal=[True],
                     reason=f"{REASON}: configs Shoal cannot change at run time")
    for side in seen:
        for row in seen[side]["rows"]:
            if row["name"] == "sasl.jaas.config":
                row["read_only"] = "<Kafka: dynamic, Shoal: read-only>"
    assert_same(seen, f"DescribeConfigs v{version} of chosen broker configs")


def test_describe_the_cluster_wide_defaults(pair):
    """The broker resource named "": the cluster-wide dynamic configs. Kafka 4.4 has one (min.insync.replicas,
    written when it formats its metadata), Shoal none."""
    def scenario(target: Target):
        with target.raw() as raw:
            result = describe_configs(raw, [(BROKER, "", None)]).results[0]
        return {"error": [result.error_code, result.error_message],
                "names": [r["name"] for r in result.configs]}

    seen = pair.run(scenario)
    known_difference({side: seen[side].pop("names") for side in seen}, kafka=["min.insync.replicas"], shoal=[],
                     reason=f"{REASON}: min.insync.replicas is not a cluster-wide dynamic config")
    assert_same(seen, "DescribeConfigs of the cluster-wide defaults")


def test_describe_errors(pair):
    """Resources Kafka refuses or has nothing for, in one request: another broker's id, a name that is not a
    number, a broker logger named "" or another id, an invalid, empty or unknown topic, an empty group name, a
    client-metrics subscription named "". Then a request naming an unknown resource type next to a valid one
    (Kafka fails the whole request)."""
    def scenario(target: Target):
        unknown = target.unique("nosuch")
        resources = [(BROKER, "2", None), (BROKER, "x", None), (BROKER_LOGGER, "", None), (BROKER_LOGGER, "2", None),
                     (TOPIC, "a b", None), (TOPIC, "", None), (TOPIC, unknown, None), (GROUP, "", None),
                     (CLIENT_METRICS, "", None)]
        with target.raw() as raw:
            return {"refused": describe_configs(raw, resources).results,
                    "unknown type": describe_configs(raw, [(BROKER, "1", ["message.max.bytes"]),
                                                           (99, "x", None)]).results}

    assert_same(pair.run(scenario), "DescribeConfigs errors")


TWICE = {"broker": (BROKER, "1", "log.retention.bytes"), "topic": (TOPIC, "T", "retention.ms"),
         "group": (GROUP, "G", "consumer.session.timeout.ms")}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
@pytest.mark.parametrize("kind", TWICE)
def test_describe_a_resource_twice(pair, kind, version):
    """Kafka describes each copy (a topic, the broker, a group; every version both serve); Shoal the first,
    refusing the others (a guard against amplified answers), around another resource described once."""
    resource_type, name, key = TWICE[kind]

    def scenario(target: Target):
        with target.raw() as raw:
            resource = _resource(target, raw, name)
            other = (GROUP, _resource(target, raw, "G"), ["consumer.session.timeout.ms"]) if kind == "broker" \
                else (BROKER, "1", ["message.max.bytes"])
            results = describe_configs(raw, [(resource_type, resource, [key]), other, (resource_type, resource, [key])],
                                       version=version).results
        return [[r.error_code, r.error_message, [c.name for c in r.configs]] for r in results]

    first = [0, "", [key]]
    other = [0, "", ["consumer.session.timeout.ms" if kind == "broker" else "message.max.bytes"]]
    known_difference(pair.run(scenario), kafka=[first, other, first],
                     shoal=[first, other, [42, "Duplicate resource.", []]],
                     reason=f"{REASON}: a resource named twice in DescribeConfigs")


# --- topics -------------------------------------------------------------------------------------------------------

TOPIC_OVERRIDES = {"retention.ms": "+5", "cleanup.policy": " compact , delete ", "preallocate": "TRUE",
                   "min.cleanable.dirty.ratio": "5e-1", "compression.type": " gzip ", "max.message.bytes": "2000",
                   "internal.segment.bytes": "1048576", "follower.replication.throttled.replicas": "0:1"}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_a_topic(pair, version):
    """Every config of a topic with overrides given with spaces, signs and other spellings: values as Kafka prints
    them, sources, types (v3+), synonyms (Kafka's broker synonyms, derived keys dropped), an internal config set."""
    def scenario(target: Target):
        name = target.unique("desc")
        with target.raw() as raw:
            create_topics(raw, {name: 1}, TOPIC_OVERRIDES)
            everything = describe_configs(raw, [(TOPIC, name, None)], documentation=True, version=version).results[0]
            chosen = describe_configs(raw, [(TOPIC, name, ["retention.ms", "segment.ms", "no.such"])],
                                      synonyms=False, version=version).results[0]
        return {"all": [everything.error_code, everything.error_message, _rows(everything, documentation=True)],
                "chosen": _rows(chosen)}

    seen = pair.run(scenario)
    sources = {side: [r["config_source"] for r in seen[side]["all"][2] if r["name"] == "min.insync.replicas"]
               for side in seen}
    known_difference(sources, kafka=[3], shoal=[5],
                     reason=f"{REASON}: min.insync.replicas is not a cluster-wide dynamic config")
    for side in seen:
        for row in seen[side]["all"][2]:
            if row["name"] == "min.insync.replicas":
                row["config_source"] = row["synonyms"] = "<cluster default or default>"
    assert_same(seen, f"DescribeConfigs v{version} of a topic")


def _group_body(target: Target, overrides: dict[str, str]) -> tuple[str, list]:
    return target.unique("grp"), [(k, SET, v) for k, v in overrides.items()]


def test_describe_a_group(pair):
    """Every config of a group with overrides (given with spaces, a sign, upper case) and of one without; the
    internal ones (the assignor offload switches) are listed only when set, as given."""
    overrides = {"consumer.session.timeout.ms": "+50000", "share.auto.offset.reset": " earliest ",
                 "share.renew.acknowledge.enable": "TRUE", "share.isolation.level": "read_committed",
                 "streams.num.standby.replicas": "1", "errors.deadletterqueue.topic.name": " dlq ",
                 "consumer.assignor.offload.enable": "False", "share.assignor.offload.enable": "TRUE"}

    def scenario(target: Target):
        group, ops = _group_body(target, overrides)
        plain = target.unique("grp-plain")
        with target.raw() as raw:
            altered = incremental_alter(raw, [(GROUP, group, ops)]).responses
            barrier(raw, target.unique("barrier"))
            described = describe_configs(raw, [(GROUP, group, None), (GROUP, plain, None)], documentation=True)
        return {"alter": altered, "described": [[r.error_code, r.error_message, _rows(r, documentation=True)]
                                                for r in described.results]}

    assert_same(pair.run(scenario), "DescribeConfigs of groups")


# --- IncrementalAlterConfigs --------------------------------------------------------------------------------------

def _ops(*ops: tuple[str, int, str | None]) -> list:
    return list(ops)


# (resource type, name: "T" a fresh topic with cleanup.policy=compact and retention.ms=1000, "G" a fresh group,
#  "1"/"" the broker, else as given), operations, validate_only. Broker changes are always validate-only.
ALTER_CASES = {
    "topic set": (TOPIC, "T", _ops(("retention.ms", SET, "2000")), False),
    "topic set bad number": (TOPIC, "T", _ops(("retention.ms", SET, "x")), False),
    "topic set out of range": (TOPIC, "T", _ops(("retention.ms", SET, "-5")), False),
    "topic set null": (TOPIC, "T", _ops(("retention.ms", SET, None), ("segment.ms", SET, None)), False),
    "topic delete": (TOPIC, "T", _ops(("retention.ms", DELETE, None)), False),
    "topic delete unknown key": (TOPIC, "T", _ops(("no.such", DELETE, None)), False),
    "topic set unknown key": (TOPIC, "T", _ops(("no.such", SET, "1")), False),
    "topic append": (TOPIC, "T", _ops(("cleanup.policy", APPEND, "delete")), False),
    "topic append present": (TOPIC, "T", _ops(("cleanup.policy", APPEND, "compact")), False),
    "topic append to default": (TOPIC, "T", _ops(("leader.replication.throttled.replicas", APPEND, "0:1")), False),
    "topic append bad item": (TOPIC, "T", _ops(("cleanup.policy", APPEND, "foo")), False),
    "topic append with spaces": (TOPIC, "T", _ops(("cleanup.policy", APPEND, " delete ")), False),
    "topic append to a number": (TOPIC, "T", _ops(("retention.ms", APPEND, "1")), False),
    "topic subtract": (TOPIC, "T", _ops(("cleanup.policy", SUBTRACT, "compact")), False),
    "topic subtract absent": (TOPIC, "T", _ops(("cleanup.policy", SUBTRACT, "delete")), False),
    "topic subtract from a number": (TOPIC, "T", _ops(("retention.ms", SUBTRACT, "1")), False),
    "topic append null": (TOPIC, "T", _ops(("cleanup.policy", APPEND, None)), False),
    "topic key twice": (TOPIC, "T", _ops(("retention.ms", SET, "1"), ("retention.ms", SET, "2")), False),
    "topic lags in conflict": (TOPIC, "T", _ops(("min.compaction.lag.ms", SET, "10"),
                                                ("max.compaction.lag.ms", SET, "5")), False),
    "topic segment too small": (TOPIC, "T", _ops(("segment.bytes", SET, "100")), False),
    "topic remote storage": (TOPIC, "T", _ops(("remote.storage.enable", SET, "true")), False),
    "topic validate only": (TOPIC, "T", _ops(("retention.ms", SET, "5")), True),
    "unknown topic": (TOPIC, "nosuch", _ops(("retention.ms", SET, "1")), False),
    "unknown topic, bad value": (TOPIC, "nosuch", _ops(("retention.ms", SET, "x")), False),
    "invalid topic name": (TOPIC, "a b", _ops(("retention.ms", SET, "1")), False),
    "empty topic name": (TOPIC, "", _ops(("retention.ms", SET, "1")), False),
    "group set": (GROUP, "G", _ops(("consumer.session.timeout.ms", SET, "50000")), False),
    "group out of the broker's bounds": (GROUP, "G", _ops(("consumer.session.timeout.ms", SET, "5")), False),
    "group above an int": (GROUP, "G", _ops(("consumer.session.timeout.ms", SET, "99999999999")), False),
    "group heartbeat above the session": (GROUP, "G", _ops(("consumer.heartbeat.interval.ms", SET, "50000")), False),
    "group unknown key": (GROUP, "G", _ops(("no.such", SET, "5")), False),
    "group append to a number": (GROUP, "G", _ops(("consumer.session.timeout.ms", APPEND, "5")), False),
    "group append to a list": (GROUP, "G", _ops(("streams.rack.aware.assignment.tags", APPEND, "zone")), False),
    "group empty name": (GROUP, "", _ops(("consumer.session.timeout.ms", SET, "50000")), False),
    "group share lock duration": (GROUP, "G", _ops(("share.record.lock.duration.ms", SET, "999999999")), False),
    "group share lock below its minimum": (GROUP, "G", _ops(("share.record.lock.duration.ms", SET, "999")), False),
    "group share auto offset reset": (GROUP, "G", _ops(("share.auto.offset.reset", SET, "sometime")), False),
    "group share duration": (GROUP, "G", _ops(("share.auto.offset.reset", SET, "by_duration:PT1H")), False),
    "group share isolation": (GROUP, "G", _ops(("share.isolation.level", SET, "x")), False),
    "group bad int": (GROUP, "G", _ops(("share.delivery.count.limit", SET, "x")), False),
    "group null": (GROUP, "G", _ops(("share.delivery.count.limit", SET, None)), False),
    "group dead-letter topic": (GROUP, "G", _ops(("errors.deadletterqueue.topic.name", SET, "__x")), False),
    "group streams standby": (GROUP, "G", _ops(("streams.num.standby.replicas", SET, "5")), False),
    "group streams assignor": (GROUP, "G", _ops(("streams.assignor.name", SET, "foo")), False),
    "group streams tags": (GROUP, "G", _ops(("streams.rack.aware.assignment.tags", SET, "a,,b")), False),
    "group assignment interval": (GROUP, "G", _ops(("consumer.assignment.interval.ms", SET, "999999")), False),
    "group consumer assignor offload": (GROUP, "G", _ops(("consumer.assignor.offload.enable", SET, "false")), False),
    "group share assignor offload": (GROUP, "G", _ops(("share.assignor.offload.enable", SET, "TRUE")), False),
    "group assignor offload not a boolean": (GROUP, "G", _ops(("consumer.assignor.offload.enable", SET, "maybe"),
                                                               ("share.assignor.offload.enable", SET, "1")), False),
    "group assignor offload deleted": (GROUP, "G", _ops(("share.assignor.offload.enable", DELETE, None)), False),
    "broker read-only": (BROKER, "", _ops(("log.dirs", SET, "/x")), True),
    "broker per-broker config cluster-wide": (BROKER, "", _ops(("listeners", SET, "PLAINTEXT://:1")), True),
    "broker bad value": (BROKER, "", _ops(("log.retention.bytes", SET, "x")), True),
    "broker out of range": (BROKER, "", _ops(("message.max.bytes", SET, "-1")), True),
    "broker set": (BROKER, "1", _ops(("log.retention.bytes", SET, "12345")), True),
    "broker delete": (BROKER, "1", _ops(("log.retention.bytes", DELETE, None)), True),
    "broker another id": (BROKER, "2", _ops(("log.retention.bytes", SET, "1")), True),
    "broker id not a number": (BROKER, "x", _ops(("log.retention.bytes", SET, "1")), True),
    "broker append": (BROKER, "", _ops(("log.cleanup.policy", APPEND, "compact")), True),
    "broker append to a number": (BROKER, "", _ops(("log.retention.bytes", APPEND, "1")), True),
    "broker security config": (BROKER, "1", _ops(("ssl.keystore.location", SET, "/x")), True),
    "broker null": (BROKER, "", _ops(("log.retention.bytes", SET, None)), True),
    "broker key twice": (BROKER, "", _ops(("log.retention.bytes", SET, "1"), ("log.retention.bytes", SET, "2")), True),
    "broker connections": (BROKER, "", _ops(("max.connections", SET, "10")), True),
    "broker unknown operation": (BROKER, "", _ops(("log.retention.bytes", 7, "1")), True),
    "logger root": (BROKER_LOGGER, "1", _ops(("root", SET, "INFO")), True),
    "logger bad level": (BROKER_LOGGER, "1", _ops(("root", SET, "LOUD")), True),
    "logger append": (BROKER_LOGGER, "1", _ops(("root", APPEND, "INFO")), True),
    "logger subtract": (BROKER_LOGGER, "1", _ops(("root", SUBTRACT, "INFO")), True),
    "logger another broker": (BROKER_LOGGER, "2", _ops(("root", SET, "INFO")), True),
    "logger empty name": (BROKER_LOGGER, "", _ops(("root", SET, "INFO")), True),
    "logger delete root": (BROKER_LOGGER, "1", _ops(("root", DELETE, None)), True),
    "logger null": (BROKER_LOGGER, "1", _ops(("root", SET, None)), True),
    "logger key twice": (BROKER_LOGGER, "1", _ops(("root", SET, "INFO"), ("root", SET, "WARN")), True),
    "unknown resource type": (99, "x", _ops(("a", SET, "1")), False),
    "client metrics": (CLIENT_METRICS, "C", _ops(("interval.ms", SET, "1000")), True),
}


def _resource(target: Target, raw, name: str) -> str:
    if name == "T":
        topic = target.unique("alt")
        create_topics(raw, {topic: 1}, {"cleanup.policy": "compact", "retention.ms": "1000"})
        return topic
    if name in ("G", "C", "nosuch"):
        return target.unique({"G": "grp", "C": "cm", "nosuch": "nosuch"}[name])
    return name


@pytest.mark.parametrize("case", ALTER_CASES)
def test_incremental_alter_configs(pair, case):
    """The answer, then (topics and groups) the configs the operations named, described."""
    kind, name, ops, validate_only = ALTER_CASES[case]

    def scenario(target: Target):
        with target.raw() as raw:
            resource = _resource(target, raw, name)
            answer = incremental_alter(raw, [(kind, resource, ops)], validate_only=validate_only).responses
            after = None
            if kind in (TOPIC, GROUP) and answer[0].error_code == 0:
                barrier(raw, target.unique("barrier"))
                keys = sorted({key for key, _, _ in ops})
                after = _rows(describe_configs(raw, [(kind, resource, keys)]).results[0])
        return {"answer": answer, "after": after}

    seen = pair.run(scenario)
    if case == "broker unknown operation":  # Kafka: UNKNOWN_SERVER_ERROR for topics and groups too
        pass
    assert_same(seen, f"IncrementalAlterConfigs: {case}")


UNKNOWN_OPERATION = {
    "topic": (TOPIC, "T"),
    "group": (GROUP, "G"),
}


@pytest.mark.parametrize("kind", UNKNOWN_OPERATION)
def test_incremental_alter_with_an_unknown_operation(pair, kind):
    """Kafka fails (UNKNOWN_SERVER_ERROR, no message) on an operation it does not define for a topic or a group;
    Shoal answers INVALID_REQUEST as Kafka does for the broker."""
    resource_type, name = UNKNOWN_OPERATION[kind]

    def scenario(target: Target):
        with target.raw() as raw:
            resource = _resource(target, raw, name)
            answer = incremental_alter(raw, [(resource_type, resource, [("retention.ms", 7, "1")])]).responses[0]
        return [answer.error_code, answer.error_message]

    known_difference(pair.run(scenario), kafka=[-1, None], shoal=[42, "Unknown operations type 7"],
                     reason=f"{REASON}: an unknown IncrementalAlterConfigs operation")


def test_incremental_alter_a_resource_twice_and_several(pair):
    """The same topic twice (every copy refused) next to a valid change of another topic and a group."""
    def scenario(target: Target):
        with target.raw() as raw:
            twice, other, group = _resource(target, raw, "T"), _resource(target, raw, "T"), target.unique("grp")
            change = [("retention.ms", SET, "1")]
            answer = incremental_alter(raw, [(TOPIC, twice, change), (TOPIC, other, change), (TOPIC, twice, change),
                                             (GROUP, group, [("share.delivery.count.limit", SET, "3")])]).responses
        return answer

    assert_same(pair.run(scenario), "IncrementalAlterConfigs naming a resource twice")


# Broker configs Kafka accepts that Shoal refuses, and Kafka's range checks of the configs Shoal accepts without
# using them (docs/kafka-differences.md).
BROKER_REFUSALS = {
    "unknown config, cluster-wide": ("", "foo.bar", "1",
                                     [0, None], [40, "Unknown broker config foo.bar"]),
    "unknown config, this broker": ("1", "foo.bar", "1", [0, None], [40, "Unknown broker config foo.bar"]),
    "listener-prefixed config": ("1", "listener.name.plaintext.ssl.keystore.location", "/x", [0, None],
                                 [40, "Unknown broker config listener.name.plaintext.ssl.keystore.location"]),
    "an unused config out of its range": ("", "background.threads", "0", [
        42, "Invalid value 0 for configuration background.threads: Value must be at least 1"], [0, None]),
}


@pytest.mark.parametrize("case", BROKER_REFUSALS)
def test_broker_configs_kafka_accepts_or_checks_more(pair, case):
    name, key, value, kafka, shoal = BROKER_REFUSALS[case]

    def scenario(target: Target):
        with target.raw() as raw:
            answer = incremental_alter(raw, [(BROKER, name, [(key, SET, value)])], validate_only=True).responses[0]
        return [answer.error_code, answer.error_message]

    known_difference(pair.run(scenario), kafka=kafka, shoal=shoal,
                     reason=f"{REASON}: broker configs Shoal does not know or use")


# --- AlterConfigs (legacy) ----------------------------------------------------------------------------------------

LEGACY_CASES = {
    "topic replaced": (TOPIC, "T", [("retention.ms", "2000")], False),
    "topic emptied": (TOPIC, "T", [], False),
    "topic validate only": (TOPIC, "T", [("segment.ms", "100000")], True),
    "topic bad value": (TOPIC, "T", [("retention.ms", "soon")], False),
    "topic unknown key": (TOPIC, "T", [("no.such", "1")], False),
    "topic null value": (TOPIC, "T", [("retention.ms", None), ("segment.ms", None)], False),
    "topic key twice": (TOPIC, "T", [("retention.ms", "1"), ("retention.ms", "2")], False),
    "unknown topic": (TOPIC, "nosuch", [("retention.ms", "1")], False),
    "group": (GROUP, "G", [("share.delivery.count.limit", "3")], False),
    "group empty name": (GROUP, "", [("share.delivery.count.limit", "3")], False),
    "broker validate only": (BROKER, "1", [("log.retention.bytes", "5")], True),
    "broker read-only": (BROKER, "", [("log.dirs", "/x")], True),
    "broker another id": (BROKER, "2", [("log.retention.bytes", "5")], True),
    "broker logger": (BROKER_LOGGER, "1", [("root", "INFO")], True),
    "unknown resource type": (99, "x", [("a", "1")], False),
}


@pytest.mark.parametrize("case", LEGACY_CASES)
@pytest.mark.parametrize("version", [0, 2])
def test_alter_configs(pair, case, version):
    """AlterConfigs replaces a resource's dynamic configs with those given; the answer, then the topic's or group's
    configs described (the ones the topic was made with and the ones given)."""
    kind, name, configs, validate_only = LEGACY_CASES[case]

    def scenario(target: Target):
        with target.raw() as raw:
            resource = _resource(target, raw, name)
            answer = alter_configs(raw, [(kind, resource, configs)], validate_only=validate_only,
                                   version=version).responses
            after = None
            if kind in (TOPIC, GROUP) and answer[0].error_code == 0:
                barrier(raw, target.unique("barrier"))
                keys = sorted({"cleanup.policy", "retention.ms"} | {key for key, _ in configs})
                after = _rows(describe_configs(raw, [(kind, resource, keys)]).results[0])
        return {"answer": answer, "after": after}

    assert_same(pair.run(scenario), f"AlterConfigs v{version}: {case}")


def test_alter_configs_resource_twice(pair):
    """Kafka 4.4 fails to build its answer (an IllegalStateException on the duplicate key) and never answers: the
    connection stays muted. Shoal refuses both copies as IncrementalAlterConfigs does. Kafka gets 2 s."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic = _resource(target, raw, "T")
            raw.sock.settimeout(2)
            try:
                answer = alter_configs(raw, [(TOPIC, topic, [("retention.ms", "1")])] * 2).responses
            except TimeoutError:
                return "no answer"
        return [[r.error_code, r.error_message] for r in answer]

    known_difference(pair.run(scenario), kafka="no answer",
                     shoal=[[42, "Each resource must appear at most once."]] * 2,
                     reason=f"{REASON}: AlterConfigs naming a resource twice")


# --- broker loggers and client-metrics subscriptions --------------------------------------------------------------

def test_describe_the_root_logger_and_a_subscription(pair):
    """The root logger's row (Kafka lists every log4j logger: only root is compared, as
    docs/kafka-differences.md says), and a client-metrics subscription set with spaces, then with defaults."""
    def scenario(target: Target):
        subscription = target.unique("cm")
        with target.raw() as raw:
            logger = describe_configs(raw, [(BROKER_LOGGER, "1", ["root"])], documentation=True).results
            altered = incremental_alter(raw, [(CLIENT_METRICS, subscription, [
                ("metrics", SET, "org.apache.kafka.producer. , x"), ("interval.ms", SET, " 1000 ")])]).responses
            barrier(raw, target.unique("barrier"))
            described = describe_configs(raw, [(CLIENT_METRICS, subscription, None)]).results[0]
            chosen = describe_configs(raw, [(CLIENT_METRICS, subscription, ["match", "no.such"])],
                                      synonyms=False).results[0]
        return {"logger": logger, "altered": altered, "described": _rows(described), "chosen": _rows(chosen)}

    seen = pair.run(scenario)
    for side in seen:  # the root logger's level is each broker's configured one
        for row in seen[side]["logger"][0]["configs"]:
            row["value"] = "<level>"
    assert_same(seen, "DescribeConfigs of the root logger and of a client-metrics subscription")
