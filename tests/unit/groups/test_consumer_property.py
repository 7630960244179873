"""Property tests for consumer groups: the server-side assignors, and random members heartbeating, leaving and
timing out while topics appear never let two members hold a partition at once, and cooperative members always
converge on the target assignment."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.groups.consumer.assignors import RangeAssignor, UniformAssignor
from tests.unit.groups.group_helpers import (
    Topics,
    assigned,
    cg_req,
    consumer_heartbeat,
    make,
    owners_are_exclusive,
)

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]


@st.composite
def assignment_input(draw):
    partitions = {t: draw(st.integers(1, 8)) for t in TOPICS[:draw(st.integers(1, 4))]}
    n = draw(st.integers(1, 6))
    homogeneous = draw(st.booleans())
    topics = sorted(partitions)
    subs = {}
    for i in range(n):
        chosen = topics if homogeneous else draw(st.sets(st.sampled_from(topics), min_size=1))
        subs[f"m{i}"] = set(chosen)
    current = {}
    for m in subs:
        if draw(st.booleans()):
            current[m] = {t: frozenset(draw(st.sets(st.integers(0, partitions[t] - 1)))) for t in subs[m]}
    return subs, partitions, current, homogeneous


def check_assignment(result, subs, partitions) -> None:
    seen = {}
    for m, a in result.items():
        for t, ps in a.items():
            assert t in subs[m], f"{m} got unsubscribed topic"
            for p in ps:
                assert 0 <= p < partitions[t]
                assert (t, p) not in seen, f"{t}:{p} given twice"
                seen[(t, p)] = m
    wanted = {(t, p) for t, n in partitions.items() if any(t in s for s in subs.values()) for p in range(n)}
    assert set(seen) == wanted


@settings(max_examples=300, deadline=None)
@given(assignment_input())
def test_assignors_give_every_subscribed_partition_to_exactly_one_subscriber(data):
    subs, partitions, current, homogeneous = data
    for assignor in (UniformAssignor(), RangeAssignor()):
        result = assignor.assign(subs, partitions, current)
        check_assignment(result, subs, partitions)
        assert assignor.assign(subs, partitions, current) == result  # deterministic
    uniform = UniformAssignor().assign(subs, partitions, current)
    if homogeneous:
        loads = [sum(len(ps) for ps in a.values()) for a in uniform.values()]
        assert max(loads) - min(loads) <= 1


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(1, 30))
def test_uniform_assignor_moves_few_partitions_when_a_member_joins(n, num_partitions):
    t = TOPICS[0]
    subs = {f"m{i}": {t} for i in range(n)}
    before = UniformAssignor().assign(subs, {t: num_partitions}, {})
    subs[f"m{n}"] = {t}
    after = UniformAssignor().assign(subs, {t: num_partitions}, before)
    moved = sum(len(before[m].get(t, frozenset()) - after[m].get(t, frozenset())) for m in before)
    # Only what the newcomer needs moves.
    assert moved == sum(len(ps) for ps in after[f"m{n}"].values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["join", "beat", "beat-stale", "leave", "time", "grow"]),
                          st.integers(0, 3), st.integers(0, 30_000)), max_size=40))
def test_random_members_never_share_a_partition_and_cooperative_members_converge(steps):
    topics = Topics()
    topics.create("t", 4)
    gc = make(topics)
    owned: dict[str, dict] = {}  # member -> what it believes it owns
    epochs: dict[str, int] = {}
    now = 0

    def beat(m: str, *, report: bool = True) -> None:
        if m not in epochs:
            r = consumer_heartbeat(gc, cg_req(m, 0, regex="t.*", rebalance=10_000), 1, now).response
        else:
            req = cg_req(m, epochs[m], owned=owned.get(m, {}) if report else None)
            r = consumer_heartbeat(gc, req, 1, now).response
        if r["error_code"] != 0:
            epochs.pop(m, None)  # fenced or unknown: start over without partitions
            owned.pop(m, None)
            return
        epochs[m] = r["member_epoch"]
        if (a := assigned(r)) is not None:
            owned[m] = a

    for op, i, dt in steps:
        m = f"m{i}"
        if (op == "join") == (m not in epochs) and op in ("join", "beat"):
            beat(m)  # a new member joins, a member heartbeats
        elif op == "beat-stale" and m in epochs:
            beat(m, report=False)
        elif op == "leave" and m in epochs:
            gc.consumer_group_heartbeat(cg_req(m, -1), 1, now)
            epochs.pop(m)
            owned.pop(m, None)
        elif op == "time":
            now += dt
            gc.tick(now)
        elif op == "grow":
            topics.create(f"t{len(topics.by_name)}", 1 + dt % 3)
        if "g" in gc.consumer.groups:
            owners_are_exclusive(gc)
            # What a member believes it owns is never held by another member at the same time.
            for a, pa in owned.items():
                for b, pb in owned.items():
                    if a < b and a in epochs and b in epochs:
                        for t in set(pa) & set(pb):
                            assert not (pa[t] & pb[t]) or gc.consumer.groups["g"].members.get(a) is None \
                                or gc.consumer.groups["g"].members.get(b) is None
    # Cooperative phase: every live member heartbeats until the group is stable.
    live = [m for m in epochs if m in gc.consumer.groups.get("g", type("E", (), {"members": {}})()).members]
    if not live:
        return
    for _ in range(20):
        now += 100
        for m in live:
            beat(m)
        group = gc.consumer.groups["g"]
        if group.state().value == "Stable":
            break
    group = gc.consumer.groups["g"]
    assert group.state().value == "Stable", group.snapshot()
    for m in live:
        member = group.members[m]
        assert member.assigned_partitions == {t: ps for t, ps in group.target_assignment[m].items() if ps}
        assert member.member_epoch == group.assignment_epoch
    everything = {(topics.get(n)[0], p) for n in topics.by_name for p in range(topics.get(n)[1])}
    held = {(t, p) for m in live for t, ps in group.members[m].assigned_partitions.items() for p in ps}
    assert held == everything
