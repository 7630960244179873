"""Classic group state machine (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) driven with an injected clock."""

from __future__ import annotations

from broker.groups.classic import records as classic_records
from broker.groups.classic.group import ClassicState
from protocol.errors import ErrorCode
from tests.unit.groups.group_helpers import (
    Waiters,
    assignment,
    hb_req,
    join_req,
    make,
    subscription,
    sync_req,
)

E = ErrorCode


def form_group(w: Waiters, now: int = 1000, n: int = 1, **join_kw) -> list[str]:
    """n members join (MEMBER_ID_REQUIRED first), the generation forms and the leader syncs."""
    ids = []
    for _ in range(n):
        first = w.join(join_req(**join_kw), now)
        assert w.answers[first]["error_code"] == E.MEMBER_ID_REQUIRED
        ids.append(w.answers[first]["member_id"])
    joins = [w.join(join_req(mid, **join_kw), now) for mid in ids]
    w.tick(now)  # initial rebalance delay (0) completes the join phase
    answers = [w.answers[j] for j in joins]
    assert all(a["error_code"] == 0 for a in answers), answers
    generation = answers[0]["generation_id"]
    leader = answers[0]["leader"]
    w.sync(sync_req(leader, generation, {m: assignment(t=[i]) for i, m in enumerate(ids)}), now)
    for mid in ids:
        if mid != leader:
            w.sync(sync_req(mid, generation), now)
    return ids


def test_member_id_required_then_first_generation_with_leader_metadata():
    gc = make()
    w = Waiters(gc)
    first = w.join(join_req(), 1000)
    answer = w.answers[first]
    assert answer["error_code"] == E.MEMBER_ID_REQUIRED and answer["member_id"].startswith("c-")
    assert len(w.records) == 1  # the new group's empty GroupMetadata record
    mid = answer["member_id"]
    second = w.join(join_req(mid), 1000)
    assert second not in w.answers  # parked until the (zero) initial delay fires
    assert gc.next_deadline() == 1000
    w.tick(1000)
    joined = w.answers[second]
    assert joined["error_code"] == 0 and joined["generation_id"] == 1 and joined["leader"] == mid
    assert joined["protocol_name"] == "range" and joined["protocol_type"] == "consumer"
    assert [m["member_id"] for m in joined["members"]] == [mid]
    assert gc.classic.groups["g"].state is ClassicState.COMPLETING_REBALANCE


def test_versions_before_4_join_without_member_id_required():
    gc = make()
    w = Waiters(gc)
    first = w.join(join_req(), 1000, version=3)
    assert first not in w.answers
    w.tick(1000)
    assert w.answers[first]["error_code"] == 0 and w.answers[first]["generation_id"] == 1


def test_leader_sync_writes_assignment_before_anyone_gets_it():
    gc = make()
    w = Waiters(gc)
    a, b = (w.answers[w.join(join_req(), 1000)]["member_id"] for _ in range(2))
    ja, jb = w.join(join_req(a), 1000), w.join(join_req(b), 1000)
    w.tick(1000)
    gen = w.answers[ja]["generation_id"]
    leader = w.answers[ja]["leader"]
    follower = b if leader == a else a
    assert len(w.answers[ja if leader == a else jb]["members"]) == 2
    assert w.answers[jb if leader == a else ja]["members"] == []
    sf = w.sync(sync_req(follower, gen), 1000)
    assert sf not in w.answers  # waits for the leader
    records_before = len(w.records)
    res = gc.sync_group(sync_req(leader, gen, {a: assignment(t=[0]), b: assignment(t=[1])}), 1000, "sl")
    assert len(res.records) == 1 and not res.completions  # nothing released before the write
    w.run(res)
    assert len(w.records) == records_before + 1
    assert w.answers["sl"]["error_code"] == 0 and w.answers[sf]["error_code"] == 0
    assert w.answers[sf]["assignment"] == assignment(t=[1 if follower == b else 0])
    assert gc.classic.groups["g"].state is ClassicState.STABLE


def test_failed_assignment_write_answers_error_and_rebalances():
    gc = make()
    w = Waiters(gc)
    mid = w.answers[w.join(join_req(), 1000)]["member_id"]
    j = w.join(join_req(mid), 1000)
    w.tick(1000)
    res = gc.sync_group(sync_req(mid, w.answers[j]["generation_id"], {mid: b"x"}), 1000, "s")
    w.run(res, ok=False)
    assert w.answers["s"]["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    assert gc.classic.groups["g"].state is ClassicState.PREPARING_REBALANCE


def test_new_member_triggers_rebalance_and_old_member_is_told_by_heartbeat():
    gc = make()
    w = Waiters(gc)
    [m1] = form_group(w)
    assert gc.heartbeat(hb_req(m1, 1), 1100).response == {"error_code": 0}
    m2 = w.answers[w.join(join_req(), 1200)]["member_id"]
    j2 = w.join(join_req(m2), 1200)
    assert j2 not in w.answers
    assert gc.heartbeat(hb_req(m1, 1), 1300).response["error_code"] == E.REBALANCE_IN_PROGRESS
    j1 = w.join(join_req(m1), 1300)  # rejoin completes the phase: every member is back
    assert w.answers[j1]["generation_id"] == 2 == w.answers[j2]["generation_id"]
    assert gc.heartbeat(hb_req(m1, 1), 1300).response["error_code"] == E.ILLEGAL_GENERATION
    assert gc.heartbeat(hb_req("nobody", 2), 1300).response["error_code"] == E.UNKNOWN_MEMBER_ID


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    gc = make()
    w = Waiters(gc)
    m1, m2 = form_group(w, n=2, rebalance=5_000)
    j1 = w.join(join_req(m1, rebalance=5_000), 2000)  # m1 (or the leader) starts a rebalance; m2 stays away
    assert j1 not in w.answers
    w.tick(6999)
    assert j1 not in w.answers
    w.tick(7000)
    assert w.answers[j1]["error_code"] == 0 and w.answers[j1]["generation_id"] == 2
    assert list(gc.classic.groups["g"].members) == [m1]


def test_session_timeout_removes_a_silent_member():
    gc = make()
    w = Waiters(gc)
    m1, m2 = form_group(w, n=2, session=10_000)
    for t in range(2000, 11_001, 3000):
        assert gc.heartbeat(hb_req(m1, 1), t).response == {"error_code": 0}
    w.tick(11_000)  # m2's last heartbeat was its sync at 1000
    group = gc.classic.groups["g"]
    assert m2 not in group.members and group.state is ClassicState.PREPARING_REBALANCE
    assert gc.heartbeat(hb_req(m2, 1), 11_001).response["error_code"] == E.UNKNOWN_MEMBER_ID


def test_pending_member_that_never_rejoins_expires():
    gc = make()
    w = Waiters(gc)
    mid = w.answers[w.join(join_req(session=10_000), 1000)]["member_id"]
    assert mid in gc.classic.groups["g"].pending_join
    w.tick(11_000)
    assert mid not in gc.classic.groups["g"].pending_join


def test_sync_timeout_removes_members_that_never_sync():
    gc = make()
    w = Waiters(gc)
    a, b = (w.answers[w.join(join_req(rebalance=4000), 1000)]["member_id"] for _ in range(2))
    ja, jb = w.join(join_req(a, rebalance=4000), 1000), w.join(join_req(b, rebalance=4000), 1000)
    w.tick(1000)
    leader = w.answers[ja]["leader"]
    w.sync(sync_req(leader, 1, {a: b"A", b: b"B"}), 1100)
    w.tick(5000)  # the follower never sent SyncGroup within the rebalance timeout
    group = gc.classic.groups["g"]
    assert list(group.members) == [leader] and group.state is ClassicState.PREPARING_REBALANCE
    del jb


def test_protocol_selection_prefers_what_members_vote_for_among_common_protocols():
    gc = make()
    w = Waiters(gc)
    protos = [
        [("range", b"1"), ("roundrobin", b"1")],
        [("roundrobin", b"2"), ("range", b"2"), ("sticky", b"2")],
        [("roundrobin", b"3"), ("range", b"3")],
    ]
    ids = [w.answers[w.join(join_req(protocols=protos[0]), 1000)]["member_id"] for _ in range(3)]
    joins = [w.join(join_req(mid, protocols=p), 1000) for mid, p in zip(ids, protos, strict=True)]
    w.tick(1000)
    assert {w.answers[j]["protocol_name"] for j in joins} == {"roundrobin"}
    leader_answer = next(w.answers[j] for j in joins if w.answers[j]["members"])
    assert {m["metadata"] for m in leader_answer["members"]} == {b"1", b"2", b"3"}


def test_inconsistent_protocols_are_refused():
    gc = make()
    w = Waiters(gc)
    form_group(w)
    j = w.join(join_req(protocols=[("other", b"")]), 2000)
    assert w.answers[j]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    j = w.join(join_req(protocol_type="connect"), 2000)
    assert w.answers[j]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    j = w.join(join_req(protocols=[]), 2000, version=9)
    assert w.answers[j]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_request_errors():
    gc = make(min_session_timeout_ms=6000, max_session_timeout_ms=60_000)
    w = Waiters(gc)
    assert w.answers[w.join(join_req(group=""), 1)]["error_code"] == E.INVALID_GROUP_ID
    assert w.answers[w.join(join_req(session=5999), 1)]["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert w.answers[w.join(join_req(session=60_001), 1)]["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert w.answers[w.join(join_req("someone"), 1)]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert w.answers[w.sync(sync_req("someone", 1), 1)]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert gc.heartbeat(hb_req("someone", 1, group=""), 1).response["error_code"] == E.INVALID_GROUP_ID
    [m] = form_group(w, now=10)
    assert w.answers[w.sync(sync_req(m, 7), 20)]["error_code"] == E.ILLEGAL_GENERATION
    bad = {**sync_req(m, 1), "protocol_name": "roundrobin"}
    assert w.answers[w.sync(bad, 20)]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_group_max_size():
    gc = make(max_size=2)
    w = Waiters(gc)
    form_group(w, n=2)
    j = w.join(join_req(), 2000)
    assert w.answers[j]["error_code"] == E.GROUP_MAX_SIZE_REACHED


def test_static_member_restart_keeps_assignment_without_rebalance_and_fences_old_id():
    gc = make()
    w = Waiters(gc)
    a = w.join(join_req(instance="i-a"), 1000)
    b = w.join(join_req(instance="i-b"), 1000)
    w.tick(1000)
    ma, mb = w.answers[a]["member_id"], w.answers[b]["member_id"]
    leader = w.answers[a]["leader"]
    w.sync(sync_req(leader, 1, {ma: b"A", mb: b"B"}, instance="i-a" if leader == ma else "i-b"), 1000)
    follower, finst = (mb, "i-b") if leader == ma else (ma, "i-a")
    w.sync(sync_req(follower, 1, instance=finst), 1000)
    # The follower restarts: same instance id, no member id.
    again = w.join(join_req(instance=finst), 2000)
    answer = w.answers[again]
    assert answer["error_code"] == 0 and answer["generation_id"] == 1 and answer["member_id"] != follower
    assert answer["skip_assignment"] is False and answer["members"] == []
    group = gc.classic.groups["g"]
    assert group.state is ClassicState.STABLE and group.members[answer["member_id"]].assignment in (b"A", b"B")
    assert gc.heartbeat(hb_req(follower, 1, instance=finst), 2001).response["error_code"] == E.FENCED_INSTANCE_ID
    s = w.sync(sync_req(answer["member_id"], 1, instance=finst), 2002)
    assert w.answers[s]["assignment"] == (b"B" if finst == "i-b" else b"A")


def test_static_leader_restart_learns_members_but_skips_assignment_v9():
    gc = make()
    w = Waiters(gc)
    a = w.join(join_req(instance="i-a"), 1000)
    w.tick(1000)
    ma = w.answers[a]["member_id"]
    w.sync(sync_req(ma, 1, {ma: b"A"}, instance="i-a"), 1000)
    again = w.join(join_req(instance="i-a"), 2000, version=9)
    answer = w.answers[again]
    assert answer["skip_assignment"] is True and answer["leader"] == answer["member_id"]
    assert [m["group_instance_id"] for m in answer["members"]] == ["i-a"]


def test_leave_group_and_admin_removal_by_instance_id():
    gc = make()
    w = Waiters(gc)
    a = w.join(join_req(instance="i-a"), 1000)
    w.tick(1000)
    ma = w.answers[a]["member_id"]
    res = w.run(gc.leave_group("g", [{"member_id": "", "group_instance_id": "i-a"},
                                     {"member_id": "ghost", "group_instance_id": None}], 2000))
    assert [m["error_code"] for m in res.response["members"]] == [0, E.UNKNOWN_MEMBER_ID]
    group = gc.classic.groups["g"]
    assert group.state is ClassicState.EMPTY and group.generation_id == 2 and not group.members
    assert res.records == [classic_records.group_metadata(group, {})]
    del ma


def test_leave_unknown_group_answers_per_member():
    gc = make()
    res = gc.leave_group("nope", [{"member_id": "m", "group_instance_id": None}], 1)
    assert res.response["members"][0]["error_code"] == E.UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_gathers_members_that_arrive_together():
    gc = make(initial_rebalance_delay_ms=3000)
    w = Waiters(gc)
    ids = [w.answers[w.join(join_req(), 1000)]["member_id"] for _ in range(3)]
    j0 = w.join(join_req(ids[0]), 1000)
    w.tick(2000)
    j1 = w.join(join_req(ids[1]), 2500)
    w.tick(4000)  # the delay was extended because a member arrived
    assert j0 not in w.answers
    j2 = w.join(join_req(ids[2]), 4500)
    w.tick(7000)
    w.tick(10_000)
    assert {w.answers[j]["generation_id"] for j in (j0, j1, j2)} == {1}


def test_classic_group_metadata_record_loads_back_the_same_group():
    gc = make()
    w = Waiters(gc)
    a = w.join(join_req(instance="i-a"), 1000)
    mb = w.answers[w.join(join_req(protocols=[("range", subscription("t", "u"))]), 1000)]["member_id"]
    b = w.join(join_req(mb, protocols=[("range", subscription("t", "u"))]), 1000)
    w.tick(1000)
    ma = w.answers[a]["member_id"]
    leader = w.answers[a]["leader"]
    inst = "i-a" if leader == ma else None
    w.sync(sync_req(leader, 1, {ma: b"A", mb: b"B"}, instance=inst), 1000)
    loaded = make()
    loaded.begin_load(5000)
    for r in w.records:
        loaded.replay(r.key, r.value)
    loaded.loaded(5000)
    assert loaded.snapshot()["classic"] == gc.snapshot()["classic"]
    group = loaded.classic.groups["g"]
    assert group.subscribed_topics == {"t", "u"} and group.static_members == {"i-a": ma}
    # Loaded members must heartbeat within their session, as after any restart.
    assert loaded.next_deadline() == 5000 + 10_000
    del b
