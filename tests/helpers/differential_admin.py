"""Raw admin requests for the differential suite's topic, config and security scenarios (tests/differential/), and
waiting for Kafka's metadata to catch up with its controller.

Kafka's CreateTopics and CreatePartitions answer once the controller has committed the change; the broker's
metadata cache (what Metadata, DescribeConfigs and DescribeTopicPartitions read) follows a few milliseconds later.
Shoal applies a change before it answers. A scenario that reads what it just changed waits with `wait_topics`
(or `barrier`, for config changes) on both brokers, so both are driven through the same steps.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

METADATA, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 3, 19, 20, 37
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
DESCRIBE_TOPIC_PARTITIONS = 75
ZERO_UUID = uuid.UUID(int=0)
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32  # config resource types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def create_topics(raw: RawClient, topics: Mapping[str, int], configs: Mapping[str, str] | None = None) -> dict:
    """Create each topic (name -> partitions), asserting success; wait until the broker's metadata lists them.
    Returns name -> topic id."""
    answer = raw.call(CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": count, "replication_factor": -1,
         "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
        for name, count in topics.items()], "timeout_ms": 30_000})
    assert all(t.error_code == 0 for t in answer.topics), answer
    wait_topics(raw, topics)
    return {t.name: t.topic_id for t in answer.topics}


def metadata(raw: RawClient, names: Iterable[str]):
    return raw.call(METADATA, 12, {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False})


def wait_topics(raw: RawClient, topics: Mapping[str, int] | Iterable[str], timeout: float = 30.0) -> None:
    """Until Metadata lists every topic with a leader for each partition (and, given a mapping, that many
    partitions)."""
    counts = dict(topics) if isinstance(topics, Mapping) else {name: None for name in topics}

    def ready() -> bool:
        listed = {t.name: t for t in metadata(raw, counts).topics}
        return all(t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
                   and (counts[name] is None or len(t.partitions) == counts[name])
                   for name, t in listed.items())

    wait_until(ready, timeout, f"the broker's metadata to list {sorted(counts)}")


def wait_topics_gone(raw: RawClient, names: Iterable[str], timeout: float = 30.0) -> None:
    names = list(names)
    wait_until(lambda: all(t.error_code == 3 for t in metadata(raw, names).topics), timeout,
               f"the broker's metadata to drop {names}")


def barrier(raw: RawClient, name: str) -> None:
    """Until the broker's metadata has every change its controller made before now: Kafka applies them in order,
    so once a topic created now is listed, earlier config changes are visible too (Shoal: at once). `name` is a
    new topic's."""
    create_topics(raw, {name: 1})


def group_configs(raw: RawClient, group: str, names: Iterable[str]) -> dict[str, str | None]:
    """The named configs of a group as DescribeConfigs v4 lists them (a config not set is absent)."""
    answer = describe_configs(raw, [(GROUP, group, list(names))], synonyms=False)
    return {c.name: c.value for c in answer.results[0].configs}


def wait_group_configs(raw: RawClient, group: str, configs: Mapping[str, str], timeout: float = 30.0) -> None:
    """Until the group coordinator has `configs` (just set on `group`), not only DescribeConfigs: Kafka's broker
    publishes each metadata change to its metadata cache (what DescribeConfigs reads) first and to its group
    coordinator after, in one publisher's turn, so a request sent as soon as DescribeConfigs reads the change back
    may still find the group's old configs (under load, for several requests). Once a later change (to a group no
    test uses) reads back, the earlier one has reached every part of the broker. Shoal applies a change before it
    answers."""
    wanted = dict(configs)
    wait_until(lambda: group_configs(raw, group, wanted) == wanted, timeout,
               f"the configs of group {group} to read back: {wanted}")
    config_barrier(raw, timeout)


def config_barrier(raw: RawClient, timeout: float = 30.0) -> None:
    """Until every config change made before it has reached the group coordinator (a deletion included, which
    cannot be read back as a value): a change to a group no test uses, read back (see wait_group_configs)."""
    marker, value = f"config-barrier-{uuid.uuid4().hex[:12]}", {"share.auto.offset.reset": "latest"}
    answer = incremental_alter(raw, [(GROUP, marker, [(k, SET, v) for k, v in value.items()])])
    assert answer.responses[0].error_code == 0, answer
    wait_until(lambda: group_configs(raw, marker, value) == value, timeout,
               f"the configs of group {marker} to read back: {value}")


def describe_configs(raw: RawClient, resources: list[tuple[int, str, list[str] | None]], *, synonyms: bool = True,
                     documentation: bool = False, version: int = 4):
    return raw.call(DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": t, "resource_name": n, "configuration_keys": keys} for t, n, keys in resources],
        "include_synonyms": synonyms, "include_documentation": documentation})


def incremental_alter(raw: RawClient, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]], *,
                      validate_only: bool = False, version: int = 1):
    return raw.call(INCREMENTAL_ALTER_CONFIGS, version, {"resources": [
        {"resource_type": t, "resource_name": n,
         "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}
        for t, n, ops in resources], "validate_only": validate_only})


def alter_group(raw: RawClient, group: str, configs: Mapping[str, str | None]):
    """IncrementalAlterConfigs of one group: SET each config, DELETE those given None; the whole answer."""
    return incremental_alter(raw, [(GROUP, group, [(k, SET if v is not None else DELETE, v)
                                                   for k, v in configs.items()])])


def alter_configs(raw: RawClient, resources: list[tuple[int, str, list[tuple[str, str | None]]]], *,
                  validate_only: bool = False, version: int = 2):
    return raw.call(ALTER_CONFIGS, version, {"resources": [
        {"resource_type": t, "resource_name": n, "configs": [{"name": k, "value": v} for k, v in configs]}
        for t, n, configs in resources], "validate_only": validate_only})


def by_name(rows, key: str = "name") -> list:
    """Rows sorted by a field: for answers whose order Kafka takes from a hash map (see docs/kafka-differences.md,
    'Topics and configs')."""
    return sorted(rows, key=lambda row: (row[key] if isinstance(row, Mapping) else getattr(row, key)) or "")
