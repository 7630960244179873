"""Topic administration against Kafka 4.4 and Shoal: CreateTopics (v2..v7), DeleteTopics (by name and by id),
CreatePartitions, Metadata for topics and DescribeTopicPartitions paging, through raw requests (the exact fields and
messages are what is compared).

Every topic is named with `target.unique`. Kafka answers a CreateTopics once its controller has committed it, and its
broker's metadata follows a moment later, so a scenario that reads what it created waits for its metadata on both
brokers (tests/helpers/differential_admin.py). Where Kafka orders a list by a hash map or shuffles it (DeleteTopics,
Metadata with several invalid names), the rows are compared sorted, as docs/kafka-differences.md ("Topics and
configs") says.
"""

from __future__ import annotations

import uuid

import pytest

from tests.helpers.differential import Target, assert_same, known_difference
from tests.helpers.differential_admin import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_TOPIC_PARTITIONS,
    METADATA,
    ZERO_UUID,
    by_name,
    create_topics,
    metadata,
    wait_topics,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

UNKNOWN_ID = uuid.UUID("5d0b6c1e-0000-4000-8000-00000000d1ff")


def _topic(name: str, **fields) -> dict:
    return {"name": name, "num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": [], **fields}


def _assign(*replicas: list[int], first: int = 0) -> list[dict]:
    return [{"partition_index": first + i, "broker_ids": ids} for i, ids in enumerate(replicas)]


def _configs(**values: str | None) -> list[dict]:
    return [{"name": k.replace("_", "."), "value": v} for k, v in values.items()]


# CreateTopics cases: (topics with "{u}" standing for a unique base name, version, validate_only). The default
# topic config list in the v5+ answers is compared whole: names, values as given, sources, sensitivity, read-only.
CREATE_CASES = {
    "defaults": ([_topic("{u}")], 7, False),
    "validate only": ([_topic("{u}", num_partitions=3)], 7, True),
    "v2": ([_topic("{u}", num_partitions=2, replication_factor=1)], 2, False),
    "v3": ([_topic("{u}", num_partitions=1, replication_factor=1)], 3, False),
    "v4 validate only": ([_topic("{u}", num_partitions=2)], 4, True),
    "v5 configs as given": ([_topic("{u}", configs=_configs(retention_ms="+5", cleanup_policy=" compact , delete ",
                                                             preallocate="TRUE"))], 5, False),
    "v6": ([_topic("{u}", num_partitions=2)], 6, True),
    "name of 250 characters": ([_topic("n" * 250)], 7, False),
    "name of 249 characters": ([_topic("m" * 249)], 7, True),
    "illegal characters": ([_topic("a b"), _topic("a/b"), _topic("ü")], 7, False),
    "dot": ([_topic(".")], 7, False),
    "dot dot": ([_topic("..")], 7, False),
    "empty name": ([_topic("")], 7, False),
    "metadata log": ([_topic("__cluster_metadata")], 7, False),
    "replication factor above the brokers": ([_topic("{u}", replication_factor=2)], 7, False),
    "replication factor 0": ([_topic("{u}", replication_factor=0)], 7, False),
    "replication factor -2": ([_topic("{u}", replication_factor=-2)], 7, False),
    "partitions 0": ([_topic("{u}", num_partitions=0)], 7, False),
    "partitions -2": ([_topic("{u}", num_partitions=-2)], 7, False),
    "bad partitions and replication factor": ([_topic("{u}", num_partitions=0, replication_factor=0)], 7, False),
    "manual assignment": ([_topic("{u}", assignments=_assign([1], [1]))], 7, False),
    "assignment with partitions": ([_topic("{u}", num_partitions=2, assignments=_assign([1]))], 7, False),
    "assignment with replication factor": ([_topic("{u}", replication_factor=1, assignments=_assign([1]))], 7, False),
    "assignment to an unknown broker": ([_topic("{u}", assignments=_assign([7]))], 7, False),
    "assignment naming a broker twice": ([_topic("{u}", assignments=_assign([1, 1]))], 7, False),
    "assignment with an empty replica list": ([_topic("{u}", assignments=_assign([]))], 7, False),
    "assignment with a gap": ([_topic("{u}", assignments=_assign([1], first=1))], 7, False),
    "assignment of a partition twice": ([_topic("{u}", assignments=_assign([1]) + _assign([1]))], 7, False),
    "topic twice in the request": ([_topic("{u}"), _topic("{u}", num_partitions=2), _topic("{u}-other")], 7, True),
    "null config": ([_topic("{u}", configs=_configs(retention_ms=None, segment_ms=None))], 7, False),
    "unknown config": ([_topic("{u}", configs=_configs(no_such_config="1"))], 7, False),
    "config twice": ([_topic("{u}", configs=[{"name": "retention.ms", "value": "1"},
                                             {"name": "retention.ms", "value": "2"}])], 7, False),
    "compaction lags in conflict": ([_topic("{u}", configs=_configs(min_compaction_lag_ms="10",
                                                                    max_compaction_lag_ms="5"))], 7, False),
    "remote storage": ([_topic("{u}", configs=_configs(remote_storage_enable="true"))], 7, False),
    "internal config set": ([_topic("{u}", configs=[{"name": "internal.segment.bytes", "value": "65536"}])], 7, False),
    "empty cleanup policy": ([_topic("{u}", configs=_configs(cleanup_policy=""))], 7, True),
    "bad config and bad partitions": ([_topic("{u}", num_partitions=0, configs=_configs(retention_ms="x"))], 7,
                                      False),
    "several topics, some refused": ([_topic("{u}-a"), _topic("{u}-b", num_partitions=0), _topic("a b"),
                                      _topic("{u}-c", configs=_configs(segment_bytes="1"))], 7, False),
}


@pytest.mark.parametrize("case", CREATE_CASES)
def test_create_topics(pair, case):
    topics, version, validate_only = CREATE_CASES[case]

    def scenario(target: Target):
        base = target.unique("ct")
        body = [{**t, "name": t["name"].replace("{u}", base)} for t in topics]
        with target.raw() as raw:
            answer = raw.call(CREATE_TOPICS, version, {"topics": body, "timeout_ms": 30_000,
                                                       "validate_only": validate_only})
        return answer.topics

    assert_same(_cluster_min_isr(pair.run(scenario)), f"CreateTopics: {case}")


def _cluster_min_isr(seen: dict) -> dict:
    """Pins the one documented difference of a created topic's configs and takes it out: min.insync.replicas is a
    cluster-wide dynamic config in Kafka 4.4 (written when it formats its metadata), a default in Shoal."""
    sources = {side: [c["config_source"] for t in answer for c in t["configs"] or []
                      if c["name"] == "min.insync.replicas"] for side, answer in seen.items()}
    if sources["kafka"] or sources["shoal"]:
        count = len(sources["kafka"])
        known_difference(sources, kafka=[3] * count, shoal=[5] * count,
                         reason="Topics and configs: min.insync.replicas is not a cluster-wide dynamic config")
        for answer in seen.values():
            for t in answer:
                for c in t["configs"] or []:
                    if c["name"] == "min.insync.replicas":
                        c["config_source"] = "<cluster default or default>"
    return seen


def test_create_topics_existing_and_colliding(pair):
    """A topic that exists, and one whose name differs from an existing one only by '.' against '_'."""
    def scenario(target: Target):
        base = target.unique("exists")
        with target.raw() as raw:
            create_topics(raw, {f"{base}.x": 1})
            answer = raw.call(CREATE_TOPICS, 7, {"topics": [_topic(f"{base}.x"), _topic(f"{base}_x")],
                                                 "timeout_ms": 30_000})
        return answer.topics

    assert_same(pair.run(scenario), "CreateTopics of an existing and a colliding topic")


VALUES = ["x", "-5", "-2", "-1", "0", "1", "1.5", "", " ", "2147483648", "9223372036854775808", "true", "TRUE",
          "delete,delete", "compact,", ",", " compact , delete ", "0:1,1:1", "*", "0:x", "CreateTime", "gzip", "-0.5",
          "1e3", "+5", "0x10", "1048576", " 7 "]
TOPIC_CONFIG_NAMES = [
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type", "compression.zstd.level",
    "delete.retention.ms", "errors.deadletterqueue.group.enable", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.decompressed.message.bytes",
    "max.message.bytes", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.copy.lag.bytes",
    "remote.copy.lag.ms", "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable",
    "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable", "internal.segment.bytes"]


def test_every_topic_config_with_good_and_bad_values(pair):
    """Each topic config (every type: bool, int, long, double, string enums, lists, the throttled-replica lists)
    with 28 values, in one validate-only CreateTopics: the error and message of each, or the value as given and
    its source. 1 064 comparisons in one request."""
    def scenario(target: Target):
        base = target.unique("v")
        topics = [_topic(f"{base}-{i}-{j}", configs=[{"name": name, "value": value}])
                  for i, name in enumerate(TOPIC_CONFIG_NAMES) for j, value in enumerate(VALUES)]
        with target.raw() as raw:
            answer = raw.call(CREATE_TOPICS, 7, {"topics": topics, "timeout_ms": 30_000, "validate_only": True})
        out = {}
        for t in answer.topics:
            _, i, j = t.name.rsplit("-", 2)
            name = TOPIC_CONFIG_NAMES[int(i)]
            out[f"{name}={VALUES[int(j)]!r}"] = [t.error_code, t.error_message] + [
                (c.value, c.config_source) for c in t.configs or [] if c.name == name]
        return out

    assert_same(pair.run(scenario), "validation of each topic config")


# DeleteTopics: each case makes topics (names "{u}-N" -> partitions) and sends entries of (name, id) where "{id:N}"
# is topic N's id. Kafka shuffles the results on purpose: they are compared sorted.
DELETE_CASES = {
    "by name": ({"0": 1}, [("{u}-0", None)]),
    "by id": ({"0": 2}, [(None, "{id:0}")]),
    "name and id": ({"0": 1}, [("{u}-0", "{id:0}")]),
    "neither": ({}, [(None, None)]),
    "unknown name": ({}, [("{u}-9", None)]),
    "unknown id": ({}, [(None, UNKNOWN_ID)]),
    "name twice": ({"0": 1}, [("{u}-0", None), ("{u}-0", None)]),
    "id twice": ({"0": 1}, [(None, "{id:0}"), (None, "{id:0}")]),
    "name of a topic also given by id": ({"0": 1}, [(None, "{id:0}"), ("{u}-0", None)]),
    "invalid name": ({}, [("a b", None)]),
    "several": ({"0": 1, "1": 1}, [("{u}-0", None), (None, "{id:1}"), ("{u}-9", None), (None, UNKNOWN_ID)]),
}


# v1 and v5 name topics only: the cases by name run at each version
DELETE_RUNS = [(case, version) for case, (_, entries) in DELETE_CASES.items() for version in (1, 5, 6)
               if version == 6 or all(name is not None and topic_id is None for name, topic_id in entries)]


@pytest.mark.parametrize(("case", "version"), DELETE_RUNS)
def test_delete_topics(pair, case, version):
    made, entries = DELETE_CASES[case]

    def scenario(target: Target):
        base = target.unique("del")
        with target.raw() as raw:
            ids = create_topics(raw, {f"{base}-{n}": count for n, count in made.items()}) if made else {}

            def resolve(value):
                if isinstance(value, str):
                    if value.startswith("{id:"):
                        return ids[f"{base}-{value[4:-1]}"]
                    return value.replace("{u}", base)
                return value

            wanted = [(resolve(name), resolve(topic_id) or ZERO_UUID) for name, topic_id in entries]
            body = ({"topics": [{"name": n, "topic_id": i} for n, i in wanted]} if version >= 6
                    else {"topic_names": [n for n, _ in wanted]})
            answer = raw.call(DELETE_TOPICS, version, {**body, "timeout_ms": 30_000})
            return sorted(answer.responses, key=lambda r: (r.name or "", str(r.get("topic_id", "")), r.error_code))

    assert_same(pair.run(scenario), f"DeleteTopics v{version}: {case}")


# CreatePartitions: (partitions the topic has, count asked, assignments or None, validate_only)
PARTITION_CASES = {
    "increase": (2, 4, None, False),
    "same count": (2, 2, None, False),
    "decrease": (2, 1, None, False),
    "zero": (2, 0, None, False),
    "validate only": (1, 5, None, True),
    "assignments": (1, 3, [[1], [1]], False),
    "too few assignments": (1, 4, [[1]], False),
    "assignment to an unknown broker": (1, 2, [[7]], False),
    "assignment naming a broker twice": (1, 2, [[1, 1]], False),
    "empty assignment": (1, 2, [[]], False),
    "unknown topic": (None, 3, None, False),
}


@pytest.mark.parametrize("case", PARTITION_CASES)
def test_create_partitions(pair, case):
    """The answer, then the partitions Metadata lists once the broker's metadata has the change."""
    before, count, assignments, validate_only = PARTITION_CASES[case]

    def scenario(target: Target):
        name = target.unique("cp")
        with target.raw() as raw:
            if before is not None:
                create_topics(raw, {name: before})
            answer = raw.call(CREATE_PARTITIONS, 3, {"topics": [{"name": name, "count": count, "assignments": None if
                                                                 assignments is None else [{"broker_ids": a} for a in
                                                                                           assignments]}],
                                                     "timeout_ms": 30_000, "validate_only": validate_only})
            after = None
            if before is not None:
                grown = answer.results[0].error_code == 0 and not validate_only
                wait_topics(raw, {name: count if grown else before})
                after = len(metadata(raw, [name]).topics[0].partitions)
        return {"answer": answer.results, "partitions": after}

    assert_same(pair.run(scenario), f"CreatePartitions: {case}")


def test_create_partitions_topic_twice(pair):
    def scenario(target: Target):
        name = target.unique("cp2")
        with target.raw() as raw:
            create_topics(raw, {name: 1})
            answer = raw.call(CREATE_PARTITIONS, 3, {"topics": [{"name": name, "count": 2, "assignments": None},
                                                                {"name": name, "count": 3, "assignments": None}],
                                                     "timeout_ms": 30_000, "validate_only": True})
        return answer.results

    assert_same(pair.run(scenario), "CreatePartitions naming a topic twice")


METADATA_CASES = {
    "unknown topic, no auto-creation": lambda u: ([{"name": u}], False, 12),
    "invalid names": lambda u: ([{"name": "a b"}, {"name": ""}, {"name": "x" * 300}, {"name": "."}], True, 12),
    "unknown id": lambda u: ([{"name": None, "topic_id": UNKNOWN_ID}], False, 12),
    "unknown topic v4": lambda u: ([{"name": u}], False, 4),
}


@pytest.mark.parametrize("case", METADATA_CASES)
def test_metadata_of_unknown_and_invalid_topics(pair, case):
    def scenario(target: Target):
        topics, auto, version = METADATA_CASES[case](target.unique("md"))
        body = {"topics": [{"topic_id": ZERO_UUID, **t} for t in topics], "allow_auto_topic_creation": auto,
                "include_topic_authorized_operations": True}
        with target.raw() as raw:
            answer = raw.call(METADATA, version, body)
        return by_name(answer.topics)

    assert_same(pair.run(scenario), f"Metadata: {case}")


def test_metadata_of_topics_by_name_and_id_with_authorized_operations(pair):
    def scenario(target: Target):
        name = target.unique("md-ops")
        with target.raw() as raw:
            ids = create_topics(raw, {name: 2})
            by_names = raw.call(METADATA, 10, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                               "include_cluster_authorized_operations": True,
                                               "include_topic_authorized_operations": True})
            by_id = raw.call(METADATA, 12, {"topics": [{"name": None, "topic_id": ids[name]}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": True})
        return {"by name": by_names.topics, "cluster operations": by_names.cluster_authorized_operations,
                "by id": by_id.topics}

    assert_same(pair.run(scenario), "Metadata of a topic by name and by id")


def test_metadata_auto_creation(pair):
    """Kafka's broker asks its controller to create the topic and answers the first request
    UNKNOWN_TOPIC_OR_PARTITION; Shoal creates it before answering. Once created both describe it alike."""
    def scenario(target: Target):
        name = target.unique("auto")
        body = {"topics": [{"name": name}], "allow_auto_topic_creation": True}
        with target.raw() as raw:
            first = raw.call(METADATA, 12, body).topics[0]
            wait_topics(raw, {name: 1})
            later = raw.call(METADATA, 12, body).topics[0]
        return {"first": [first.error_code, len(first.partitions)], "later": later}

    seen = pair.run(scenario)
    known_difference({side: seen[side].pop("first") for side in seen}, kafka=[3, 0], shoal=[0, 1],
                     reason="Topics and configs: Metadata auto-creation answers with the topic")
    assert_same(seen, "Metadata of an auto-created topic")


# DescribeTopicPartitions: two topics a (5 partitions) and b (2); (partition limit, cursor (topic, partition) with
# "a"/"b" for the topics, extra unknown topics asked).
PAGING_CASES = {
    "all at once": (2000, None, 0),
    "pages of 2": (2, None, 0),
    "pages of 3": (3, None, 0),
    "from a cursor": (2, ("a", 3), 0),
    "cursor past the last partition": (2, ("a", 9), 0),
    "cursor on the second topic": (4, ("b", 1), 0),
    "cursor on an unknown topic": (4, ("zz", 0), 0),
    "with an unknown topic": (4, None, 1),
}


@pytest.mark.parametrize("case", PAGING_CASES)
def test_describe_topic_partitions_paging(pair, case):
    """Every page until the cursor runs out (at most 8)."""
    limit, cursor, unknown = PAGING_CASES[case]

    def scenario(target: Target):
        base = target.unique("dtp")
        names = {"a": f"{base}-a", "b": f"{base}-b", "zz": f"{base}-zz"}
        with target.raw() as raw:
            create_topics(raw, {names["a"]: 5, names["b"]: 2})
            asked = [names["a"], names["b"]] + [f"{base}-unknown"] * unknown
            pages = []
            at = None if cursor is None else {"topic_name": names[cursor[0]], "partition_index": cursor[1]}
            for _ in range(8):
                page = raw.call(DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": n} for n in asked],
                                                              "response_partition_limit": limit, "cursor": at})
                pages.append(page)
                if page.next_cursor is None:
                    break
                at = {"topic_name": page.next_cursor.topic_name, "partition_index": page.next_cursor.partition_index}
        return pages

    assert_same(pair.run(scenario), f"DescribeTopicPartitions: {case}")


def test_describe_topic_partitions_of_a_deleted_topic(pair):
    def scenario(target: Target):
        name = target.unique("dtp-gone")
        with target.raw() as raw:
            create_topics(raw, {name: 1})
            raw.call(DELETE_TOPICS, 6, {"topics": [{"name": name, "topic_id": ZERO_UUID}], "timeout_ms": 30_000})
            wait_until(lambda: metadata(raw, [name]).topics[0].error_code == 3, 30, "the deletion to be visible")
            return raw.call(DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": name}],
                                                           "response_partition_limit": 10}).topics

    assert_same(pair.run(scenario), "DescribeTopicPartitions of a deleted topic")
