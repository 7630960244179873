"""Online migration between classic and consumer (KIP-848) groups with members, in the sans-IO coordinator:
upgrade by a consumer-protocol member, classic members inside a consumer group (JoinGroup/SyncGroup/Heartbeat/
LeaveGroup, revocation before reassignment, timeouts), downgrade when the last consumer-protocol member goes,
`group.consumer.migration.policy`, and replay of every conversion."""

from __future__ import annotations

from broker.groups.classic.group import ClassicState
from broker.groups.consumer import protocol as consumer_protocol
from broker.groups.consumer.group import MemberState
from broker.groups.consumer.manager import ConsumerConfig
from protocol.codec import message_codec
from protocol.errors import ErrorCode
from tests.unit.groups.group_helpers import (
    Topics,
    Waiters,
    assigned,
    assignment,
    cg_req,
    hb_req,
    join_req,
    make,
    owners_are_exclusive,
    sync_req,
)

E = ErrorCode


def subscription_v1(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    body = message_codec("ConsumerProtocolSubscription", 1).encode({
        "topics": topics, "user_data": None,
        "owned_partitions": [{"topic": t, "partitions": ps} for t, ps in (owned or {}).items()]})
    return b"\x00\x01" + body


def classic_join(mid: str = "", owned: dict[str, list[int]] | None = None, **kw):
    return join_req(mid, protocols=[("range", subscription_v1(["t"], owned)), ("roundrobin", subscription_v1(["t"]))],
                    **kw)


def setup(policy: str = "bidirectional", **kw):
    topics = Topics()
    t = topics.create("t", 6)
    gc = make(topics, consumer=ConsumerConfig(migration_policy=policy, **kw))
    ids = iter(f"k{i}" for i in range(100))
    gc.consumer.classic_member_id = lambda: next(ids)
    return gc, topics, t, Waiters(gc)


def hb(gc, req, now=1000):
    return gc.consumer_group_heartbeat(req, 1, now, client_id="c", client_host="/127.0.0.1")


def classic_group(w: Waiters, now: int = 1000) -> tuple[str, str]:
    """Two classic members a and b on t (6 partitions): a has 0-2, b has 3-5; Stable at generation 1."""
    ids = []
    for _ in range(2):
        ids.append(w.answers[w.join(classic_join(), now)]["member_id"])
    joins = [w.join(classic_join(mid), now) for mid in ids]
    w.tick(now)
    gen = w.answers[joins[0]]["generation_id"]
    leader = w.answers[joins[0]]["leader"]
    w.sync(sync_req(leader, gen, {ids[0]: assignment(t=[0, 1, 2]), ids[1]: assignment(t=[3, 4, 5])}), now)
    w.sync(sync_req(ids[1] if leader == ids[0] else ids[0], gen), now)
    assert w.gc.classic.groups["g"].state is ClassicState.STABLE
    return ids[0], ids[1]


def sync_assignment(w: Waiters, mid: str, generation: int, now: int) -> dict:
    answer = w.answers[w.sync(sync_req(mid, generation), now)]
    assert answer["error_code"] == 0, answer
    return {t: set(ps) for t, ps in consumer_protocol.decode_assignment(answer["assignment"]).items()}


def replayed(gc, topics, records):
    loaded = make(topics)
    for r in records:
        loaded.replay(r.key, r.value)
    return loaded


def test_upgrade_keeps_the_classic_members_and_their_assignment():
    gc, topics, t, w = setup()
    a, b = classic_group(w)
    before = list(w.records)
    res = hb(gc, cg_req("c", 0, topics=["t"]), 2000)
    assert res.response["error_code"] == 0 and res.response["member_epoch"] == 2
    assert assigned(res.response) == {}  # every partition is still held by a classic member
    assert gc.group_type_of("g") == "consumer"
    assert res.records[0].value is None  # the classic group's tombstone first
    group = gc.consumer.groups["g"]
    assert group.group_epoch == 2 and set(group.members) == {a, b, "c"}
    for mid, ps in ((a, {0, 1, 2}), (b, {3, 4, 5})):
        m = group.members[mid]
        assert m.uses_classic_protocol and m.member_epoch == 1 and m.assigned_partitions == {t: frozenset(ps)}
        assert m.classic.session_timeout_ms == 10_000 and m.rebalance_timeout_ms == 30_000
    owners_are_exclusive(gc)
    [d] = gc.consumer_group_describe(["g"])
    assert sorted(m["member_type"] for m in d["members"]) == [0, 0, 1]
    assert gc.list_groups(types=["consumer"])[0]["group_id"] == "g"
    # The conversion and the heartbeat replay to the same group.
    assert replayed(gc, topics, before + res.records).snapshot()["consumer"] == gc.snapshot()["consumer"]
    assert replayed(gc, topics, before + res.records).group_type_of("g") == "consumer"


def test_classic_members_rejoin_and_partitions_move_only_once_released():
    gc, _, t, w = setup()
    a, b = classic_group(w)
    hb(gc, cg_req("c", 0, topics=["t"]), 2000)
    # The classic members learn about the new epoch through their heartbeats.
    assert w.run(gc.heartbeat(hb_req(a, 1), 2100)).response["error_code"] == E.REBALANCE_IN_PROGRESS
    assert w.run(gc.heartbeat(hb_req(b, 1), 2100)).response["error_code"] == E.REBALANCE_IN_PROGRESS
    assert w.answers[w.sync(sync_req(a, 1), 2100)]["error_code"] == E.REBALANCE_IN_PROGRESS
    # a (cooperative: it still owns its partitions) rejoins: it must first give some up.
    join = w.answers[w.join(classic_join(a, owned={"t": [0, 1, 2]}), 2200)]
    assert join["error_code"] == 0 and join["generation_id"] == 1 and join["leader"] == ""
    assert join["protocol_name"] == "range" and join["protocol_type"] == "consumer" and join["members"] == []
    group = gc.consumer.groups["g"]
    assert group.members[a].state == MemberState.UNREVOKED_PARTITIONS
    kept_a = sync_assignment(w, a, 1, 2200)
    assert kept_a["t"] < {0, 1, 2}
    assert w.run(gc.heartbeat(hb_req(a, 1), 2300)).response["error_code"] == E.REBALANCE_IN_PROGRESS
    owners_are_exclusive(gc)
    # a rejoins owning only what it kept: it moves to the group epoch.
    join = w.answers[w.join(classic_join(a, owned={"t": sorted(kept_a["t"])}), 2400)]
    assert join["generation_id"] == 2
    assert sync_assignment(w, a, 2, 2400) == kept_a
    assert w.run(gc.heartbeat(hb_req(a, 2), 2500)).response["error_code"] == 0
    # b (eager: it revoked everything before rejoining) moves at once.
    join = w.answers[w.join(classic_join(b, owned={}), 2600)]
    assert join["generation_id"] == 2
    kept_b = sync_assignment(w, b, 2, 2600)
    owners_are_exclusive(gc)
    # c gets the released partitions; every partition has exactly one owner.
    r = hb(gc, cg_req("c", 2, owned={}), 2700).response
    got_c = {p for ps in (assigned(r) or {}).values() for p in ps}
    assert got_c and got_c.isdisjoint(kept_a["t"] | kept_b["t"])
    assert got_c | kept_a["t"] | kept_b["t"] == set(range(6))
    owners_are_exclusive(gc)
    assert group.state().value == "Stable"


def test_classic_member_joins_a_consumer_group_with_member_id_required():
    gc, _, t, w = setup()
    hb(gc, cg_req("c", 0, topics=["t"]), 1000)
    first = w.answers[w.join(classic_join(), 1100)]
    assert first["error_code"] == E.MEMBER_ID_REQUIRED and first["member_id"] == "k0"
    assert gc.consumer.groups["g"].members.keys() == {"c"}  # nothing recorded yet
    join = w.answers[w.join(classic_join("k0"), 1200)]
    assert join["error_code"] == 0 and join["generation_id"] == 3
    group = gc.consumer.groups["g"]
    assert group.members["k0"].uses_classic_protocol and group.group_epoch == 3
    # c still holds everything: the classic member waits for its partitions (empty assignment meanwhile).
    assert sync_assignment(w, "k0", 3, 1200) == {}
    r = hb(gc, cg_req("c", 2, owned={t: set(range(6))}), 1300).response
    keep = assigned(r)[t]
    hb(gc, cg_req("c", 2, owned={t: keep}), 1400)
    # The partitions c released are waiting for k0: its heartbeat asks it to rejoin to collect them.
    assert w.run(gc.heartbeat(hb_req("k0", 3), 1500)).response["error_code"] == E.REBALANCE_IN_PROGRESS
    w.join(classic_join("k0"), 1600)
    assert sync_assignment(w, "k0", 3, 1600) == {"t": set(range(6)) - keep}
    assert w.run(gc.heartbeat(hb_req("k0", 3), 1700)).response["error_code"] == 0
    # Errors of classic requests to a consumer group.
    assert w.run(gc.heartbeat(hb_req("k0", 7), 1700)).response["error_code"] == E.ILLEGAL_GENERATION
    assert w.run(gc.heartbeat(hb_req("c", 3), 1700)).response["error_code"] == E.UNKNOWN_MEMBER_ID  # not classic
    assert w.run(gc.heartbeat(hb_req("zz", 3), 1700)).response["error_code"] == E.UNKNOWN_MEMBER_ID
    assert w.answers[w.sync(sync_req("k0", 2), 1700)]["error_code"] == E.ILLEGAL_GENERATION
    other = join_req(protocols=[("sticky", subscription_v1(["t"]))])
    assert w.answers[w.join(other, 1700)]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert w.answers[w.join(classic_join(session=10), 1700)]["error_code"] == E.INVALID_SESSION_TIMEOUT


def test_classic_leave_and_timeouts_fence_classic_members():
    gc, _, t, w = setup()
    a, b = classic_group(w)
    hb(gc, cg_req("c", 0, topics=["t"]), 2000)
    res = w.run(gc.leave_group("g", [{"member_id": a, "group_instance_id": None},
                                     {"member_id": "zz", "group_instance_id": None}], 2100))
    assert [m["error_code"] for m in res.response["members"]] == [0, E.UNKNOWN_MEMBER_ID]
    group = gc.consumer.groups["g"]
    assert a not in group.members and group.group_epoch == 3
    # b is told to rejoin and never does: fenced after its rebalance timeout (30 s).
    assert w.run(gc.heartbeat(hb_req(b, 1), 2200)).response["error_code"] == E.REBALANCE_IN_PROGRESS
    for now in range(5000, 32_200, 5000):
        hb(gc, cg_req("c", group.members["c"].member_epoch, owned={}), now)
        w.run(gc.heartbeat(hb_req(b, 1), now))
    w.tick(32_300)
    assert b not in group.members
    # c is alone: it gets every partition.
    r = hb(gc, cg_req("c", group.members["c"].member_epoch, owned={}), 32_400).response
    assert assigned(r) == {t: set(range(6))}


def test_downgrade_when_the_last_consumer_member_leaves():
    gc, topics, t, w = setup()
    a, b = classic_group(w)
    records = list(w.records)
    records += hb(gc, cg_req("c", 0, topics=["t"]), 2000).records
    target_a = gc.consumer.groups["g"].target_assignment[a][t]
    res = hb(gc, cg_req("c", -1), 2100)
    assert res.response["error_code"] == 0 and res.response["member_epoch"] == -1
    records += res.records
    assert gc.group_type_of("g") == "classic"
    group = gc.classic.groups["g"]
    # Kafka then rebalances the classic group, at the consumer group's epoch as generation.
    assert group.state is ClassicState.PREPARING_REBALANCE and group.generation_id == 2
    assert set(group.members) == {a, b} and group.protocol_name == "range"
    # Each member holds its target assignment (Kafka's choice; the rebalance follows at once).
    assert consumer_protocol.decode_assignment(group.members[a].assignment) == {"t": sorted(target_a)}
    # The members rejoin, the leader assigns, the group is Stable again.
    assert w.run(gc.heartbeat(hb_req(a, 2), 2200)).response["error_code"] == E.REBALANCE_IN_PROGRESS
    joins = [w.join(classic_join(mid), 2300) for mid in (a, b)]
    answers = [w.answers[j] for j in joins]
    assert [x["generation_id"] for x in answers] == [3, 3]
    leader = answers[0]["leader"]
    w.sync(sync_req(leader, 3, {a: assignment(t=[0, 1, 2]), b: assignment(t=[3, 4, 5])}), 2300)
    assert group.state is ClassicState.STABLE
    # Replay: the consumer tombstones then the classic group, Stable with its members.
    loaded = replayed(gc, topics, records)
    assert loaded.group_type_of("g") == "classic" and set(loaded.classic.groups["g"].members) == {a, b}
    assert "g" not in loaded.consumer.groups


def test_policy_disabled_keeps_each_group_its_type():
    gc, _, t, w = setup("disabled")
    a, b = classic_group(w)
    r = hb(gc, cg_req("c", 0, topics=["t"]), 2000).response
    assert r["error_code"] == E.GROUP_ID_NOT_FOUND
    assert r["error_message"] == "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
    assert gc.group_type_of("g") == "classic"
    # A consumer group admits classic members whatever the policy, but does not downgrade.
    hb(gc, cg_req("c", 0, topics=["t"], group="cg"), 2000)
    first = w.answers[w.join(classic_join(group="cg"), 2100)]
    w.join(classic_join(first["member_id"], group="cg"), 2100)
    assert gc.consumer.groups["cg"].members[first["member_id"]].uses_classic_protocol
    hb(gc, cg_req("c", -1, group="cg"), 2200)
    assert gc.group_type_of("cg") == "consumer" and set(gc.consumer.groups["cg"].members) == {first["member_id"]}


def test_upgrade_only_and_downgrade_only_policies():
    gc, _, t, w = setup("upgrade")
    classic_group(w)
    assert hb(gc, cg_req("c", 0, topics=["t"]), 2000).response["error_code"] == 0
    hb(gc, cg_req("c", -1), 2100)
    assert gc.group_type_of("g") == "consumer"  # no downgrade
    gc, _, t, w = setup("downgrade")
    classic_group(w)
    assert hb(gc, cg_req("c", 0, topics=["t"]), 2000).response["error_code"] == E.GROUP_ID_NOT_FOUND


def test_groups_that_cannot_be_upgraded():
    # Too many members for group.consumer.max.size.
    gc, _, t, w = setup(max_size=1)
    classic_group(w)
    assert hb(gc, cg_req("c", 0, topics=["t"]), 2000).response["error_code"] == E.GROUP_ID_NOT_FOUND
    # As many as the maximum: the joining member is refused and the group stays classic (nothing written).
    gc, _, t, w = setup(max_size=2)
    classic_group(w)
    res = hb(gc, cg_req("c", 0, topics=["t"]), 2000)
    assert res.response["error_code"] == E.GROUP_MAX_SIZE_REACHED and res.records == []
    assert gc.group_type_of("g") == "classic"
    # Members that do not use the consumer embedded protocol.
    gc, _, t, w = setup()
    first = w.answers[w.join(join_req(protocol_type="connect"), 1000)]
    w.join(join_req(first["member_id"], protocol_type="connect"), 1000)
    w.tick(1000)
    assert hb(gc, cg_req("c", 0, topics=["t"]), 2000).response["error_code"] == E.GROUP_ID_NOT_FOUND
    assert gc.group_type_of("g") == "classic"


def test_upgrade_during_a_rebalance_tells_parked_members_to_rejoin():
    gc, _, t, w = setup()
    a, b = classic_group(w)
    # a rejoins (a rebalance starts) and waits for b.
    parked = w.join(classic_join(a), 1500)
    assert parked not in w.answers
    assert w.run(hb(gc, cg_req("c", 0, topics=["t"]), 2000)).response["error_code"] == 0
    assert w.answers[parked]["error_code"] == E.REBALANCE_IN_PROGRESS
    assert gc.group_type_of("g") == "consumer"


def test_classic_static_member_replacing_the_last_consumer_member_downgrades_without_rebalance():
    gc, topics, t, w = setup()
    w.run(hb(gc, cg_req("c", 0, topics=["t"], instance="i-c"), 1000))
    first = w.answers[w.join(classic_join(), 1100)]["member_id"]
    w.join(classic_join(first), 1100)
    r = w.run(hb(gc, cg_req("c", 2, instance="i-c", owned={t: set(range(6))}), 1200)).response
    w.run(hb(gc, cg_req("c", 2, instance="i-c", owned={t: assigned(r)[t]}), 1300))
    group = gc.consumer.groups["g"]
    target_c = group.target_assignment["c"][t]
    # The instance restarts with the classic protocol: it takes c's place, and no consumer-protocol member is left.
    answer = w.answers[w.join(classic_join(instance="i-c"), 1400)]
    assert answer["error_code"] == 0 and answer["member_id"] == "k1"
    assert gc.group_type_of("g") == "classic"
    classic = gc.classic.groups["g"]
    assert classic.state is ClassicState.STABLE  # no rebalance: the new member took over c's assignment
    assert set(classic.members) == {first, "k1"} and answer["generation_id"] == classic.generation_id
    assert consumer_protocol.decode_assignment(classic.members["k1"].assignment) == {"t": sorted(target_c)}
    answer = w.answers[w.sync(sync_req("k1", classic.generation_id, instance="i-c"), 1500)]
    assert answer["error_code"] == 0
    assert consumer_protocol.decode_assignment(answer["assignment"]) == {"t": sorted(target_c)}
    loaded = replayed(gc, topics, w.records)
    assert loaded.group_type_of("g") == "classic" and set(loaded.classic.groups["g"].members) == {first, "k1"}


def test_consumer_static_member_replacing_a_classic_static_member_upgrades_the_group():
    gc, topics, t, w = setup()
    joins = [w.join(classic_join(instance=inst, group="s"), 1000) for inst in ("i0", "i1")]
    w.tick(1000)
    ids = [w.answers[j]["member_id"] for j in joins]
    leader = gc.classic.groups["s"].leader_id
    gen = gc.classic.groups["s"].generation_id
    w.sync(sync_req(leader, gen, {ids[0]: assignment(t=[0, 1, 2]), ids[1]: assignment(t=[3, 4, 5])},
                    group="s", instance="i0" if leader == ids[0] else "i1"), 1000)
    assert gc.classic.groups["s"].state is ClassicState.STABLE
    # The i0 process restarts with the consumer protocol and the same instance id: it takes over i0's partitions.
    r = w.run(hb(gc, cg_req("c0", 0, topics=["t"], instance="i0", group="s"), 2000)).response
    assert r["error_code"] == 0 and assigned(r) == {t: {0, 1, 2}}
    group = gc.consumer.groups["s"]
    assert set(group.members) == {"c0", ids[1]} and not group.members["c0"].uses_classic_protocol
    assert group.members[ids[1]].uses_classic_protocol
    assert group.group_epoch == gen + 1  # its subscription is new: the group epoch moves on
    owners_are_exclusive(gc, "s")
    loaded = replayed(gc, topics, w.records)
    assert loaded.snapshot()["consumer"]["s"] == gc.snapshot()["consumer"]["s"]


def test_classic_leave_group_removing_the_last_consumer_members_downgrades():
    """Kafka 4.1: a LeaveGroup (here an admin removal by instance id) may name consumer-protocol members too."""
    gc, _, t, w = setup()
    a, b = classic_group(w)
    hb(gc, cg_req("c", 0, topics=["t"], instance="i-c"), 2000)
    hb(gc, cg_req("d", 0, topics=["t"]), 2000)
    res = w.run(gc.leave_group("g", [{"member_id": "", "group_instance_id": "i-c"},
                                     {"member_id": "d", "group_instance_id": None}], 2100))
    assert [m["error_code"] for m in res.response["members"]] == [0, 0]
    assert gc.group_type_of("g") == "classic" and set(gc.classic.groups["g"].members) == {a, b}
    assert gc.classic.groups["g"].state is ClassicState.PREPARING_REBALANCE


def test_upgrade_refused_with_a_custom_assignor_user_data():
    gc, _, t, w = setup()
    ids = [w.answers[w.join(classic_join(), 1000)]["member_id"] for _ in range(2)]
    joins = [w.join(classic_join(mid), 1000) for mid in ids]
    w.tick(1000)
    leader, gen = w.answers[joins[0]]["leader"], w.answers[joins[0]]["generation_id"]
    with_data = consumer_protocol.encode_assignment({"t": [0, 1, 2]}, 0, user_data=b"\x01")
    w.sync(sync_req(leader, gen, {ids[0]: with_data, ids[1]: assignment(t=[3, 4, 5])}), 1000)
    r = hb(gc, cg_req("c", 0, topics=["t"]), 2000).response
    assert r["error_code"] == E.GROUP_ID_NOT_FOUND
    assert r["error_message"].startswith("Cannot upgrade classic group g to consumer group because an unsupported "
                                         "custom assignor is in use.")
    assert gc.group_type_of("g") == "classic"


def test_static_replacement_with_another_subscription_downgrades_with_a_rebalance():
    gc, topics, t, w = setup()
    topics.create("u", 2)
    w.run(hb(gc, cg_req("c", 0, topics=["t"], instance="i-c"), 1000))
    first = w.answers[w.join(classic_join(), 1100)]["member_id"]
    w.join(classic_join(first), 1100)
    other = join_req(protocols=[("range", subscription_v1(["t", "u"])), ("roundrobin", subscription_v1(["t", "u"]))],
                     instance="i-c")
    assert w.answers[w.join(other, 1400)]["error_code"] == 0
    assert gc.group_type_of("g") == "classic"
    assert gc.classic.groups["g"].state is ClassicState.PREPARING_REBALANCE
