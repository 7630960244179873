"""Simple share assignor: coverage, balance, sharing, stickiness, determinism (unit + hypothesis)."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups.share.assignor import SimpleShareAssignor

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def loads(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def owners(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> Counter[tuple[uuid.UUID, int]]:
    return Counter((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def test_single_member_gets_everything() -> None:
    out = SimpleShareAssignor().assign({"m": {T1, T2}}, {T1: {0, 1, 2}, T2: {0}}, {})
    assert out == {"m": {T1: frozenset({0, 1, 2}), T2: frozenset({0})}}


def test_balanced_when_fewer_members_than_partitions() -> None:
    subs = {f"m{i}": {T1} for i in range(3)}
    out = SimpleShareAssignor().assign(subs, {T1: set(range(8))}, {})
    assert sorted(loads(out).values()) == [2, 3, 3]
    assert set(owners(out).values()) == {1}


def test_more_members_than_partitions_share() -> None:
    subs = {f"m{i}": {T1} for i in range(5)}
    out = SimpleShareAssignor().assign(subs, {T1: {0, 1}}, {})
    # everybody consumes; as Kafka's desiredSharing, each partition is shared by ceil(5/2) = 3 members
    assert sorted(loads(out).values()) == [1, 1, 1, 1, 2]
    assert sorted(owners(out).values()) == [3, 3]


def test_no_partitions_gives_empty_assignments() -> None:
    out = SimpleShareAssignor().assign({"a": {T1}, "b": set()}, {}, {})
    assert out == {"a": {}, "b": {}}


def test_heterogeneous_subscriptions_only_get_subscribed_topics() -> None:
    subs = {"a": {T1}, "b": {T2}, "c": {T1, T2}}
    out = SimpleShareAssignor().assign(subs, {T1: {0, 1}, T2: {0, 1}, T3: {0}}, {})
    assert set(out["a"]) <= {T1} and set(out["b"]) <= {T2}
    assert set(owners(out)) == {(T1, 0), (T1, 1), (T2, 0), (T2, 1)}  # T3 has no subscriber


def test_sticky_when_a_member_joins() -> None:
    a = SimpleShareAssignor()
    subs = {"a": {T1}, "b": {T1}}
    first = a.assign(subs, {T1: set(range(6))}, {})
    second = a.assign(subs | {"c": {T1}}, {T1: set(range(6))}, first)
    assert loads(second) == {"a": 2, "b": 2, "c": 2}
    for m in ("a", "b"):  # the old members only lose partitions, they gain none
        assert second[m][T1] <= first[m][T1]


def test_sticky_when_a_member_leaves() -> None:
    a = SimpleShareAssignor()
    subs = {m: {T1} for m in "abc"}
    first = a.assign(subs, {T1: set(range(6))}, {})
    second = a.assign({"a": {T1}, "b": {T1}}, {T1: set(range(6))}, first)
    for m in ("a", "b"):
        assert first[m][T1] <= second[m][T1]


member_ids = st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=0, max_size=12, unique=True)
topic_sizes = st.lists(st.integers(0, 7), min_size=1, max_size=3)


@st.composite
def scenario(draw: st.DrawFn, homogeneous: bool) -> tuple[dict, dict, dict]:
    sizes = draw(topic_sizes)
    topics = [uuid.UUID(int=i + 1) for i in range(len(sizes))]
    partitions = {t: set(range(n)) for t, n in zip(topics, sizes, strict=True)}
    members = draw(member_ids)
    if homogeneous:
        subscribed = set(draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)))
        subs = {m: subscribed for m in members}
    else:
        subs = {m: set(draw(st.lists(st.sampled_from(topics), unique=True))) for m in members}
    # A random previous assignment, possibly naming gone members, topics and partitions.
    current = {m: {t: frozenset(draw(st.sets(st.integers(0, 8), max_size=4))) for t in topics}
               for m in draw(st.lists(st.sampled_from(members + ["gone"]), unique=True))}
    return subs, partitions, current


@settings(max_examples=300, deadline=None)
@given(scenario(homogeneous=False))
def test_every_subscribed_partition_is_assigned(s: tuple[dict, dict, dict]) -> None:
    subs, partitions, current = s
    out = SimpleShareAssignor().assign(subs, partitions, current)
    assert set(out) == set(subs)
    wanted = {(t, p) for t, ps in partitions.items() for p in ps if any(t in ts for ts in subs.values())}
    assert set(owners(out)) == wanted
    for m, a in out.items():
        assert set(a) <= subs[m]  # never a topic the member did not subscribe to
        assert all(ps <= partitions[t] for t, ps in a.items())
        # a member that could consume something does
        assert loads(out)[m] > 0 or not any(partitions[t] for t in subs[m])
    assert out == SimpleShareAssignor().assign(subs, partitions, current)  # deterministic


@settings(max_examples=300, deadline=None)
@given(scenario(homogeneous=True))
def test_homogeneous_balance(s: tuple[dict, dict, dict]) -> None:
    subs, partitions, current = s
    out = SimpleShareAssignor().assign(subs, partitions, current)
    if not subs:
        return
    topics = next(iter(subs.values()))
    num_p = sum(len(partitions[t]) for t in topics)
    counts = loads(out)
    if num_p == 0:
        assert set(counts.values()) == {0}
    elif len(subs) <= num_p:
        assert max(counts.values()) - min(counts.values()) <= 1
        assert set(owners(out).values()) == {1}  # no sharing needed
    else:
        # Kafka's desiredSharing: every partition shared by ceil(M/P) members, each member holding one or two
        sharing = -(-len(subs) // num_p)
        assert set(owners(out).values()) == {sharing}
        assert set(counts.values()) <= {1, 2} and min(counts.values()) == 1
        assert sum(counts.values()) == sharing * num_p
