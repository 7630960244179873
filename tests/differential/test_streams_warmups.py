"""Streams groups' warm-up and task-offset settings against Kafka 4.4: the group configs
`streams.task.offset.interval.ms`, `streams.num.warmup.replicas`, `streams.acceptable.recovery.lag` and
`streams.assignor.offload.enable` (IncrementalAlterConfigs on a GROUP, their validation, DescribeConfigs, their
effect on the heartbeat's answer), and what the broker does with the task offsets members report: warm-up tasks
(Kafka 4.4 assigns none) and the standby placement (the member whose state of a task is furthest along gets it).
Raw requests through our codecs, the same steps on both brokers.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.differential import Target, assert_same
from tests.helpers.differential_admin import GROUP, SET, barrier, by_name, describe_configs, incremental_alter
from tests.helpers.streams_requests import (
    describe,
    find_coordinator,
    heartbeat,
    set_group_configs,
    subtopology,
    tasks,
    topology_of,
    wait_for_topics,
)

pytestmark = pytest.mark.integration

FAST = {"streams.initial.rebalance.delay.ms": "0", "streams.assignment.interval.ms": "0"}
WARMUP_CONFIGS = ["streams.task.offset.interval.ms", "streams.num.warmup.replicas", "streams.acceptable.recovery.lag",
                  "streams.assignor.offload.enable"]

# name -> (config, value): IncrementalAlterConfigs SET of one group config, its answer and the config described
ALTER_CASES = {
    "task offset interval": ("streams.task.offset.interval.ms", "20000"),
    "task offset interval at the broker's minimum": ("streams.task.offset.interval.ms", "15000"),
    "task offset interval below the broker's minimum": ("streams.task.offset.interval.ms", "14999"),
    "task offset interval zero": ("streams.task.offset.interval.ms", "0"),
    "task offset interval not a number": ("streams.task.offset.interval.ms", "soon"),
    "warm-up replicas": ("streams.num.warmup.replicas", "0"),
    "warm-up replicas at the broker's maximum": ("streams.num.warmup.replicas", "20"),
    "warm-up replicas above the broker's maximum": ("streams.num.warmup.replicas", "21"),
    "warm-up replicas negative": ("streams.num.warmup.replicas", "-1"),
    "acceptable recovery lag": ("streams.acceptable.recovery.lag", "123456789012"),
    "acceptable recovery lag zero": ("streams.acceptable.recovery.lag", "0"),
    "acceptable recovery lag negative": ("streams.acceptable.recovery.lag", "-1"),
    "acceptable recovery lag not a number": ("streams.acceptable.recovery.lag", "x"),
    "offload": ("streams.assignor.offload.enable", "false"),
    "offload upper case": ("streams.assignor.offload.enable", "TRUE"),
    "offload not a boolean": ("streams.assignor.offload.enable", "maybe"),
}


def _rows(result: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != "documentation"} for row in by_name(result["configs"])]


@pytest.mark.parametrize("case", ALTER_CASES)
def test_alter_a_warmup_config(pair, case):
    name, value = ALTER_CASES[case]

    def scenario(target: Target) -> dict[str, Any]:
        group = target.unique("grp")
        with target.raw() as raw:
            answer = incremental_alter(raw, [(GROUP, group, [(name, SET, value)])]).responses
            after = None
            if answer[0].error_code == 0:
                barrier(raw, target.unique("barrier"))
                after = _rows(describe_configs(raw, [(GROUP, group, [name])]).results[0])
        return {"answer": answer, "after": after}

    assert_same(pair.run(scenario), f"IncrementalAlterConfigs: {case}")


def test_describe_the_warmup_configs(pair):
    """A group's configs described all and by name, without and with the four set: whether Kafka lists them."""
    overrides = {"streams.task.offset.interval.ms": "+30000", "streams.num.warmup.replicas": " 3 ",
                 "streams.acceptable.recovery.lag": "0500", "streams.assignor.offload.enable": "False"}

    def scenario(target: Target) -> dict[str, Any]:
        group, plain = target.unique("grp"), target.unique("grp-plain")
        with target.raw() as raw:
            altered = incremental_alter(raw, [(GROUP, group, [(k, SET, v) for k, v in overrides.items()])]).responses
            barrier(raw, target.unique("barrier"))
            described = [describe_configs(raw, [resource]).results[0] for resource in (
                (GROUP, group, None), (GROUP, plain, None), (GROUP, group, WARMUP_CONFIGS),
                (GROUP, plain, WARMUP_CONFIGS))]
        return {"alter": altered, "described": [[r.error_code, r.error_message, _rows(r)] for r in described]}

    assert_same(pair.run(scenario), "DescribeConfigs of a group with the warm-up configs")


def _topics(target: Target, **partitions: int) -> dict[str, str]:
    names = {base: target.unique(base) for base in partitions}
    admin = AdminClient(target.client_config())
    for f in admin.create_topics([NewTopic(names[b], n, 1) for b, n in partitions.items()]).values():
        f.result(timeout=30)
    with target.raw() as raw:
        wait_for_topics(raw, list(names.values()))
    return names


def _group(target: Target, raw: Any, configs: dict[str, str]) -> str:
    gid = target.unique("warm")
    find_coordinator(raw, gid)
    assert set_group_configs(raw, gid, {**FAST, **configs}) == (0, None)
    return gid


def _settle(raw: Any, gid: str, member: str, answer: dict[str, Any]) -> dict[str, Any]:
    """Heartbeats until the changelog topic the broker creates exists (no more MISSING_INTERNAL_TOPICS)."""
    import time

    deadline = time.monotonic() + 30
    while any(s["status_code"] == 3 for s in answer.get("status") or ()):
        assert time.monotonic() < deadline, answer
        time.sleep(0.05)
        answer = heartbeat(raw, gid, member, answer["member_epoch"], owned=_owned(answer))
    return answer


def _owned(answer: dict[str, Any]) -> tuple[list, list, list]:
    return (answer["active_tasks"] or [], answer["standby_tasks"] or [], answer["warmup_tasks"] or [])


def _offsets(*items: tuple[str, int, int]) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partition": p, "offset": o} for s, p, o in items]


def _described(raw: Any, gid: str) -> dict[str, Any]:
    [group] = describe(raw, gid)
    group["members"] = sorted(group["members"], key=lambda m: m["member_id"])
    return group


def test_heartbeat_carries_the_groups_settings(pair):
    """The task offset interval and acceptable recovery lag a member is told: the broker's, then the group's."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, settings=1)
        topology = topology_of(subtopology("0", sources=[names["settings"]]))
        with target.raw() as raw:
            gid = _group(target, raw, {})
            first = heartbeat(raw, gid, "m", 0, topology=topology, retry=True)
            assert set_group_configs(raw, gid, {"streams.task.offset.interval.ms": "25000",
                                                "streams.acceptable.recovery.lag": "77"}) == (0, None)
            second = heartbeat(raw, gid, "m", first["member_epoch"], owned=_owned(first))
        return {"first": tasks(first), "second": tasks(second)}

    assert_same(pair.run(scenario), "the task offset interval and recovery lag in the heartbeat")


def test_task_offsets_decide_standbys_and_give_no_warmups(pair):
    """A stateful subtopology of two tasks, one standby replica, warm-up replicas allowed and a recovery lag of 10.
    Member a owns both tasks. Members b and c join, reporting task offsets (b far behind the changelog's end,
    c close to it; a reports its own). Kafka 4.4 moves a task to b or c as an active task at once (no warm-up,
    whatever the lag) and gives each standby to the member whose reported offsets are furthest along."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, orders=2)
        app = target.unique("app")
        topology = topology_of(subtopology("0", sources=[names["orders"]], changelogs=[f"{app}-store-changelog"]))
        configs = {"streams.num.standby.replicas": "1", "streams.num.warmup.replicas": "2",
                   "streams.acceptable.recovery.lag": "10"}
        ends = _offsets(("0", 0, 1000), ("0", 1, 1000))
        steps: list[Any] = []
        with target.raw() as raw:
            gid = _group(target, raw, configs)
            a = _settle(raw, gid, "member-a", heartbeat(raw, gid, "member-a", 0, topology=topology,
                                                          process="process-a", retry=True))
            a = heartbeat(raw, gid, "member-a", a["member_epoch"], owned=_owned(a),
                          task_offsets=_offsets(("0", 0, 1000), ("0", 1, 1000)), task_end_offsets=ends)
            steps.append(tasks(a))
            b = heartbeat(raw, gid, "member-b", 0, topology=topology, process="process-b",
                          task_offsets=_offsets(("0", 0, 5), ("0", 1, 5)), task_end_offsets=ends)
            steps.append(tasks(b))
            c = heartbeat(raw, gid, "member-c", 0, topology=topology, process="process-c",
                          task_offsets=_offsets(("0", 0, 990), ("0", 1, 400)), task_end_offsets=ends)
            steps.append(tasks(c))
            for _ in range(3):
                for name, answer in (("member-a", a), ("member-b", b), ("member-c", c)):
                    nxt = heartbeat(raw, gid, name, answer["member_epoch"], owned=_owned(answer))
                    merged = {**answer, **{k: v for k, v in nxt.items() if v is not None}}
                    steps.append(tasks(nxt))
                    if name == "member-a":
                        a = merged
                    elif name == "member-b":
                        b = merged
                    else:
                        c = merged
            steps.append(_described(raw, gid))
        return {"steps": steps}

    assert_same(pair.run(scenario), "standbys by task offsets, no warm-ups")


def test_reported_task_offsets(pair):
    """What StreamsGroupDescribe shows of the offsets a member reports: those sent with the join that creates the
    group, a later list replacing the last one (an absent list keeping it), and a list naming a task twice,
    refused."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, dup=2)
        topology = topology_of(subtopology("0", sources=[names["dup"]]))
        out: dict[str, Any] = {}
        with target.raw() as raw:
            gid = _group(target, raw, {})
            joined = heartbeat(raw, gid, "m", 0, topology=topology, retry=True,
                               task_offsets=_offsets(("0", 0, 7)), task_end_offsets=_offsets(("0", 0, 9)))
            out["joined"], out["after_join"] = tasks(joined), _described(raw, gid)["members"]
            epoch, owned = joined["member_epoch"], _owned(joined)
            out["offsets"] = tasks(heartbeat(raw, gid, "m", epoch, owned=owned,
                                             task_offsets=_offsets(("0", 1, 3), ("0", 0, 8))))
            out["after_offsets"] = _described(raw, gid)["members"]
            out["ends"] = tasks(heartbeat(raw, gid, "m", epoch, owned=owned, task_end_offsets=_offsets(("0", 1, 4))))
            out["after_ends"] = _described(raw, gid)["members"]
            out["twice"] = tasks(heartbeat(raw, gid, "m", epoch, owned=owned,
                                           task_offsets=_offsets(("0", 0, 1), ("0", 0, 2))))
            out["ends_twice"] = tasks(heartbeat(raw, gid, "m", epoch, owned=owned,
                                                task_end_offsets=_offsets(("0", 1, 1), ("0", 1, 2))))
            out["after_twice"] = _described(raw, gid)["members"]
        return out

    assert_same(pair.run(scenario), "reported task offsets")


# case -> (how the task's place is decided, the offsets members b and c report for task 0_0)
RANKING_CASES = {
    "standby, b ahead": ("standby", 900, 100),
    "standby, c ahead": ("standby", 100, 900),
    "active, b ahead": ("active", 900, 100),
    "active, c ahead": ("active", 100, 900),
}


@pytest.mark.parametrize("case", RANKING_CASES)
def test_task_offsets_rank_the_candidates(pair, case):
    """One stateful task, owned by member a; members b and c (idle, equally loaded) report how far their local
    state of it is. "standby": the group is then given a standby replica; "active": a leaves. Kafka 4.4 hands
    the standby, or the orphaned active task, to the one whose reported offset is higher."""
    kind, b_offset, c_offset = RANKING_CASES[case]

    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, ranked=1)
        app = target.unique("app")
        topology = topology_of(subtopology("0", sources=[names["ranked"]], changelogs=[f"{app}-store-changelog"]))
        steps: list[Any] = []
        with target.raw() as raw:
            gid = _group(target, raw, {"streams.num.standby.replicas": "0"})
            a = _settle(raw, gid, "member-a", heartbeat(raw, gid, "member-a", 0, topology=topology,
                                                          process="process-a", retry=True))
            answers = {"member-a": heartbeat(raw, gid, "member-a", a["member_epoch"], owned=_owned(a))}
            for member, offset in (("member-b", b_offset), ("member-c", c_offset)):
                answers[member] = heartbeat(raw, gid, member, 0, topology=topology, process=f"process-{member}",
                                            task_offsets=_offsets(("0", 0, offset)))
            steps.append({m: tasks(x) for m, x in answers.items()})
            if kind == "standby":
                assert set_group_configs(raw, gid, {"streams.num.standby.replicas": "1"}) == (0, None)
            else:
                steps.append(tasks(heartbeat(raw, gid, "member-a", -1)))
                del answers["member-a"]
            for _ in range(2):
                for member, answer in answers.items():
                    nxt = heartbeat(raw, gid, member, answer["member_epoch"], owned=_owned(answer))
                    steps.append(tasks(nxt))
                    answers[member] = {**answer, **{k: v for k, v in nxt.items() if v is not None}}
            steps.append(_described(raw, gid))
        return {"steps": steps}

    assert_same(pair.run(scenario), f"standby candidates ranked by task offsets: {case}")


def test_standby_placement_ignores_racks_and_client_tags(pair):
    """Members a and b in zone z1 (rack r1), c in zone z2 (rack r2), `streams.rack.aware.assignment.tags=zone`.
    Member a owns the task; b reports local state of it. Kafka 4.4's sticky assignor does not look at racks or
    client tags: the standby goes to b, in a's zone, not to c (the tags only feed the MISSING_CLIENT_TAGS status)."""
    def scenario(target: Target) -> dict[str, Any]:
        names = _topics(target, zoned=1)
        app = target.unique("app")
        topology = topology_of(subtopology("0", sources=[names["zoned"]], changelogs=[f"{app}-store-changelog"]))
        steps: list[Any] = []
        place = {"member-a": ("z1", "r1", None), "member-b": ("z1", "r1", 500), "member-c": ("z2", "r2", None)}
        with target.raw() as raw:
            gid = _group(target, raw, {"streams.num.standby.replicas": "0", "streams.rack.aware.assignment.tags": "zone"})
            answers: dict[str, dict[str, Any]] = {}
            for member, (zone, rack, offset) in place.items():
                fields: dict[str, Any] = {"client_tags": [{"key": "zone", "value": zone}], "rack_id": rack}
                if offset is not None:
                    fields["task_offsets"] = _offsets(("0", 0, offset))
                answer = heartbeat(raw, gid, member, 0, topology=topology, process=f"process-{member}", retry=True,
                                   **fields)
                answers[member] = _settle(raw, gid, member, answer) if member == "member-a" else answer
                steps.append(tasks(answers[member]))
            assert set_group_configs(raw, gid, {"streams.num.standby.replicas": "1"}) == (0, None)
            for _ in range(2):
                for member, answer in answers.items():
                    nxt = heartbeat(raw, gid, member, answer["member_epoch"], owned=_owned(answer))
                    steps.append(tasks(nxt))
                    answers[member] = {**answer, **{k: v for k, v in nxt.items() if v is not None}}
            described = _described(raw, gid)
            steps.append(described)
        standby = [m["member_id"] for m in described["members"] if m["target_assignment"]["standby_tasks"]]
        return {"steps": steps, "standby": standby}

    seen = pair.run(scenario)
    assert_same(seen, "standby placement with racks and client tags")
    assert seen["kafka"]["standby"] == ["member-b"]
