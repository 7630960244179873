"""Classic consumer groups, Kafka 4.4 against Shoal, over raw requests built by our codecs: FindCoordinator,
JoinGroup/SyncGroup/Heartbeat/LeaveGroup in every version, rebalances driven step by step, protocol selection,
static membership, session and rebalance timeouts, ListGroups/DescribeGroups/DeleteGroups, committed offsets and
OffsetDelete.

Determinism: a rebalance is started by one member's JoinGroup, which the broker parks; the scenario then polls the
other member's Heartbeat until it answers REBALANCE_IN_PROGRESS (so the join is known to be in) before that member
rejoins. Member ids are random: each is named by a label (tests/helpers/group_diff.py) and member lists are sorted
by label, since Kafka lists members in hash order. Kafka answers a group's topics and partitions in hash order
too (OffsetFetch of all offsets, OffsetDelete, DescribeGroups and DeleteGroups of several groups): `tidy` sorts
them. Scenarios that wait out a timeout run on both brokers at once (`run_both`).
"""

from __future__ import annotations

import base64
import time
import uuid

import pytest

from tests.helpers.differential import assert_same
from tests.helpers.group_diff import (
    DELETE,
    DESCRIBE,
    FIND_COORDINATOR,
    LEAVE,
    LIST,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    ClassicMember,
    Labels,
    assignment,
    create_topic_and_wait,
    decoded_describe,
    describe_group,
    id_shape,
    plain,
    run_both,
    subscription,
    wait_coordinators,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 27, 79
SUB = subscription("t")


def tidy(value):
    """Lists of topics, partitions or groups sorted (Kafka answers them in hash order); long strings summed up."""
    if isinstance(value, dict):
        return {k: tidy(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [tidy(v) for v in value]
        if items and all(isinstance(i, dict) for i in items):
            for key in ("partition_index", "name", "group_id"):
                if all(key in i for i in items):
                    items.sort(key=lambda i, key=key: i[key] if key == "partition_index" else str(i[key]))
                    break
        return items
    if isinstance(value, str) and len(value) > 100:
        return f"<{len(value)} x {value[0]!r}>"
    return value


def _two_member_generation(a: ClassicMember, b: ClassicMember, labels: Labels) -> None:
    """A alone in generation 1, then B joins and both are in generation 2 with A leading and B holding nothing."""
    a.join_fully()
    labels.name(a.member_id, "A")
    a.sync({a.member_id: b""})
    b.join()
    labels.name(b.member_id, "B")
    parked = b.send_join()
    a.wait_for_heartbeat_error(REBALANCE_IN_PROGRESS)
    a.join()
    b.finish(parked)
    parked = b.send_sync()
    a.sync({})
    b.finish(parked)


# ============================================================================================ FindCoordinator

def test_find_coordinator_in_every_version_and_key_type(pair):
    def scenario(target):
        group = target.unique("fc")
        topic = base64.urlsafe_b64encode(uuid.UUID(int=12345).bytes).decode().rstrip("=")
        out = {}
        with target.raw() as c:
            wait_coordinators(c, 1, 2)
            for v in range(4):
                for key_type in (0, 1, 2, 3) if v >= 1 else (0,):
                    out[f"v{v}-type{key_type}"] = plain(c.call(FIND_COORDINATOR, v, {"key": group,
                                                                                      "key_type": key_type}))
                out[f"v{v}-empty-group"] = plain(c.call(FIND_COORDINATOR, v, {"key": "", "key_type": 0}))
            share_keys = [f"{group}:{topic}:0", f"{group}:{topic}:-1", f"{group}:{topic}", f":{topic}:0",
                          f"a:b:{topic}:3", "bad", f"{group}:{uuid.UUID(int=5)}:0"]
            for v in (4, 5, 6):
                for key_type, keys in ((0, [group, "", group + "x"]), (1, [group, ""]), (2, share_keys),
                                       (3, [group, "x"])):
                    out[f"v{v}-type{key_type}"] = plain(c.call(FIND_COORDINATOR, v, {
                        "key_type": key_type, "coordinator_keys": keys}))
        return out

    assert_same(run_both(pair, scenario), "FindCoordinator")


# ================================================================================== membership, every version

@pytest.mark.parametrize("version", range(10))
def test_join_sync_heartbeat_describe_leave(pair, version):
    def scenario(target):
        group = target.unique("join")
        labels = Labels()
        with ClassicMember(target, group, version=version) as a:
            first = a.join()
            seen = {"first": plain(first)}
            if first.member_id:
                seen["id_shape"] = id_shape(first.member_id)
                labels.name(first.member_id, "A")
            if first.error_code == MEMBER_ID_REQUIRED:
                seen["second"] = plain(a.join())
            seen["sync"] = plain(a.sync({a.member_id: assignment({"t": [0]})}))
            seen["heartbeat"] = plain(a.heartbeat())
            seen["describe"] = decoded_describe(describe_group(a.client, group), labels)
            seen["leave"] = plain(a.leave())
            seen["describe_after_leave"] = decoded_describe(describe_group(a.client, group), labels)
            seen["heartbeat_after_leave"] = plain(a.heartbeat())
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), f"a member's life in JoinGroup v{version}")


@pytest.mark.parametrize("version", range(6))
def test_leave_group(pair, version):
    def scenario(target):
        group = target.unique("leave")
        labels = Labels()
        seen = {}
        with ClassicMember(target, group, version=min(9, version + 4)) as a, \
                ClassicMember(target, group, version=min(9, version + 4)) as b:
            _two_member_generation(a, b, labels)
            if version < 3:
                seen["unknown"] = plain(a.client.call(LEAVE, version, {"group_id": group, "member_id": "nobody"}))
                seen["leader"] = plain(a.client.call(LEAVE, version, {"group_id": group, "member_id": a.member_id}))
            else:
                seen["batch"] = plain(a.client.call(LEAVE, version, {"group_id": group, "members": [
                    {"member_id": a.member_id, "group_instance_id": None, "reason": "r"},
                    {"member_id": "nobody", "group_instance_id": None, "reason": None},
                    {"member_id": b.member_id, "group_instance_id": "not-static", "reason": None}]}))
                seen["empty_batch"] = plain(a.client.call(LEAVE, version, {"group_id": group, "members": []}))
            leave_body = {"member_id": "x", "members": [{"member_id": "x"}]}
            seen["unknown_group"] = plain(a.client.call(LEAVE, version, {"group_id": group + "-none", **leave_body}))
            seen["empty_group_id"] = plain(a.client.call(LEAVE, version, {"group_id": "", **leave_body}))
            seen["describe"] = decoded_describe(describe_group(a.client, group), labels)
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), f"LeaveGroup v{version}")


# ============================================================================================== rebalances

def test_two_members_rebalance_step_by_step(pair):
    def scenario(target):
        group = target.unique("rebalance")
        labels = Labels()
        seen = {}
        with ClassicMember(target, group) as a, ClassicMember(target, group) as b:
            a.join_fully()
            labels.name(a.member_id, "A")
            seen["a_sync1"] = plain(a.sync({a.member_id: assignment({"t": [0, 1]})}))
            seen["b_first"] = plain(b.join())
            labels.name(b.member_id, "B")
            seen["describe_b_pending"] = decoded_describe(describe_group(a.client, group), labels)
            parked = b.send_join()
            seen["a_sees_rebalance"] = a.wait_for_heartbeat_error(REBALANCE_IN_PROGRESS) > 0
            seen["describe_preparing"] = decoded_describe(describe_group(a.client, group), labels)
            seen["a_join"] = plain(a.join())
            seen["b_join"] = plain(b.finish(parked))
            seen["describe_completing"] = decoded_describe(describe_group(a.client, group), labels)
            seen["a_heartbeat_completing"] = plain(a.heartbeat())
            parked = b.send_sync()  # the follower waits for the leader's assignment
            seen["b_sync_wrong_generation"] = plain(b.sync(side=True, generation_id=b.generation + 5))
            seen["b_sync_unknown_member"] = plain(b.sync(side=True, member_id="nobody"))
            seen["a_sync_wrong_protocol"] = plain(a.sync({}, protocol_name="roundrobin"))
            seen["a_sync_wrong_type"] = plain(a.sync({}, protocol_type="connect"))
            seen["a_sync"] = plain(a.sync({a.member_id: assignment({"t": [0]}), b.member_id: assignment({"t": [1]})}))
            seen["b_sync"] = plain(b.finish(parked))
            seen["describe_stable"] = decoded_describe(describe_group(a.client, group), labels)
            seen["b_sync_again"] = plain(b.sync())
            seen["b_heartbeat_old_generation"] = plain(b.heartbeat(generation_id=1))
            seen["b_heartbeat_unknown_member"] = plain(b.heartbeat(member_id="nobody"))
            seen["heartbeat_unknown_group"] = plain(b.heartbeat(group_id=group + "-none"))
            seen["a_leave"] = plain(a.leave())
            seen["describe_after_leave"] = decoded_describe(describe_group(b.client, group), labels)
            seen["b_heartbeat_after_leave"] = plain(b.heartbeat())
            seen["b_rejoin"] = plain(b.join())
            seen["describe_end"] = decoded_describe(describe_group(b.client, group), labels)
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), "a rebalance of two members")


def test_protocol_selection_and_inconsistent_members(pair):
    def scenario(target):
        group = target.unique("protocols")
        labels = Labels()
        seen = {}
        with ClassicMember(target, group, protocols=[("range", SUB), ("roundrobin", SUB), ("sticky", SUB)]) as a, \
                ClassicMember(target, group, protocols=[("sticky", SUB), ("roundrobin", SUB)]) as b, \
                ClassicMember(target, group, protocols=[("roundrobin", SUB), ("sticky", SUB)]) as c, \
                ClassicMember(target, group, protocols=[("cooperative-sticky", SUB)]) as d, \
                ClassicMember(target, group, protocol_type="connect", protocols=[("range", SUB)]) as e:
            seen["a"] = plain(a.join_fully())
            labels.name(a.member_id, "A")
            a.sync({a.member_id: b""})
            seen["d_no_common_protocol"] = plain(d.join())
            seen["e_other_protocol_type"] = plain(e.join())
            seen["b_first"] = plain(b.join())
            labels.name(b.member_id, "B")
            parked_b = b.send_join()
            a.wait_for_heartbeat_error(REBALANCE_IN_PROGRESS)
            seen["c_first"] = plain(c.join())
            labels.name(c.member_id, "C")
            parked_c = c.send_join()
            seen["d_during_rebalance"] = plain(d.join())
            # roundrobin: every member supports it and it gets the most first-choice votes among those
            seen["a_join"] = plain(a.join())
            seen["b_join"] = plain(b.finish(parked_b))
            seen["c_join"] = plain(c.finish(parked_c))
            seen["describe"] = labels.apply(describe_group(a.client, group))
            seen["no_protocols"] = plain(d.join(protocols=[]))
            seen["empty_protocol_type"] = plain(d.join(protocol_type=""))
            seen["empty_group_id"] = plain(d.join(group_id=""))
            seen["session_below_min"] = plain(d.join(session_timeout_ms=5999))
            seen["session_above_max"] = plain(d.join(session_timeout_ms=1_800_001))
            seen["unknown_member_new_group"] = plain(d.join(group_id=group + "-new", member_id="who"))
            seen["unknown_member"] = plain(d.join(member_id="who"))
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), "protocol selection")


def test_static_members_replacement_and_fencing(pair):
    def scenario(target):
        group = target.unique("static")
        labels = Labels()
        seen = {}
        with ClassicMember(target, group, instance="i-1") as a, ClassicMember(target, group, instance="i-2") as b, \
                ClassicMember(target, group, instance="i-1") as a2:
            seen["a"] = plain(a.join())  # static members get no MEMBER_ID_REQUIRED
            labels.name(a.member_id, "A")
            seen["id_shape"] = id_shape(a.member_id)
            seen["a_sync"] = plain(a.sync({a.member_id: assignment({"t": [0]})}))
            parked = b.send_join()
            a.wait_for_heartbeat_error(REBALANCE_IN_PROGRESS)
            seen["a_rejoin"] = plain(a.join())
            seen["b_join"] = plain(b.finish(parked))
            labels.name(b.member_id, "B")
            seen["a_sync2"] = plain(a.sync({a.member_id: assignment({"t": [0]}), b.member_id: assignment({"t": [1]})}))
            seen["b_sync2"] = plain(b.sync())
            # The leader's instance restarts: a new member id takes its place (and the lead) without a rebalance.
            seen["a2_join"] = plain(a2.join())
            labels.name(a2.member_id, "A2")
            seen["describe_after_replacement"] = decoded_describe(describe_group(b.client, group), labels)
            seen["old_a_heartbeat"] = plain(a.heartbeat())
            seen["old_a_sync"] = plain(a.sync())
            seen["old_a_join"] = plain(a.join())
            seen["old_a_leave"] = plain(a.leave())
            generation = seen["a2_join"]["generation_id"]
            seen["a2_sync"] = plain(a2.sync({}, generation_id=generation))
            seen["a2_heartbeat"] = plain(a2.heartbeat(generation_id=generation))
            seen["b_heartbeat"] = plain(b.heartbeat())
            seen["b_heartbeat_other_instance"] = plain(b.heartbeat(group_instance_id="i-9"))
            seen["leave_by_instance"] = plain(b.client.call(LEAVE, 4, {"group_id": group, "members": [
                {"member_id": "", "group_instance_id": "i-2"}, {"member_id": "", "group_instance_id": "i-7"},
                {"member_id": a.member_id, "group_instance_id": "i-1"}]}))
            seen["describe_end"] = decoded_describe(describe_group(b.client, group), labels)
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), "static membership")


# ================================================================================================ timeouts

def test_session_timeout_removes_a_silent_member(pair):
    def scenario(target):
        group = target.unique("session")
        labels = Labels()
        seen = {}
        # 6 s: group.min.session.timeout.ms, the shortest either broker accepts
        with ClassicMember(target, group, session_ms=6000) as a, ClassicMember(target, group, session_ms=6000) as b:
            _two_member_generation(a, b, labels)
            start = time.monotonic()
            seen["a_sees_rebalance"] = a.wait_for_heartbeat_error(REBALANCE_IN_PROGRESS, timeout=40) > 0
            seen["after_a_session_timeout"] = time.monotonic() - start > 5.0
            seen["describe"] = decoded_describe(describe_group(a.client, group), labels)
            seen["a_rejoin"] = plain(a.join())
            seen["b_heartbeat"] = plain(b.heartbeat())
            seen["b_join"] = plain(b.join())
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), "a session timeout")


def test_rebalance_and_sync_timeouts(pair):
    def scenario(target):
        group = target.unique("timeouts")
        labels = Labels()
        seen = {}
        with ClassicMember(target, group, rebalance_ms=1500) as a, ClassicMember(target, group, rebalance_ms=1500) as b:
            a.join_fully()
            labels.name(a.member_id, "A")
            a.sync({a.member_id: b""})
            b.join()
            labels.name(b.member_id, "B")
            start = time.monotonic()
            seen["b_join"] = plain(b.join())  # A never rejoins: the join phase ends at the rebalance timeout
            seen["after_the_rebalance_timeout"] = time.monotonic() - start > 1.0
            seen["a_heartbeat"] = plain(a.heartbeat())
            seen["describe"] = decoded_describe(describe_group(b.client, group), labels)

            def left_completing():  # B never syncs: removed at the end of the sync phase
                d = decoded_describe(describe_group(a.client, group), labels)
                return d["group_state"] != "CompletingRebalance" and d

            seen["describe_after_sync_timeout"] = wait_until(left_completing, 30, "the sync phase to end")
            seen["b_heartbeat"] = plain(b.heartbeat())
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), "rebalance and sync timeouts")


# ============================================================================================ group admin

def test_list_describe_and_delete_groups_in_every_version(pair):
    def scenario(target):
        labels = Labels()
        seen = {}
        stable, empty, preparing = target.unique("ls-stable"), target.unique("ls-empty"), target.unique("ls-prep")
        simple, absent, topic = target.unique("ls-simple"), target.unique("ls-none"), target.unique("ls-topic")
        names = target.names()
        ours = {stable, empty, preparing, simple, absent}  # the module's other groups change with time

        def mine(groups):
            return sorted((g for g in plain(groups) if g["group_id"] in ours), key=lambda g: names[g["group_id"]])

        with target.raw() as c, ClassicMember(target, stable) as a, ClassicMember(target, empty) as e, \
                ClassicMember(target, preparing) as p1, ClassicMember(target, preparing) as p2:
            create_topic_and_wait(c, topic, 1)
            a.join_fully()
            labels.name(a.member_id, "A")
            a.sync({a.member_id: b""})
            e.join_fully()
            labels.name(e.member_id, "E")
            e.sync({e.member_id: b""})
            e.leave()
            p1.join_fully()
            labels.name(p1.member_id, "P1")
            p1.sync({p1.member_id: b""})
            p2.join()
            labels.name(p2.member_id, "P2")
            parked = p2.send_join()
            p1.wait_for_heartbeat_error(REBALANCE_IN_PROGRESS)
            # a group made by a standalone consumer's commit: Empty, no protocol type
            seen["simple_commit"] = plain(c.call(OFFSET_COMMIT, 8, {
                "group_id": simple, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                           "committed_leader_epoch": -1, "committed_metadata": ""}]}]}))
            for v in range(6):
                seen[f"list_v{v}"] = mine(c.call(LIST, v, {"states_filter": [], "types_filter": []}).groups)
            seen["list_states"] = mine(c.call(LIST, 5, {"states_filter": ["stable", "Empty"],
                                                        "types_filter": []}).groups)
            seen["list_states_v4"] = mine(c.call(LIST, 4, {"states_filter": ["PreparingRebalance"]}).groups)
            seen["list_unknown_state"] = plain(c.call(LIST, 5, {"states_filter": ["nosuch"], "types_filter": []}))
            seen["list_classic"] = mine(c.call(LIST, 5, {"states_filter": [], "types_filter": ["Classic"]}).groups)
            seen["list_consumer"] = mine(c.call(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]}).groups)
            seen["list_unknown_type"] = plain(c.call(LIST, 5, {"states_filter": [], "types_filter": ["nosuch"]}))
            # (not the group "": on the run's shared Kafka any other test may have made it)
            for v in range(7):
                seen[f"describe_v{v}"] = labels.apply(tidy(plain(c.call(DESCRIBE, v, {
                    "groups": [stable, empty, simple, absent], "include_authorized_operations": True}).groups)))
            for v in range(4):
                seen[f"delete_v{v}"] = tidy(plain(c.call(DELETE, v, {
                    "groups_names": [stable, preparing, absent]}).results))
            seen["delete_empty_and_simple"] = tidy(plain(c.call(DELETE, 3, {
                "groups_names": [empty, simple, empty]}).results))
            seen["describe_deleted"] = tidy(plain(c.call(DESCRIBE, 5, {"groups": [empty, simple]}).groups))
            seen["offsets_of_deleted"] = plain(c.call(OFFSET_FETCH, 7, {"group_id": simple, "topics": None,
                                                                         "require_stable": False}))
            p1.join()
            p2.finish(parked)
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), "ListGroups, DescribeGroups and DeleteGroups")


# ================================================================================================= offsets

def _commit_body(group, topic, tid, parts, generation=-1, member="", instance=None, retention=-1):
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "group_instance_id": instance, "retention_time_ms": retention,
            "topics": [{"name": topic, "topic_id": tid, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": e, "committed_metadata": m,
                 "commit_timestamp": -1} for p, o, e, m in parts]}]}


def _fetch(c, version, group, topic, tid, partitions, *, require_stable=False, member_id=None, member_epoch=-1):
    topics = None if partitions is None else [{"name": topic, "topic_id": tid, "partition_indexes": partitions}]
    if version < 8:
        body = {"group_id": group, "topics": topics, "require_stable": require_stable}
    else:
        body = {"groups": [{"group_id": group, "member_id": member_id, "member_epoch": member_epoch,
                            "topics": topics}], "require_stable": require_stable}
    return plain(c.call(OFFSET_FETCH, version, body))


@pytest.mark.parametrize("version", range(2, 11))
def test_offset_commit_fetch_and_delete(pair, version):
    fetch_v = version  # OffsetFetch goes one version further back (v1) and as far (v10)

    def scenario(target):
        labels = Labels()
        seen = {}
        group, topic = target.unique("offsets"), target.unique("offsets-t")
        with target.raw() as c, ClassicMember(target, group, protocols=[("range", subscription(topic))]) as a:
            tid = create_topic_and_wait(c, topic, 3)

            def commit(parts, **kw):
                return plain(c.call(OFFSET_COMMIT, version, _commit_body(group, topic, tid, parts, **kw)))

            seen["standalone_commit"] = commit([(0, 10, 3, "meta"), (1, 11, -1, None), (2, 12, 0, "")],
                                               retention=60_000)
            seen["unknown_partition"] = commit([(7, 1, -1, "")])
            seen["unknown_topic"] = plain(c.call(OFFSET_COMMIT, version, _commit_body(
                group, topic + "x", uuid.UUID(int=77), [(0, 1, -1, "")])))
            seen["metadata_too_large"] = commit([(0, 1, -1, "x" * 4097)])
            seen["metadata_4096"] = commit([(1, 5, -1, "y" * 4096)])
            seen["empty_group_id"] = plain(c.call(OFFSET_COMMIT, version, _commit_body(
                "", topic, tid, [(0, 1, -1, "")])))
            a.join_fully()
            labels.name(a.member_id, "A")
            seen["while_completing_rebalance"] = commit([(0, 20, -1, "")], generation=a.generation,
                                                        member=a.member_id)
            a.sync({a.member_id: assignment({topic: [0, 1, 2]})})
            seen["member_commit"] = commit([(0, 21, -1, "m")], generation=a.generation, member=a.member_id)
            seen["no_member_on_stable_group"] = commit([(0, 22, -1, "")])
            seen["wrong_generation"] = commit([(0, 23, -1, "")], generation=a.generation + 1, member=a.member_id)
            seen["unknown_member"] = commit([(0, 24, -1, "")], generation=a.generation, member="nobody")
            seen["other_instance"] = commit([(0, 25, -1, "")], generation=a.generation, member=a.member_id,
                                            instance="i-9")
            seen["fetch"] = _fetch(c, fetch_v, group, topic, tid, [0, 1, 2, 9])
            seen["fetch_all"] = _fetch(c, fetch_v, group, topic, tid, None)
            seen["fetch_unknown_group"] = _fetch(c, fetch_v, group + "-none", topic, tid, [0])
            seen["fetch_require_stable"] = _fetch(c, max(fetch_v, 7), group, topic, tid, [0], require_stable=True)
            if fetch_v >= 9:
                seen["fetch_as_member"] = _fetch(c, fetch_v, group, topic, tid, [0], member_id=a.member_id,
                                                 member_epoch=a.generation)
            if version == 2:
                seen["fetch_v1"] = _fetch(c, 1, group, topic, tid, [0, 1])
            delete = {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]},
                                                    {"name": topic + "-none", "partitions": [{"partition_index": 0}]}]}
            seen["offset_delete_subscribed"] = plain(c.call(OFFSET_DELETE, 0, delete))
            a.leave()
            seen["offset_delete_empty_group"] = plain(c.call(OFFSET_DELETE, 0, delete))
            seen["fetch_after_delete"] = _fetch(c, fetch_v, group, topic, tid, None)
            seen["offset_delete_unknown_group"] = plain(c.call(OFFSET_DELETE, 0, {"group_id": group + "-none",
                                                                                 "topics": []}))
            seen["offset_delete_empty_group_id"] = plain(c.call(OFFSET_DELETE, 0, {"group_id": "", "topics": []}))
        return tidy(labels.apply(seen))

    assert_same(run_both(pair, scenario), f"OffsetCommit v{version} and OffsetFetch")
