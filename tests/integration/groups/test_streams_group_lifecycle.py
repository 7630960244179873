"""Streams groups (KIP-1071) on a real broker process: state that comes back from `__consumer_offsets` after a
restart, session expiry, and the broker's streams group settings.

The wire answers themselves are compared with Kafka's in tests/differential/test_streams_groups.py.
"""

from __future__ import annotations

import pytest

from tests.helpers.broker_process import restart
from tests.helpers.raw_client import RawClient
from tests.helpers.streams_requests import (
    describe,
    heartbeat,
    plain,
    set_group_configs,
    subtopology,
    topology_of,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

FAST = {"streams.initial.rebalance.delay.ms": "0", "streams.assignment.interval.ms": "0"}


def _create_topic(raw: RawClient, name: str, partitions: int) -> None:
    answer = plain(raw.call(19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                                "assignments": [], "configs": []}],
                                    "timeout_ms": 30000, "validate_only": False}))
    assert answer["topics"][0]["error_code"] == 0, answer


def _owned(answer: dict) -> tuple[list, list, list]:
    return (answer["active_tasks"] or [], answer["standby_tasks"] or [], answer["warmup_tasks"] or [])


def _stable_pair(raw: RawClient, gid: str, topology: dict) -> dict[str, dict]:
    """Two members (two processes) joined and reconciled: {member id: its last answer}."""
    answers = {"member-a": heartbeat(raw, gid, "member-a", 0, topology=topology, process="process-a", retry=True)}
    answers["member-b"] = heartbeat(raw, gid, "member-b", 0, topology=topology, process="process-b")
    owned = {m: _owned(a) for m, a in answers.items()}

    def reconciled() -> bool:
        for member, last in answers.items():
            answer = heartbeat(raw, gid, member, last["member_epoch"], owned=owned[member])
            assert answer["error_code"] == 0, answer
            if answer["active_tasks"] is not None:
                owned[member] = _owned(answer)
            answers[member] = answer
        [group] = describe(raw, gid)
        return group["group_state"] == "Stable" and all(owned[m][0] for m in answers)

    wait_until(reconciled, 30, "both members to own their tasks")
    return answers


def test_streams_group_comes_back_after_a_restart(broker_factory):
    """Topology, members, epochs, target and current assignments and committed offsets are records on
    `__consumer_offsets`: after kill -9 the group is described the same, its members heartbeat on at the epochs
    they had, and its offsets are there."""
    broker = broker_factory()
    with RawClient(broker.port) as raw:
        _create_topic(raw, "events", 4)
        assert set_group_configs(raw, "app", FAST) == (0, None)
        topology = topology_of(subtopology("0", sources=["events"], changelogs=["app-store-changelog"]))
        answers = _stable_pair(raw, "app", topology)
        commit = plain(raw.call(8, 9, {
            "group_id": "app", "generation_id_or_member_epoch": answers["member-a"]["member_epoch"],
            "member_id": "member-a", "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": "events", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                          "committed_leader_epoch": -1, "committed_metadata": "m"}]}]}))
        assert commit["topics"][0]["partitions"][0]["error_code"] == 0
        [before] = describe(raw, "app")
    assert before["group_state"] == "Stable" and len(before["members"]) == 2
    assert before["topology"]["subtopologies"][0]["state_changelog_topics"][0]["partitions"] == 4

    restart(broker, "kill9")
    with RawClient(broker.port) as raw:
        [after] = describe(raw, "app")
        # The topology is configured against the topics again by the next heartbeat (as Kafka's, whose configured
        # topology is not a record either): until then it is described as the members sent it.
        unconfigured = before["topology"]["subtopologies"][0]["state_changelog_topics"][0]
        assert after == before | {"topology": {"epoch": 1, "subtopologies": [
            before["topology"]["subtopologies"][0] | {"state_changelog_topics": [unconfigured | {"partitions": 0}]}]}}
        for member, last in answers.items():
            again = heartbeat(raw, "app", member, last["member_epoch"], owned=_owned(last), retry=True)
            assert again["error_code"] == 0 and again["member_epoch"] == last["member_epoch"], again
            assert again["status"] == [], again
        assert describe(raw, "app") == [before]
        fetched = plain(raw.call(9, 9, {"groups": [{"group_id": "app", "member_id": None, "member_epoch": -1,
                                                    "topics": None}], "require_stable": False}))
        [topic] = fetched["groups"][0]["topics"]
        assert (topic["name"], topic["partitions"][0]["committed_offset"]) == ("events", 42)
        listed = plain(raw.call(16, 5, {"states_filter": [], "types_filter": ["streams"]}))["groups"]
        assert [(g["group_id"], g["group_state"]) for g in listed] == [("app", "Stable")]


def test_deleted_streams_group_stays_deleted(broker_factory):
    """A group whose members left is deleted with its tombstones: a restart does not bring it back."""
    broker = broker_factory()
    with RawClient(broker.port) as raw:
        _create_topic(raw, "lines", 1)
        assert set_group_configs(raw, "gone", FAST) == (0, None)
        joined = heartbeat(raw, "gone", "m", 0, topology=topology_of(subtopology("0", sources=["lines"])),
                           retry=True)
        assert heartbeat(raw, "gone", "m", -1)["error_code"] == 0
        [empty] = describe(raw, "gone")
        assert (empty["group_state"], empty["group_epoch"]) == ("Empty", joined["member_epoch"] + 1)
        assert plain(raw.call(42, 2, {"groups_names": ["gone"]}))["results"][0]["error_code"] == 0
    restart(broker, "kill9")
    with RawClient(broker.port) as raw:
        [described] = describe(raw, "gone")
        assert described["error_code"] == 69 and described["error_message"] == "Group gone not found."


def test_member_session_expires(broker_factory):
    """A member that stops heartbeating is fenced after `streams.session.timeout.ms`; the group's epoch moves on."""
    broker = broker_factory({"group.streams.min.session.timeout.ms": "1000",
                             "group.streams.min.heartbeat.interval.ms": "100"})
    with RawClient(broker.port) as raw:
        _create_topic(raw, "ticks", 2)
        assert set_group_configs(raw, "quiet", {**FAST, "streams.session.timeout.ms": "1500",
                                                "streams.heartbeat.interval.ms": "200"}) == (0, None)
        joined = heartbeat(raw, "quiet", "m", 0, topology=topology_of(subtopology("0", sources=["ticks"])),
                           retry=True)
        assert joined["heartbeat_interval_ms"] == 200
        [group] = wait_until(lambda: [g for g in describe(raw, "quiet") if not g["members"]], 20,
                             "the member's session to expire")
        assert (group["group_state"], group["group_epoch"]) == ("Empty", joined["member_epoch"] + 1)
        answer = heartbeat(raw, "quiet", "m", joined["member_epoch"])
        assert answer["error_code"] == 25  # UNKNOWN_MEMBER_ID: it was fenced


def test_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout(broker_factory):
    """A member told to give up tasks that keeps reporting them is fenced once its rebalance timeout passes; the
    tasks then go to the member waiting for them."""
    broker = broker_factory()
    with RawClient(broker.port) as raw:
        _create_topic(raw, "jobs", 2)
        assert set_group_configs(raw, "slow", FAST) == (0, None)
        topology = topology_of(subtopology("0", sources=["jobs"]))
        a = heartbeat(raw, "slow", "member-a", 0, topology=topology, process="pa", retry=True,
                      rebalance_timeout_ms=1000)
        owned_a = _owned(a)
        assert owned_a[0] == [{"subtopology_id": "0", "partitions": [0, 1]}]
        b = heartbeat(raw, "slow", "member-b", 0, topology=topology, process="pb")
        a = heartbeat(raw, "slow", "member-a", a["member_epoch"], owned=owned_a)
        assert a["active_tasks"] == [{"subtopology_id": "0", "partitions": [0]}]  # task 1 is to be revoked
        [group] = describe(raw, "slow")
        assert group["group_state"] == "Reconciling"

        last = {"b": b, "owned": ([], [], [])}

        def b_owns_both() -> dict | None:
            answer = heartbeat(raw, "slow", "member-b", last["b"]["member_epoch"], owned=last["owned"])
            assert answer["error_code"] == 0, answer
            last["b"] = answer
            if answer["active_tasks"] is not None:
                last["owned"] = _owned(answer)
            return answer if last["owned"][0] == [{"subtopology_id": "0", "partitions": [0, 1]}] else None

        # member-a never heartbeats again with task 1 released: fenced after 1 s, member-b gets both tasks.
        wait_until(b_owns_both, 20, "member-b to get every task", interval=0.2)
        [group] = describe(raw, "slow")
        assert [m["member_id"] for m in group["members"]] == ["member-b"]
        assert heartbeat(raw, "slow", "member-a", a["member_epoch"], owned=owned_a)["error_code"] == 25


def test_initial_rebalance_delay(broker_factory):
    """A new group's first assignment waits for `streams.initial.rebalance.delay.ms` (the answer says so); the
    broker computes it when the delay ends, and the members' next heartbeats get their tasks."""
    broker = broker_factory()
    with RawClient(broker.port) as raw:
        _create_topic(raw, "late", 2)
        assert set_group_configs(raw, "delayed", {"streams.initial.rebalance.delay.ms": "800",
                                                  "streams.assignment.interval.ms": "0"}) == (0, None)
        topology = topology_of(subtopology("0", sources=["late"]))
        a = heartbeat(raw, "delayed", "member-a", 0, topology=topology, process="pa", retry=True)
        assert a["status"] == [{"status_code": 5, "status_detail": "Assignment delayed due to the configured "
                                "initial rebalance delay."}]
        assert (a["member_epoch"], a["active_tasks"]) == (1, [])
        b = heartbeat(raw, "delayed", "member-b", 0, topology=topology, process="pb")
        assert b["status"] == a["status"] and b["active_tasks"] == []
        [group] = describe(raw, "delayed")
        assert (group["group_state"], group["group_epoch"], group["assignment_epoch"]) == ("Assigning", 3, 1)

        def assigned() -> dict | None:
            [described] = describe(raw, "delayed")
            return described if described["assignment_epoch"] == 3 else None

        described = wait_until(assigned, 20, "the delayed assignment")
        targets = sorted(m["target_assignment"]["active_tasks"][0]["partitions"] for m in described["members"])
        assert targets == [[0], [1]]
        for member, last in (("member-a", a), ("member-b", b)):
            answer = heartbeat(raw, "delayed", member, last["member_epoch"], owned=([], [], []))
            assert answer["error_code"] == 0 and answer["status"] == [], answer
            assert answer["member_epoch"] == 3 and len(answer["active_tasks"][0]["partitions"]) == 1, answer
