"""Raw StreamsGroupHeartbeat / StreamsGroupDescribe requests (KIP-1071) for tests, built with our codecs.

    topology = topology_of(subtopology("0", sources=["in"], changelogs=["app-store-changelog"]))
    answer = heartbeat(raw, group, "m1", 0, topology=topology)   # a join (epoch 0)
    answer = heartbeat(raw, group, "m1", answer["member_epoch"])  # a later heartbeat
    described = describe(raw, group)

Answers are plain dicts (decoded containers turned into dicts and lists).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests.helpers.differential_admin import alter_group, wait_group_configs
from tests.helpers.raw_client import RawClient

STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 88, 89
COORDINATOR_ERRORS = (14, 15, 16)  # load in progress, not available, not coordinator: retried


def plain(value: Any) -> Any:
    if isinstance(value, list):
        return [plain(v) for v in value]
    if hasattr(value, "items"):
        return {k: plain(v) for k, v in value.items() if not str(k).startswith("_")}
    return value


def topic_info(name: str, partitions: int = 0, replication_factor: int = 0,
               configs: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "partitions": partitions, "replication_factor": replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in (configs or {}).items()]}


def subtopology(sid: str, *, sources: Sequence[str] = (), changelogs: Iterable[str | dict] = (),
                sinks: Sequence[str] = (), repartition_sources: Iterable[str | dict] = (),
                copartition_groups: Sequence[dict] = (), regexes: Sequence[str] = ()) -> dict[str, Any]:
    def info(x: str | dict) -> dict[str, Any]:
        return topic_info(x) if isinstance(x, str) else x

    return {"subtopology_id": sid, "source_topics": list(sources), "source_topic_regex": list(regexes),
            "state_changelog_topics": [info(x) for x in changelogs], "repartition_sink_topics": list(sinks),
            "repartition_source_topics": [info(x) for x in repartition_sources],
            "copartition_groups": list(copartition_groups)}


def topology_of(*subtopologies: dict[str, Any], epoch: int = 1) -> dict[str, Any]:
    return {"epoch": epoch, "subtopologies": list(subtopologies)}


def heartbeat(raw: RawClient, group: str, member: str, epoch: int, *, topology: dict | None = None,
              version: int = 1, process: str = "process-1", owned: tuple[list, list, list] | None = None,
              retry: bool = False, **fields: Any) -> dict[str, Any]:
    """One heartbeat. A join (epoch 0) sends the process id, an empty task list and a rebalance timeout; `owned`
    the (active, standby, warm-up) tasks the member reports; `fields` override any request field. With `retry`,
    coordinator errors (the group's partition still loading) are retried for up to 30 s."""
    joining = epoch == 0
    empty: tuple[list, list, list] = ([], [], [])
    tasks = owned if owned is not None else (empty if joining else (None, None, None))
    body = {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000 if joining else -1,
            "topology": topology, "active_tasks": tasks[0], "standby_tasks": tasks[1], "warmup_tasks": tasks[2],
            "process_id": process if joining else None, "user_endpoint": None,
            "client_tags": [] if joining else None, "task_offsets": None, "task_end_offsets": None,
            "shutdown_application": False}
    body.update(fields)
    deadline = time.monotonic() + 30
    while True:
        answer = plain(raw.call(STREAMS_GROUP_HEARTBEAT, version, body))
        if not retry or answer["error_code"] not in COORDINATOR_ERRORS or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def describe(raw: RawClient, *groups: str, version: int = 1) -> list[dict[str, Any]]:
    body = {"group_ids": list(groups), "include_authorized_operations": False, "include_topology_description": False}
    return plain(raw.call(STREAMS_GROUP_DESCRIBE, version, body))["groups"]


def set_group_configs(raw: RawClient, group: str, configs: Mapping[str, str], *, wait: bool = True
                      ) -> tuple[int, str | None]:
    """IncrementalAlterConfigs SET of group configs: (error code, message). With `wait`, until the group
    coordinator has them, not only DescribeConfigs (tests/helpers/differential_admin.wait_group_configs)."""
    [response] = alter_group(raw, group, configs).responses
    if wait and response.error_code == 0:
        wait_group_configs(raw, group, configs)
    return response.error_code, response.error_message


def wait_for_topics(raw: RawClient, names: Sequence[str], timeout: float = 30.0) -> None:
    """Until the broker's Metadata knows every topic of `names` (a topic just created reaches Kafka's brokers, its
    group coordinator included, a moment after CreateTopics answers)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = plain(raw.call(3, 12, {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False}))
        if all(t["error_code"] == 0 and t["partitions"] for t in answer["topics"]) or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def find_coordinator(raw: RawClient, group: str, timeout: float = 30.0) -> None:
    """Until the group's coordinator answers (Kafka creates and loads `__consumer_offsets` on first use)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = plain(raw.call(10, 4, {"key_type": 0, "coordinator_keys": [group]}))
        if answer["coordinators"][0]["error_code"] == 0 or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def tasks(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a heartbeat answer a comparison looks at."""
    keep = ("error_code", "error_message", "member_id", "member_epoch", "heartbeat_interval_ms", "status",
            "active_tasks", "standby_tasks", "warmup_tasks", "endpoint_information_epoch",
            "partitions_by_user_endpoint", "task_offset_interval_ms", "acceptable_recovery_lag",
            "topology_description_required", "acceptable_recovery_lag_legacy")
    return {k: answer[k] for k in keep if k in answer}
