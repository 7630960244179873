"""Streams groups (KIP-1071) against Kafka 4.4: StreamsGroupHeartbeat and StreamsGroupDescribe through raw requests,
the same steps on both brokers, the answers compared field by field.

Each group is made deterministic with group configs set on both sides: no initial rebalance delay and no assignment
interval (Kafka's defaults, 3 s and 1 s, hold assignments back by wall-clock time), in effect in Kafka's group
coordinator before the first heartbeat (`set_group_configs` waits for that, not only for DescribeConfigs). Internal topics are created by
the broker after a heartbeat that finds them missing; a scenario heartbeats until they exist and compares the first
and the settled answers, not how many heartbeats that took.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import java_clients
from tests.helpers.differential import Target, assert_same
from tests.helpers.kafka_tools import on_pair, tool
from tests.helpers.raw_client import RawClient
from tests.helpers.streams_requests import (
    describe,
    find_coordinator,
    heartbeat,
    plain,
    set_group_configs,
    subtopology,
    tasks,
    topic_info,
    topology_of,
    wait_for_topics,
)
from tests.helpers.tool_output import outcome

pytestmark = pytest.mark.integration

FAST = {"streams.initial.rebalance.delay.ms": "0", "streams.assignment.interval.ms": "0"}
MISSING_INTERNAL_TOPICS = 3


def _topics(target: Target, **partitions: int) -> dict[str, str]:
    """Create topics (name base -> partitions) with unique names; returns base -> name."""
    names = {base: target.unique(base) for base in partitions}
    admin = AdminClient(target.client_config())
    futures = admin.create_topics([NewTopic(names[b], n, 1) for b, n in partitions.items()])
    for f in futures.values():
        f.result(timeout=30)
    with target.raw() as raw:
        wait_for_topics(raw, list(names.values()))
    return names


def _group(target: Target, raw: RawClient, base: str = "streams") -> str:
    gid = target.unique(base)
    find_coordinator(raw, gid)
    assert set_group_configs(raw, gid, FAST) == (0, None)
    return gid


def _settle(raw: RawClient, gid: str, member: str, answer: dict[str, Any], owned: tuple | None = None
            ) -> dict[str, Any]:
    """Heartbeat until the answer no longer reports missing internal topics (the broker creates them)."""
    deadline = time.monotonic() + 30
    epoch = answer["member_epoch"]
    while any(s["status_code"] == MISSING_INTERNAL_TOPICS for s in answer.get("status") or ()):
        assert time.monotonic() < deadline, answer
        time.sleep(0.05)
        answer = heartbeat(raw, gid, member, epoch, owned=owned)
        epoch = answer["member_epoch"] if answer["error_code"] == 0 else epoch
    return answer


def _unordered_missing(answer: dict[str, Any]) -> dict[str, Any]:
    """The missing internal topics named in sorted order: Kafka lists them in the order of a Java HashMap of their
    names, which differ between the two brokers by their unique suffixes (Shoal's order for the same names is
    checked against Kafka's in tests/unit/groups/test_streams_topology.py)."""
    prefix = "Internal topics are missing: "
    status = []
    for s in answer.get("status") or ():
        if s["status_code"] == MISSING_INTERNAL_TOPICS and s["status_detail"].startswith(prefix):
            s = {**s, "status_detail": prefix + ", ".join(sorted(s["status_detail"][len(prefix):].split(", ")))}
        status.append(s)
    return {**answer, "status": status}


def _owned(answer: dict[str, Any]) -> tuple[list, list, list]:
    return (answer["active_tasks"] or [], answer["standby_tasks"] or [], answer["warmup_tasks"] or [])


def _described(raw: RawClient, gid: str) -> dict[str, Any]:
    [group] = describe(raw, gid)
    group["members"] = sorted(group["members"], key=lambda m: m["member_id"])
    return group


# ------------------------------------------------------------------------------------------------ join
def test_join_creates_internal_topics_and_assigns(pair):
    """A word count's shape: a source topic, a repartition topic written by subtopology 0 and read by
    subtopology 1, a changelog of subtopology 1. The broker creates both internal topics with the partition counts
    it decides (the source topic's), then assigns every task to the one member."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, words=3)
        app = target.unique("app")
        repartition, changelog = f"{app}-counts-repartition", f"{app}-counts-changelog"
        topology = topology_of(
            subtopology("0", sources=[names["words"]], sinks=[repartition]),
            subtopology("1", repartition_sources=[repartition], changelogs=[changelog]))
        with target.raw() as raw:
            gid = _group(target, raw)
            joined = heartbeat(raw, gid, "member-1", 0, topology=topology, retry=True)
            described_first = _described(raw, gid)
            settled = _settle(raw, gid, "member-1", joined)
            following = heartbeat(raw, gid, "member-1", settled["member_epoch"], owned=_owned(settled))
            described = _described(raw, gid)
            metadata = plain(raw.call(3, 12, {"topics": [{"name": repartition}, {"name": changelog}],
                                              "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False}))
        return {"joined": _unordered_missing(tasks(joined)), "described_first": described_first, "settled": tasks(settled),
                "following": tasks(following), "described": described,
                "internal_topics": sorted((t["name"], len(t["partitions"]), t["error_code"])
                                          for t in metadata["topics"])}

    assert_same(pair.run(scenario), "a streams group's join, internal topics and assignment")


def test_version_0(pair):
    """StreamsGroupHeartbeat v0 (its AcceptableRecoveryLagLegacy, no MISSING_CLIENT_TAGS status) and
    StreamsGroupDescribe v0."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, legacy=1)
        topology = topology_of(subtopology("0", sources=[names["legacy"]]))
        with target.raw() as raw:
            gid = _group(target, raw, "v0")
            assert set_group_configs(raw, gid, {"streams.rack.aware.assignment.tags": "zone"}) == (0, None)
            joined = heartbeat(raw, gid, "m", 0, topology=topology, version=0, retry=True)
            again = heartbeat(raw, gid, "m", joined["member_epoch"], version=0, owned=_owned(joined))
            current = heartbeat(raw, gid, "m", again["member_epoch"], version=1)
            return {"joined": tasks(joined), "again": tasks(again), "v1": tasks(current),
                    "described": describe(raw, gid, version=0)}

    assert_same(pair.run(scenario), "StreamsGroupHeartbeat and StreamsGroupDescribe v0")


def test_missing_source_topics_and_copartitioning(pair):
    """A missing source topic and a copartition group over topics of different partition counts are reported in
    the heartbeat's status, as Kafka words them; the member joins, without tasks."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, left=2, right=3)
        missing = target.unique("absent")
        out = {}
        with target.raw() as raw:
            gid = _group(target, raw, "missing")
            out["missing"] = tasks(heartbeat(raw, gid, "m", 0, retry=True, topology=topology_of(
                subtopology("0", sources=[names["left"], missing]))))
            out["missing_described"] = _described(raw, gid)
            gid = _group(target, raw, "copartition")
            join = topology_of(subtopology("0", sources=[names["left"], names["right"]], copartition_groups=[
                {"source_topics": [0, 1], "source_topic_regex": [], "repartition_source_topics": []}]))
            out["copartition"] = tasks(heartbeat(raw, gid, "m", 0, retry=True, topology=join))
            out["copartition_described"] = _described(raw, gid)
        return out

    assert_same(pair.run(scenario), "missing source topics and copartitioning")


def test_two_members_reconcile(pair):
    """A second member joins a group whose one member owns every task: the first must revoke half (its epoch
    held back until it does), the second gets them once they are released."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, events=4)
        topology = topology_of(subtopology("0", sources=[names["events"]]))
        steps = []
        with target.raw() as raw:
            gid = _group(target, raw, "pair")
            a = heartbeat(raw, gid, "member-a", 0, topology=topology, process="process-a", retry=True)
            steps.append(tasks(a))
            b = heartbeat(raw, gid, "member-b", 0, topology=topology, process="process-b")
            steps.append(tasks(b))
            a = heartbeat(raw, gid, "member-a", a["member_epoch"], owned=_owned(a))
            steps.append(tasks(a))
            b = heartbeat(raw, gid, "member-b", b["member_epoch"], owned=([], [], []))
            steps.append(tasks(b))
            a = heartbeat(raw, gid, "member-a", a["member_epoch"], owned=_owned(a))
            steps.append(tasks(a))
            b = heartbeat(raw, gid, "member-b", b["member_epoch"], owned=([], [], []))
            steps.append(tasks(b))
            steps.append(_described(raw, gid))
            left = heartbeat(raw, gid, "member-b", -1)
            steps.append(tasks(left))
            steps.append(_described(raw, gid))
        return {"steps": steps}

    assert_same(pair.run(scenario), "two members reconciling")


# ----------------------------------------------------------------------------------------- error paths
def _unknown_member(raw, gid, topology, joined):
    return heartbeat(raw, gid, "nobody", 1)


def _greater_epoch(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-1", joined["member_epoch"] + 5)


def _smaller_epoch(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-1", joined["member_epoch"] - 1, owned=([], [], []))


def _invalid_topology(raw, gid, topology, joined):
    bad = topology_of(subtopology("0", sources=topology["subtopologies"][0]["source_topics"],
                                  changelogs=[topic_info("store-changelog", partitions=2)]))
    return heartbeat(raw, gid, "member-2", 0, topology=bad)


def _topology_mismatch(raw, gid, topology, joined):
    other = topology_of(subtopology("0", sources=topology["subtopologies"][0]["source_topics"],
                                    changelogs=["other-changelog"]))
    return heartbeat(raw, gid, "member-2", 0, topology=other)


def _newer_topology_epoch(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-2", 0, topology={**topology, "epoch": 2})


def _stale_topology_epoch(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-2", 0, topology={**topology, "epoch": 0})


def _regex_source(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-2", 0, topology=topology_of(subtopology("0", regexes=["in.*"])))


def _no_topology_on_join(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-2", 0)


def _topology_on_heartbeat(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-1", joined["member_epoch"], topology=topology)


def _no_rebalance_timeout(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-2", 0, topology=topology, rebalance_timeout_ms=-1)


def _tasks_on_join(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-2", 0, topology=topology,
                     owned=([{"subtopology_id": "0", "partitions": [0]}], [], []))


def _some_task_kinds(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-1", joined["member_epoch"], owned=([], None, []))


def _epoch_below_minus_two(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-1", -3)


def _empty_member_id(raw, gid, topology, joined):
    return heartbeat(raw, gid, "", 0, topology=topology)


def _unknown_task(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-1", joined["member_epoch"],
                     owned=([{"subtopology_id": "9", "partitions": [0]}], [], []))


def _task_out_of_range(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-1", joined["member_epoch"],
                     owned=([{"subtopology_id": "0", "partitions": [7]}], [], []))


def _leave_unknown_member(raw, gid, topology, joined):
    return heartbeat(raw, gid, "nobody", -1)


def _static_leave_without_instance(raw, gid, topology, joined):
    return heartbeat(raw, gid, "member-1", -2)


ERROR_CASES: dict[str, Callable[..., dict[str, Any]]] = {
    "unknown member": _unknown_member,
    "fenced: greater epoch": _greater_epoch,
    "fenced: smaller epoch": _smaller_epoch,
    "invalid topology": _invalid_topology,
    "topology mismatch": _topology_mismatch,
    "newer topology epoch": _newer_topology_epoch,
    "stale topology epoch": _stale_topology_epoch,
    "source topic regex": _regex_source,
    "no topology on join": _no_topology_on_join,
    "topology on a heartbeat": _topology_on_heartbeat,
    "no rebalance timeout": _no_rebalance_timeout,
    "tasks on join": _tasks_on_join,
    "one task kind null": _some_task_kinds,
    "epoch below -2": _epoch_below_minus_two,
    "empty member id": _empty_member_id,
    "unknown subtopology": _unknown_task,
    "task out of range": _task_out_of_range,
    "leave: unknown member": _leave_unknown_member,
    "static leave without instance id": _static_leave_without_instance,
}


def test_heartbeat_error_paths_leave_the_group_intact(pair):
    """Every error path of StreamsGroupHeartbeat answers Kafka's code and message, and the group is unchanged."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, source=2)
        topology = topology_of(subtopology("0", sources=[names["source"]]))
        out = {}
        with target.raw() as raw:
            for case, step in ERROR_CASES.items():
                gid = _group(target, raw, "errors")
                joined = heartbeat(raw, gid, "member-1", 0, topology=topology, retry=True)
                before = _described(raw, gid)
                answer = step(raw, gid, topology, joined)
                out[case] = {"answer": tasks(answer), "before": before, "after": _described(raw, gid)}
        return out

    assert_same(pair.run(scenario), "StreamsGroupHeartbeat's error paths")


def test_group_of_another_type(pair):
    """A streams member cannot join a consumer group's id, a consumer member cannot join a streams group's; a
    describe of either id with the other API says which type it is not."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, input=1)
        topology = topology_of(subtopology("0", sources=[names["input"]]))
        out: dict[str, Any] = {}
        with target.raw() as raw:
            consumer_group = target.unique("consumer-group")
            find_coordinator(raw, consumer_group)
            joined = plain(raw.call(68, 0, {
                "group_id": consumer_group, "member_id": "c1", "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [names["input"]],
                "server_assignor": None, "topic_partitions": []}))
            out["consumer_join"] = joined["error_code"]
            out["streams_join"] = tasks(heartbeat(raw, consumer_group, "s1", 0, topology=topology, retry=True))
            out["streams_heartbeat"] = tasks(heartbeat(raw, consumer_group, "s1", 1))
            out["streams_leave"] = tasks(heartbeat(raw, consumer_group, "s1", -1))
            out["streams_describe"] = describe(raw, consumer_group)
            streams_group = _group(target, raw)
            heartbeat(raw, streams_group, "s1", 0, topology=topology, retry=True)
            consumer = plain(raw.call(68, 0, {
                "group_id": streams_group, "member_id": "c1", "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [names["input"]],
                "server_assignor": None, "topic_partitions": []}))
            out["consumer_on_streams"] = {k: consumer[k] for k in ("error_code", "error_message")}
            described = plain(raw.call(69, 0, {"group_ids": [streams_group],
                                               "include_authorized_operations": False}))
            out["consumer_describe_of_streams"] = [{k: g[k] for k in ("error_code", "error_message")}
                                                   for g in described["groups"]]
            out["unknown_describe"] = describe(raw, target.unique("nothing-here"))
            classic_join = plain(raw.call(11, 9, {"group_id": streams_group, "session_timeout_ms": 30000,
                                                  "rebalance_timeout_ms": 30000, "member_id": "",
                                                  "group_instance_id": None, "protocol_type": "consumer",
                                                  "reason": None, "protocols": [{"name": "range", "metadata": b""}]}))
            out["classic_join_on_streams"] = {k: classic_join[k] for k in ("error_code", "member_id")}
            share = plain(raw.call(76, 1, {"group_id": streams_group, "member_id": "s" * 22, "member_epoch": 0,
                                           "rack_id": None, "subscribed_topic_names": [names["input"]]}))
            out["share_on_streams"] = {k: share[k] for k in ("error_code", "error_message")}
            described_classic = plain(raw.call(15, 6, {"groups": [streams_group],
                                                       "include_authorized_operations": False}))["groups"]
            out["describe_groups_of_streams"] = [{k: g[k] for k in ("error_code", "error_message", "group_state")}
                                                 for g in described_classic]
            # A share group's id, a classic group with a member, and a simple group (offsets only, no member):
            # the last is empty and gives way to the streams group, as an empty classic group does.
            share_group = target.unique("share-group")
            find_coordinator(raw, share_group)
            shared = plain(raw.call(76, 1, {"group_id": share_group, "member_id": "s" * 22, "member_epoch": 0,
                                            "rack_id": None, "subscribed_topic_names": [names["input"]]}))
            out["share_join"] = shared["error_code"]
            out["streams_on_share"] = tasks(heartbeat(raw, share_group, "s1", 0, topology=topology, retry=True))
            classic_group = target.unique("classic-group")
            find_coordinator(raw, classic_group)
            classic = plain(raw.call(11, 9, {"group_id": classic_group, "session_timeout_ms": 30000,
                                             "rebalance_timeout_ms": 30000, "member_id": "", "group_instance_id": None,
                                             "protocol_type": "consumer", "reason": None,
                                             "protocols": [{"name": "range", "metadata": b""}]}))
            out["classic_join"] = classic["error_code"]
            out["streams_on_classic"] = tasks(heartbeat(raw, classic_group, "s1", 0, topology=topology, retry=True))
            simple_group = target.unique("simple-group")
            find_coordinator(raw, simple_group)
            committed = plain(raw.call(8, 9, {
                "group_id": simple_group, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": names["input"], "partitions": [
                    {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]}]}))
            out["simple_commit"] = committed["topics"][0]["partitions"][0]["error_code"]
            out["streams_on_simple"] = tasks(heartbeat(raw, simple_group, "s1", 0, topology=topology, retry=True))
            listed = plain(raw.call(16, 5, {"states_filter": [], "types_filter": []}))["groups"]
            out["simple_listed"] = [g for g in listed if g["group_id"] == simple_group]
        return out

    assert_same(pair.run(scenario), "group-type namespace rules")


def test_unsupported_assignor_config(pair):
    """`streams.assignor.name` names a registered assignor or is refused, as Kafka refuses it."""
    def scenario(target: Target) -> dict[str, Any]:
        with target.raw() as raw:
            gid = target.unique("assignor")
            return {"unknown": set_group_configs(raw, gid, {"streams.assignor.name": "fancy"}),
                    "sticky": set_group_configs(raw, gid, {"streams.assignor.name": "sticky"})}

    assert_same(pair.run(scenario), "the streams.assignor.name group config")


# ---------------------------------------------------------------------------------- the other group APIs
def test_streams_group_in_the_group_apis(pair):
    """ListGroups, DescribeGroups, OffsetCommit, OffsetFetch and DeleteGroups of a streams group."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, numbers=2)
        topology = topology_of(subtopology("0", sources=[names["numbers"]]))
        out: dict[str, Any] = {}
        with target.raw() as raw:
            gid = _group(target, raw, "admin")
            joined = heartbeat(raw, gid, "member-1", 0, topology=topology, retry=True)
            epoch = joined["member_epoch"]
            listed = plain(raw.call(16, 5, {"states_filter": [], "types_filter": ["streams"]}))
            out["listed"] = [g for g in listed["groups"] if g["group_id"] == gid]
            out["describe_groups"] = plain(raw.call(15, 6, {"groups": [gid], "include_authorized_operations":
                                                            False}))["groups"]

            def commit(member: str, member_epoch: int, version: int = 9) -> Any:
                return plain(raw.call(8, version, {
                    "group_id": gid, "generation_id_or_member_epoch": member_epoch, "member_id": member,
                    "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": names["numbers"],
                    "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                                    "committed_metadata": ""}]}]}))["topics"]

            out["commit"] = commit("member-1", epoch)
            out["commit_stale"] = commit("member-1", epoch + 1)
            out["commit_unknown"] = commit("nobody", epoch)
            out["commit_v8"] = commit("member-1", epoch, version=8)

            def fetch(member: str | None, member_epoch: int) -> Any:
                return plain(raw.call(9, 9, {"groups": [{"group_id": gid, "member_id": member,
                                                         "member_epoch": member_epoch, "topics": None}],
                                             "require_stable": False}))["groups"]

            out["fetch"] = fetch("member-1", epoch)
            out["fetch_admin"] = fetch(None, -1)
            out["fetch_stale"] = fetch("member-1", epoch + 3)
            out["offset_delete_subscribed"] = plain(raw.call(47, 0, {"group_id": gid, "topics": [
                {"name": names["numbers"], "partitions": [{"partition_index": 0}]}]}))
            out["delete_non_empty"] = plain(raw.call(42, 2, {"groups_names": [gid]}))["results"]
            out["leave"] = tasks(heartbeat(raw, gid, "member-1", -1))
            out["described_empty"] = _described(raw, gid)
            out["listed_empty"] = [g for g in plain(raw.call(16, 5, {"states_filter": ["empty"],
                                                                     "types_filter": []}))["groups"]
                                   if g["group_id"] == gid]
            out["offset_delete_empty"] = plain(raw.call(47, 0, {"group_id": gid, "topics": [
                {"name": names["numbers"], "partitions": [{"partition_index": 0}]}]}))
            out["fetch_after_offset_delete"] = fetch(None, -1)
            out["delete"] = plain(raw.call(42, 2, {"groups_names": [gid]}))["results"]
            out["described_deleted"] = describe(raw, gid)
        return out

    assert_same(pair.run(scenario), "a streams group in the other group APIs")


# ------------------------------------------------------------------------------------ a Streams application
def test_kafka_streams_application_on_the_streams_protocol(pair):
    """A Kafka Streams 4.4 word count with `group.protocol=streams` (tests/java: StreamsGroupScenarios), at least
    once and exactly once, and two instances of it splitting the tasks (no warm-up tasks): the same counts,
    internal topics and streams group on both brokers."""
    seen = java_clients.run_pair(pair, "streamsgroup")
    java_clients.compare(seen, "word_count")
    java_clients.compare(seen, "word_count_exactly_once")
    java_clients.compare(seen, "two_instances")
    # The second instance joins a running one with warm-up replicas allowed and no acceptable lag: Kafka 4.4
    # gives it its tasks at once, no warm-up tasks (nor does Shoal).
    assert [side["warmup_tasks"] for side in java_clients.scenario(seen, "two_instances").values()] == [0, 0]


def test_standby_tasks_and_endpoints(pair):
    """With `streams.num.standby.replicas=1` each of two processes holds the other's stateful tasks as standbys;
    members with a user endpoint learn every member's active and standby partitions (interactive queries)."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, clicks=2)
        app = target.unique("standby-app")
        topology = topology_of(subtopology("0", sources=[names["clicks"]], changelogs=[f"{app}-store-changelog"]))
        steps = []
        with target.raw() as raw:
            gid = _group(target, raw, "standby")
            assert set_group_configs(raw, gid, {"streams.num.standby.replicas": "1"}) == (0, None)
            answers = {}
            owned: dict[str, tuple] = {}
            endpoint_epochs: dict[str, int] = {}
            for member, port in (("member-a", 8001), ("member-b", 8002)):
                answers[member] = heartbeat(raw, gid, member, 0, topology=topology, process=f"process-{port}",
                                            retry=True, user_endpoint={"host": "localhost", "port": port})
                answers[member] = _settle(raw, gid, member, answers[member])
                steps.append((member, _unordered_missing(tasks(answers[member]))))
            for _ in range(3):
                for member in answers:
                    last = answers[member]
                    if last["active_tasks"] is not None:
                        owned[member] = _owned(last)
                    endpoint_epochs[member] = last["endpoint_information_epoch"]
                    answers[member] = heartbeat(raw, gid, member, last["member_epoch"], owned=owned[member],
                                                endpoint_information_epoch=endpoint_epochs[member])
                    steps.append((member, tasks(answers[member])))
            steps.append(_described(raw, gid))
        return {"steps": steps}

    assert_same(pair.run(scenario), "standby tasks and partitions by endpoint")


def test_static_membership(pair):
    """A static member's temporary leave (epoch -2) keeps its place: rejoining under a new member id, it takes over
    its tasks at once; its instance id cannot be used by another member meanwhile, nor by the member it replaced."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, orders=2)
        topology = topology_of(subtopology("0", sources=[names["orders"]]))
        out: dict[str, Any] = {}
        with target.raw() as raw:
            gid = _group(target, raw, "static")
            first = heartbeat(raw, gid, "member-1", 0, topology=topology, instance_id="instance-a", retry=True)
            out["join"] = tasks(first)
            out["heartbeat"] = tasks(heartbeat(raw, gid, "member-1", first["member_epoch"], owned=_owned(first),
                                               instance_id="instance-a"))
            out["temporary_leave"] = tasks(heartbeat(raw, gid, "member-1", -2, instance_id="instance-a"))
            out["after_leave"] = _described(raw, gid)
            again = heartbeat(raw, gid, "member-2", 0, topology=topology, instance_id="instance-a")
            out["rejoin"] = tasks(again)
            out["after_rejoin"] = _described(raw, gid)
            out["instance_taken"] = tasks(heartbeat(raw, gid, "member-3", 0, topology=topology,
                                                    instance_id="instance-a"))
            out["replaced_member"] = tasks(heartbeat(raw, gid, "member-1", first["member_epoch"],
                                                     instance_id="instance-a"))
            out["unknown_instance"] = tasks(heartbeat(raw, gid, "member-9", 1, instance_id="instance-z"))
            out["leave"] = tasks(heartbeat(raw, gid, "member-2", -1, instance_id="instance-a"))
            out["after_final_leave"] = _described(raw, gid)
        return out

    assert_same(pair.run(scenario), "static membership")


# ---------------------------------------------------------------------------------------------- authorization
_TOPIC, _GROUP, _LITERAL, _PREFIXED, _READ, _DESCRIBE, _ALLOW = 2, 3, 3, 4, 3, 8, 3


def _allow(raw: RawClient, resource_type: int, name: str, operation: int, pattern: int = _LITERAL) -> None:
    acl = {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
           "principal": "User:alice", "host": "*", "operation": operation, "permission_type": _ALLOW}
    created = plain(raw.call(30, 3, {"creations": [acl]}))["results"]
    assert created[0]["error_code"] == 0, created
    describe_filter = {"resource_type_filter": resource_type, "resource_name_filter": name,
                       "pattern_type_filter": pattern, "principal_filter": "User:alice", "host_filter": None,
                       "operation": operation, "permission_type": _ALLOW}
    deadline = time.monotonic() + 30
    # Kafka's authorizer learns an ACL from the metadata log a moment after CreateAcls answers.
    while not plain(raw.call(29, 3, describe_filter))["resources"]:
        assert time.monotonic() < deadline, "the ACL to be known"
        time.sleep(0.05)


def test_heartbeat_authorization(sasl_pair):
    """As Kafka's KafkaApis: READ on the group, DESCRIBE on every topic of the topology, no Kafka-internal or
    invalid topic names; internal topics the member may not CREATE are named in the status and not created."""
    def scenario(target: Target) -> dict[str, Any]:
        out: dict[str, Any] = {}
        with target.raw("admin") as admin:
            source = target.unique("guarded-source")
            assert plain(admin.call(19, 7, {"topics": [{"name": source, "num_partitions": 2,
                                                        "replication_factor": 1, "assignments": [],
                                                        "configs": []}], "timeout_ms": 30000,
                                            "validate_only": False}))["topics"][0]["error_code"] == 0
            wait_for_topics(admin, [source])
            app = target.unique("guarded-app")
            changelog = f"{app}-store-changelog"
            locked, open_group = target.unique("locked"), target.unique("guarded")
            for gid in (locked, open_group):
                find_coordinator(admin, gid)
            assert set_group_configs(admin, open_group, FAST) == (0, None)
            _allow(admin, _GROUP, open_group, _READ)
            _allow(admin, _TOPIC, source, _DESCRIBE)
            topology = topology_of(subtopology("0", sources=[source], changelogs=[changelog]))
            with target.raw("alice") as alice:
                out["no_group_read"] = tasks(heartbeat(alice, locked, "m", 0, topology=topology))
                out["no_topic_describe"] = tasks(heartbeat(alice, open_group, "m", 0, topology=topology))
                out["internal_topic"] = tasks(heartbeat(alice, open_group, "m", 0, topology=topology_of(
                    subtopology("0", sources=[source, "__consumer_offsets"]))))
                out["invalid_name"] = tasks(heartbeat(alice, open_group, "m", 0, topology=topology_of(
                    subtopology("0", sources=[source, "no spaces", "bad/name"]))))
                _allow(admin, _TOPIC, app, _DESCRIBE, _PREFIXED)
                out["no_create"] = tasks(heartbeat(alice, open_group, "m", 0, topology=topology, retry=True))
                described = plain(alice.call(89, 1, {"group_ids": [open_group, locked],
                                                     "include_authorized_operations": True,
                                                     "include_topology_description": False}))["groups"]
                out["described_by_alice"] = [{k: g[k] for k in ("group_id", "error_code", "authorized_operations")}
                                             for g in described]
            metadata = plain(admin.call(3, 12, {"topics": [{"name": changelog}], "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False}))
            out["changelog_created"] = metadata["topics"][0]["error_code"]
        return out

    seen = sasl_pair.run(scenario)
    assert_same(seen, "StreamsGroupHeartbeat's authorization")
    assert [s["status_detail"] for s in seen["kafka"]["no_create"]["status"]] == [
        "Internal topics are missing: guarded-app-store-changelog; Unauthorized to CREATE on topics "
        "guarded-app-store-changelog."]


# ---------------------------------------------------------------------------------- kafka-streams-groups
def test_kafka_streams_groups_tool(pair):
    """Kafka 4.4's kafka-streams-groups tool against both brokers: a streams group with a member and committed
    offsets, listed and described every way, and refused deletion while it has a member."""
    state: dict[str, dict[str, str]] = {}
    for target in pair:
        names = _topics(target, tool_events=2)
        with target.raw() as raw:
            gid = _group(target, raw, "tool-streams")
            joined = heartbeat(raw, gid, "member-1", 0, retry=True, process="process-1",
                               topology=topology_of(subtopology("0", sources=[names["tool_events"]])))
            for partition, offset in ((0, 3), (1, 1)):
                committed = plain(raw.call(8, 9, {
                    "group_id": gid, "generation_id_or_member_epoch": joined["member_epoch"],
                    "member_id": "member-1", "group_instance_id": None, "retention_time_ms": -1,
                    "topics": [{"name": names["tool_events"], "partitions": [{
                        "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                        "committed_metadata": ""}]}]}))
                assert committed["topics"][0]["partitions"][0]["error_code"] == 0
        state[target.name] = {"group": gid, "gone": target.unique("tool-streams-gone")}

    def script(target: Target) -> dict:
        gid, gone = state[target.name]["group"], state[target.name]["gone"]

        def sg(*args: str) -> object:
            return tool("kafka-streams-groups", "--bootstrap-server", target.bootstrap, *args)
        return {
            "list": sg("--list"),
            "list, states": sg("--list", "--state"),
            "describe": sg("--describe", "--group", gid),
            "describe, verbose": sg("--describe", "--group", gid, "--verbose"),
            "members": sg("--describe", "--group", gid, "--members"),
            "members, verbose": sg("--describe", "--group", gid, "--members", "--verbose"),
            "state": sg("--describe", "--group", gid, "--state"),
            "state, verbose": sg("--describe", "--group", gid, "--state", "--verbose"),
            "offsets": sg("--describe", "--group", gid, "--offsets"),
            "describe a missing group": sg("--describe", "--group", gone),
            "delete a group with a member": sg("--delete", "--group", gid),
        }

    runs = on_pair(pair, script)

    def shape(label: str, seen: dict) -> dict:
        if label.startswith("list"):  # other tests' groups on the shared Kafka left out
            seen["stdout"] = sorted(line for line in seen["stdout"]
                                    if line and line[0] in ("GROUP", "tool-streams"))
        if label.startswith(("describe", "offsets")):
            # the tool prints partitions in a hash map's order of (topic name, partition): the names differ
            seen["stdout"] = sorted(seen["stdout"])
        seen["stderr"] = [line for line in seen["stderr"] if not (line and (
            line[0].startswith(("java.", "org.apache.kafka.")) or line[:2] == ["Caused", "by:"]))]
        return seen

    assert_same(outcome(pair, runs, shape), "kafka-streams-groups")


@pytest.mark.parametrize(("members", "partitions", "standbys"), [(3, 7, 0), (4, 5, 1), (5, 9, 2), (3, 4, 1)])
def test_sticky_assignor_with_many_members(pair, members, partitions, standbys):
    """Members of three processes join one after the other; every join computes a target assignment from the
    members' current tasks: each answer's tasks and the final targets, active and standby, are Kafka's (ties between
    equally loaded processes and members broken in the order of Kafka's priority queues)."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, wide=partitions, wide_store=partitions)  # the changelog exists: ready at once
        topology = topology_of(subtopology("0", sources=[names["wide"]]),
                               subtopology("1", sources=[names["wide"]], changelogs=[names["wide_store"]]))
        steps = []
        with target.raw() as raw:
            gid = _group(target, raw, "many")
            assert set_group_configs(raw, gid, {"streams.num.standby.replicas": str(standbys)}) == (0, None)
            for i in range(members):
                answer = heartbeat(raw, gid, f"member-{i}", 0, topology=topology, process=f"process-{i % 3}",
                                   retry=True)
                steps.append(tasks(answer))
            described = _described(raw, gid)
        return {"steps": steps, "targets": [(m["member_id"], m["target_assignment"]) for m in described["members"]]}

    assert_same(pair.run(scenario), f"the sticky assignor with {members} members")
