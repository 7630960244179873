"""Differential: ShareGroupHeartbeat (KIP-932) against Kafka 4.4 and Shoal, raw requests through our codecs.

Joins of new groups (the first answer has an empty assignment: share-partitions are assigned once initialized),
assignments of one to three members (compared by shape: the simple assignor's choice of member depends on member
ids), subscription changes, leaving, fencing, the heartbeat interval from the group config, the assignment
interval, and the answers to bad requests.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.helpers.differential import Target, assert_same
from tests.helpers.raw_requests import join as classic_join
from tests.helpers.share_differential import (
    Member,
    alter_group,
    heartbeat,
    heartbeat_view,
    make_topic,
    share_group,
    wait_coordinator,
)

pytestmark = pytest.mark.integration


def _describe(raw, group: str) -> dict:
    g = raw.call(77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
    return {"error_code": g.error_code, "group_state": g.group_state, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "assignor_name": g.assignor_name,
            # (epoch, how many partitions) per member: which member gets which partition depends on member ids
            "members": sorted((m.member_epoch, sum(len(t.partitions) for t in m.assignment.topic_partitions))
                              for m in g.members)}


def test_first_heartbeat_of_a_new_group_assigns_nothing_until_initialized(pair):
    """Kafka answers a new group's first heartbeat with epoch 2 and an empty assignment: the share-partitions are
    initialized through the share coordinator after it, and the next heartbeat assigns them (epoch 3)."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid = make_topic(target, raw, "hb-first", [[1], [1]])
            group = share_group(target, raw, "hb-first")
            m = Member(raw, group)
            first = heartbeat_view(m.heartbeat([topic]))
            described = _describe(raw, group)
            last = m.join([topic], want=2)
            return {"first": first, "described": described, "assigned": heartbeat_view(last),
                    "after": _describe(raw, group)}

    assert_same(pair.run(scenario), "a new group's first heartbeats")


def test_assignment_interval_holds_members_joining_together(pair):
    """With share.assignment.interval.ms (Kafka's default 1 s), members that join right after the first get the
    last target assignment (nothing) until a heartbeat after the interval computes a new one for all."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "hb-interval", [[1]] * 4)
            group = share_group(target, raw, "hb-interval", **{"share.assignment.interval.ms": "1000"})
            members = [Member(raw, group, f"m{i}-" + uuid.uuid4().hex[:8]) for i in range(3)]
            first = [heartbeat_view(m.heartbeat([topic])) for m in members]
            for v in first:
                v.pop("member_id")
            end = time.monotonic() + 30
            while sum(len(p) for m in members for p in m.assigned.values()) < 4:
                assert time.monotonic() < end
                time.sleep(0.1)
                for m in members:
                    m.heartbeat()
            sizes = sorted(sum(len(p) for p in m.assigned.values()) for m in members)
            return {"first": first, "sizes": sizes, "epochs": sorted({m.epoch for m in members}),
                    "union": sorted(p for m in members for ps in m.assigned.values() for p in ps),
                    "described": _describe(raw, group)}

    assert_same(pair.run(scenario), "three members joining within the assignment interval")


@pytest.mark.parametrize("members,partitions", [(1, 3), (2, 4), (3, 4), (3, 2)])
def test_assignment_shapes(pair, members, partitions):
    """Members joining one after the other: how many partitions each gets, and the epochs (the simple assignor's
    choice of member depends on member ids, so only the shape is compared)."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "hb-shape", [[1]] * partitions)
            group = share_group(target, raw, "hb-shape")
            ms = [Member(raw, group) for _ in range(members)]
            ms[0].join([topic], want=partitions)
            for m in ms[1:]:
                m.heartbeat([topic])
            end = time.monotonic() + 30
            # every partition assigned (a partition may go to several members when they outnumber partitions),
            # every member at the same epoch, and nothing changing on one more round
            last = None
            while True:
                for m in ms:
                    m.heartbeat()
                now = [(m.epoch, sorted(p for ps in m.assigned.values() for p in ps)) for m in ms]
                owned = {p for _, ps in now for p in ps}
                if owned == set(range(partitions)) and len({e for e, _ in now}) == 1 and now == last:
                    break
                last = now
                assert time.monotonic() < end, now
                time.sleep(0.05)
            return {"sizes": sorted(sum(len(p) for p in m.assigned.values()) for m in ms),
                    "epoch": ms[0].epoch, "described": _describe(raw, group)}

    assert_same(pair.run(scenario), f"{members} members over {partitions} partitions")


def test_subscription_change_leave_and_fencing(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            a, _ = make_topic(target, raw, "hb-sub-a", [[1], [1]])
            b, _ = make_topic(target, raw, "hb-sub-b", [[1]])
            group = share_group(target, raw, "hb-sub")
            m = Member(raw, group, target.unique("member"))
            m.join([a], want=2)
            out = {"joined": m.epoch}
            # a new subscription: its partitions are initialized, then assigned
            changed = heartbeat_view(m.heartbeat([a, b]))
            out["changed"] = changed
            end = time.monotonic() + 30
            while sum(len(p) for p in m.assigned.values()) != 3:
                assert time.monotonic() < end, m.assigned
                time.sleep(0.05)
                m.heartbeat()
            out["both"] = m.epoch
            # an epoch ahead of the coordinator's, and one behind it (neither current nor previous)
            out["ahead"] = heartbeat_view(heartbeat(raw, group, m.id, m.epoch + 5))
            out["behind"] = heartbeat_view(heartbeat(raw, group, m.id, 1)) if m.epoch > 2 else None
            out["previous_epoch_ok"] = heartbeat_view(heartbeat(raw, group, m.id, m.epoch - 1))["error_code"]
            out["unknown_member"] = heartbeat_view(heartbeat(raw, group, target.unique("stranger"), 3))
            out["left"] = heartbeat_view(m.leave())
            out["left_again"] = heartbeat_view(heartbeat(raw, group, m.id, -1))
            out["after_leave"] = heartbeat_view(heartbeat(raw, group, m.id, 3))
            out["described"] = _describe(raw, group)
            return out

    assert_same(pair.run(scenario), "subscription change, fencing and leave")


def test_heartbeat_interval_from_group_config(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "hb-interval-cfg", [[1]])
            group = share_group(target, raw, "hb-interval-cfg", **{"share.heartbeat.interval.ms": "200"})
            m = Member(raw, group)
            def next_interval(before: int) -> int:
                """The interval heartbeats answer once it is no longer `before` (Kafka's coordinator applies a
                group config a moment after the alteration is answered), or still `before` after 10 s."""
                end = time.monotonic() + 10
                while (now := m.heartbeat().heartbeat_interval_ms) == before and time.monotonic() < end:
                    time.sleep(0.05)
                return now

            first = m.heartbeat([topic]).heartbeat_interval_ms
            changed = alter_group(raw, group, {"share.heartbeat.interval.ms": "300"})
            second = next_interval(first)
            deleted = alter_group(raw, group, {"share.heartbeat.interval.ms": None})
            third = next_interval(second)
            return [first, changed, second, deleted, third]

    assert_same(pair.run(scenario), "share.heartbeat.interval.ms applied to a running group")


_BAD = {
    "empty member id": dict(member="", epoch=0, topics=["T"]),
    "member id over 36 characters": dict(member="x" * 37, epoch=0, topics=["T"]),
    "member id of 36 characters": dict(member="y" * 36, epoch=0, topics=["T"]),
    "empty group id": dict(group="", epoch=0, topics=["T"]),
    "empty rack": dict(epoch=0, topics=["T"], rack=""),
    "join without subscription": dict(epoch=0, topics=None),
    "join with empty subscription": dict(epoch=0, topics=[]),
    "epoch below -1": dict(epoch=-2, topics=["T"]),
    "unknown group, epoch 1": dict(epoch=1, topics=None),
    "leave of an unknown group": dict(epoch=-1, topics=None),
    "unknown topic subscribed": dict(epoch=0, topics=["no-such-topic-ever"]),
}


@pytest.mark.parametrize("case", sorted(_BAD))
def test_bad_heartbeats(pair, case):
    spec = _BAD[case]

    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "hb-bad", [[1]])
            group = target.unique("hb-bad-g") if spec.get("group") is None else spec["group"]
            wait_coordinator(raw, group or "x")
            topics = None if spec["topics"] is None else [topic if t == "T" else t for t in spec["topics"]]
            member = spec.get("member", str(uuid.uuid4()))
            resp = heartbeat_view(heartbeat(raw, group, member, spec["epoch"], topics, spec.get("rack")))
            if resp["error_code"] == 0:
                heartbeat(raw, group, member, -1)
            return resp

    assert_same(pair.run(scenario), f"ShareGroupHeartbeat: {case}")


@pytest.mark.parametrize("kind", ["classic", "consumer"])
def test_heartbeat_to_another_type_of_group(pair, kind):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "hb-other", [[1]])
            group = target.unique("hb-other-g")
            wait_coordinator(raw, group)
            if kind == "classic":
                joined = classic_join(raw, 5, group)
                joined = classic_join(raw, 5, group, joined.member_id)
                assert joined.error_code == 0, joined
            else:
                resp = raw.call(68, 0, {"group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
                                        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 10_000,
                                        "subscribed_topic_names": [topic], "server_assignor": None,
                                        "topic_partitions": []})
                assert resp.error_code == 0, resp
            share = heartbeat_view(heartbeat(raw, group, str(uuid.uuid4()), 0, [topic]))
            share.pop("member_id")
            return {"heartbeat": share, "described": raw.call(77, 1, {"group_ids": [group],
                                                                      "include_authorized_operations": False})
                    .groups[0].error_code}

    assert_same(pair.run(scenario), f"a share heartbeat to a {kind} group")


def test_session_timeout_fences_a_silent_member(pair):
    """share.session.timeout.ms=1000: a member that stops heartbeating is removed; the other gets its partitions,
    and the silent one's next heartbeat is UNKNOWN_MEMBER_ID."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "hb-expiry", [[1], [1]])
            group = share_group(target, raw, "hb-expiry", **{"share.session.timeout.ms": "1000",
                                                             "share.heartbeat.interval.ms": "200"})
            a, b = Member(raw, group, target.unique("a")), Member(raw, group, target.unique("b"))
            a.join([topic], want=2)
            b.heartbeat([topic])
            end = time.monotonic() + 30
            while not (a.assigned and b.assigned and sum(len(p) for p in a.assigned.values()) == 1):
                assert time.monotonic() < end, (a.assigned, b.assigned)
                time.sleep(0.05)
                a.heartbeat()
                b.heartbeat()
            before = _describe(raw, group)
            while len(_describe(raw, group)["members"]) > 1:  # b is silent from now on
                assert time.monotonic() < end
                time.sleep(0.1)
                a.heartbeat()
            while sum(len(p) for p in a.assigned.values()) < 2:
                assert time.monotonic() < end, a.assigned
                time.sleep(0.05)
                a.heartbeat()
            stale = heartbeat_view(heartbeat(raw, group, b.id, b.epoch))
            return {"before": before, "after": _describe(raw, group), "stale": stale}

    assert_same(pair.run(scenario), "a share-group member's session expiring")
