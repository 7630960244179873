"""The streams group's sans-IO parts: topology configuration, Java's hash map order, the sticky assignor, the
reconciliation and the records (a manager rebuilt from its records is the same)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups.streams import records as rec
from broker.groups.streams.assignor import MemberSpec, assign
from broker.groups.streams.group import AssignedTasks, MemberState, StreamsMember, TasksTuple
from broker.groups.streams.manager import StreamsGroupManager, StreamsSettings
from broker.groups.streams.reconcile import Reconciler
from broker.groups.streams.topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    StreamsTopology,
    TopologyInvalid,
    configure,
)
from protocol.java_hash import java_compute_if_absent_order, java_hash_order
from tests.helpers.streams_requests import subtopology, topic_info, topology_of


def _topology(*subs: dict) -> StreamsTopology:
    return StreamsTopology.from_wire(topology_of(*subs))


def test_missing_internal_topics_are_listed_in_javas_hash_map_order():
    # Kafka 4.4's answer for these names (taken from a Kafka 4.4 broker): HashMap order, the first three shown.
    names = ["wordcount-counts-repartition", "wordcount-counts-changelog", "wordcount-totals-changelog",
             "wordcount-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"]
    configured = configure(_topology(subtopology("0", sources=["input"], sinks=[names[0]]),
                                     subtopology("1", repartition_sources=[names[0]], changelogs=names[1:])),
                           {"input": 3}.get)
    assert configured.error is not None and configured.error.status == MISSING_INTERNAL_TOPICS
    assert configured.error.message == (
        "Internal topics are missing: wordcount-counts-repartition, wordcount-totals-changelog, "
        "wordcount-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog and 1 additional topics")
    assert java_hash_order(["a", "b", "c"]) == ["a", "b", "c"]


def test_a_hash_map_filled_by_compute_if_absent():
    """Orders a JVM (17) printed for these keys: computeIfAbsent links a new key at the head of its bucket and
    doubles the table only at the next call, where put appends and doubles at once (the streams assignor's
    processIdToState is filled by computeIfAbsent into `new HashMap<>(members)`)."""
    two = ["process-10cff1711e3aef8a", "process-30eab1ee593bf9cb"]
    assert java_compute_if_absent_order(two, initial_capacity=2) == two
    assert java_hash_order(two, initial_capacity=2) == two[::-1]
    three = ["process-4289de7d4d637f98", "process-f9e0bf06e24292ca", "process-0d87498913e143c7"]
    assert java_compute_if_absent_order(three, initial_capacity=4) == [three[1], three[2], three[0]]
    assert java_compute_if_absent_order([three[0], three[0], three[1]], initial_capacity=4) == three[:2][::-1]


def test_partition_counts_of_internal_topics():
    """Repartition topics take the largest partition count of the subtopology writing them; changelogs the largest
    of their subtopology's sources."""
    topology = _topology(subtopology("0", sources=["small", "big"], sinks=["rep"]),
                         subtopology("1", repartition_sources=["rep"], changelogs=["store"]))
    configured = configure(topology, {"small": 2, "big": 5}.get)
    assert {t.name: t.partitions for t in configured.to_create} == {"rep": 5, "store": 5}
    assert configured.subtopologies is not None
    assert [configured.subtopologies[s].number_of_tasks for s in ("0", "1")] == [5, 5]
    ready = configure(topology, {"small": 2, "big": 5, "rep": 5, "store": 5}.get)
    assert ready.ready and not ready.to_create


def test_topic_configuration_errors():
    missing = configure(_topology(subtopology("0", sources=["z", "a", "m", "b"])), {}.get)
    assert missing.error is not None and missing.error.status == MISSING_SOURCE_TOPICS
    assert missing.error.message == "Source topics a, b, m and 1 additional topics are missing."
    copartitioned = configure(_topology(subtopology("0", sources=["x", "y"], copartition_groups=[
        {"source_topics": [0, 1], "source_topic_regex": [], "repartition_source_topics": []}])),
        {"x": 2, "y": 3}.get)
    assert copartitioned.error is not None and copartitioned.error.status == INCORRECTLY_PARTITIONED_TOPICS
    assert copartitioned.error.message == "Following topics do not have the same number of partitions: [{x=2, y=3}]"
    wrong_size = configure(_topology(subtopology("0", sources=["x"], changelogs=["store"])), {"x": 2, "store": 4}.get)
    assert wrong_size.error is not None and wrong_size.error.message == (
        "Existing topic store has different number of partitions: expected 2, found 4")
    with pytest.raises(TopologyInvalid, match="never used as a sink topic"):
        configure(_topology(subtopology("0", sources=["x"]), subtopology("1", repartition_sources=["orphan"])),
                  {"x": 1}.get)
    with pytest.raises(TopologyInvalid, match="loops"):
        configure(_topology(subtopology("0", repartition_sources=["a"], sinks=["b"]),
                            subtopology("1", repartition_sources=["b"], sinks=["a"])), {}.get)
    fixed = configure(_topology(subtopology("0", sources=["x"], sinks=["r"]),
                                subtopology("1", repartition_sources=[topic_info("r", partitions=7)])),
                      {"x": 2}.get)
    assert {t.name: t.partitions for t in fixed.to_create} == {"r": 7}


def test_sticky_assignor():
    subs = configure(_topology(subtopology("0", sources=["in"], changelogs=["store"])),
                     {"in": 4, "store": 4}.get).subtopologies
    assert subs is not None
    first = assign([MemberSpec("a", "pa", TasksTuple())], subs, 0)
    assert first["a"].active == {"0": frozenset({0, 1, 2, 3})}
    second = assign([MemberSpec("a", "pa", first["a"]), MemberSpec("b", "pb", TasksTuple())], subs, 1)
    # `a` keeps the tasks it had up to its quota; `b` gets the rest; each holds the other's standby.
    assert second["a"].active == {"0": frozenset({0, 1})} and second["b"].active == {"0": frozenset({2, 3})}
    assert second["a"].standby == {"0": frozenset({2, 3})} and second["b"].standby == {"0": frozenset({0, 1})}


def _stateful(partitions: int) -> dict:
    subs = configure(_topology(subtopology("0", sources=["in"], changelogs=["store"])),
                     {"in": partitions, "store": partitions}.get).subtopologies
    assert subs is not None
    return subs


def test_task_offsets_rank_standby_candidates():
    """Kafka 4.4: a task's standby goes to a member that reports local state of it (task offsets), the highest
    offset first among equally loaded ones, before any member without state; a previous standby before both."""
    subs = _stateful(1)
    owner = TasksTuple({"0": frozenset({0})})
    for ahead in ("b", "c"):
        offsets = {"b": 900 if ahead == "b" else 100, "c": 900 if ahead == "c" else 100}
        members = [MemberSpec("a", "pa", owner), MemberSpec("d", "pd", TasksTuple())] + [
            MemberSpec(m, f"p{m}", TasksTuple(), {("0", 0): offsets[m]}) for m in ("b", "c")]
        out = assign(members, subs, 1)
        assert out["a"].active == {"0": frozenset({0})}
        assert [m for m in out if out[m].standby] == [ahead]
    previous = [MemberSpec("a", "pa", owner), MemberSpec("b", "pb", TasksTuple(), {("0", 0): 900}),
                MemberSpec("c", "pc", TasksTuple(standby={"0": frozenset({0})}), {("0", 0): 1})]
    assert assign(previous, subs, 1)["c"].standby == {"0": frozenset({0})}


def test_task_offsets_decide_where_an_orphaned_active_task_goes():
    subs = _stateful(1)
    for ahead in ("b", "c"):
        members = [MemberSpec(m, f"p{m}", TasksTuple(), {("0", 0): 900 if m == ahead else 100}) for m in ("b", "c")]
        out = assign(members, subs, 0)
        assert out[ahead].active == {"0": frozenset({0})}


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2), st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5)), min_size=1,
                                                      max_size=6),
       st.dictionaries(st.tuples(st.integers(0, 5), st.integers(0, 5)), st.integers(-2, 10**6), max_size=20))
def test_assignments_with_task_offsets_hold_kafkas_invariants(partitions, standbys, layout, reported):
    """Whatever members own and report: every task is active on exactly one member, a process never holds a task
    twice (active and standby, or two standbys), standbys only of stateful tasks and at most as many as asked,
    never a warm-up task (Kafka 4.4's assignor hands out none)."""
    subs = _stateful(partitions)
    members = []
    for i, (process, owned) in enumerate(layout):
        offsets = {("0", p): o for (m, p), o in reported.items() if m == i and p < partitions}
        current = TasksTuple({"0": frozenset({owned})} if owned < partitions else {})
        members.append(MemberSpec(f"m{i}", f"p{process}", current, offsets))
    out = assign(members, subs, standbys)
    process_of = {m.member_id: m.process_id for m in members}
    active = [(p, mid) for mid, t in out.items() for p in t.active.get("0", ())]
    assert sorted(p for p, _ in active) == list(range(partitions))
    for p in range(partitions):
        holders = [process_of[mid] for mid, t in out.items()
                   for kind in (t.active, t.standby) if p in kind.get("0", ())]
        assert len(holders) == len(set(holders)) <= 1 + standbys
    assert all(not t.warmup for t in out.values())


def _owners(members: list[StreamsMember]):
    active = {(s, p): m.process_id for m in members for s, ps in (*m.assigned.active.items(),
                                                                    *m.pending_revocation.active.items()) for p in ps}
    return {"active_owner": lambda s, p: active.get((s, p)), "standby_owners": lambda s, p: set(),
            "warmup_owners": lambda s, p: set()}


def test_reconciliation_revokes_before_another_process_gets_a_task():
    a = StreamsMember("a", member_epoch=2, previous_member_epoch=1, process_id="pa",
                      assigned=AssignedTasks({"0": {0: 2, 1: 2}}))
    b = StreamsMember("b", member_epoch=0, process_id="pb")
    target_a, target_b = TasksTuple({"0": frozenset({0})}), TasksTuple({"0": frozenset({1})})
    # b's task is still owned by a: withheld.
    b1 = Reconciler(b, 3, target_b, owned=TasksTuple(), **_owners([a, b])).build()
    assert (b1.state, b1.member_epoch, b1.assigned.active) == (MemberState.UNRELEASED_TASKS, 3, {})
    # a must revoke task 1 first: its epoch stays behind.
    owned = TasksTuple({"0": frozenset({0, 1})})
    a1 = Reconciler(a, 3, target_a, owned=owned, **_owners([a, b1])).build()
    assert (a1.state, a1.member_epoch) == (MemberState.UNREVOKED_TASKS, 2)
    assert a1.pending_revocation.active == {"0": {1: 2}}
    # Still reporting task 1: nothing changes. Once released, a reaches the target epoch.
    assert Reconciler(a1, 3, target_a, owned=owned, **_owners([a1, b1])).build() == a1
    a2 = Reconciler(a1, 3, target_a, owned=TasksTuple({"0": frozenset({0})}), **_owners([a1, b1])).build()
    assert (a2.state, a2.member_epoch, a2.assigned.active) == (MemberState.STABLE, 3, {"0": {0: 2}})
    b2 = Reconciler(b1, 3, target_b, owned=TasksTuple(), **_owners([a2, b1])).build()
    assert (b2.state, b2.member_epoch, b2.assigned.active) == (MemberState.STABLE, 3, {"0": {1: 3}})


def _manager(topics: dict[str, int]) -> StreamsGroupManager:
    settings = StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=0)
    holder: dict[str, StreamsGroupManager] = {}

    def kind(gid: str) -> str | None:
        return "streams" if gid in holder["m"].groups else None

    holder["m"] = StreamsGroupManager(settings=lambda gid: settings, partition_count=topics.get,
                                      topics_version=lambda: len(topics), group_type_of=kind,
                                      empty_classic=lambda gid: False)
    return holder["m"]


def _join(member: str, topology: dict, process: str) -> dict:
    return {"group_id": "g", "member_id": member, "member_epoch": 0, "rebalance_timeout_ms": 1000,
            "topology": topology, "active_tasks": [], "standby_tasks": [], "warmup_tasks": [],
            "process_id": process, "client_tags": [], "endpoint_information_epoch": 0,
            "user_endpoint": {"host": "h", "port": 1}}


def test_a_group_rebuilt_from_its_records_is_the_same():
    topics = {"in": 2, "store": 2}
    manager = _manager(topics)
    topology = topology_of(subtopology("0", sources=["in"], changelogs=["store"]))
    written = []
    for member, process in (("a", "pa"), ("b", "pb")):
        res = manager.heartbeat(_join(member, topology, process), 1, 1000)
        assert res.response is not None and res.response["error_code"] == 0, res.response
        written += res.records
    a = manager.groups["g"].members["a"]
    res = manager.heartbeat({"group_id": "g", "member_id": "a", "member_epoch": a.member_epoch,
                             "active_tasks": [{"subtopology_id": "0", "partitions": [0, 1]}], "standby_tasks": [],
                             "warmup_tasks": []}, 1, 1001)
    written += res.records
    assert res.response is not None and res.response["error_code"] == 0
    rebuilt = _manager(topics)
    for r in written:
        rebuilt.replay(r.key, r.value)
    before, after = manager.groups["g"], rebuilt.groups["g"]
    for field in ("group_epoch", "metadata_hash", "validated_topology_epoch", "last_assignment_configs",
                  "topology", "members", "assignment_epoch", "target", "active_owner"):
        assert getattr(after, field) == getattr(before, field), field
    assert manager.describe("g") | {"topology": None} == rebuilt.describe("g") | {"topology": None}
    # A refused heartbeat changes nothing and writes nothing.
    refused = manager.heartbeat({"group_id": "g", "member_id": "a", "member_epoch": 99}, 1, 1002)
    assert refused.records == [] and refused.response is not None and refused.response["error_code"] == 110
    assert manager.groups["g"].members == before.members
    assert all(rec.is_streams_record(r.key) for r in written)


def test_an_empty_streams_group_goes_with_its_expired_offsets():
    """The periodic cleanup expires a streams group's offsets (of topics it no longer reads) and then deletes the
    group once it has no member, as Kafka's cleanupGroupMetadata."""
    from uuid import uuid4

    from broker.groups.coordinator import GroupCoordinator

    topic_id = uuid4()
    topics = {"in": (topic_id, 1)}
    settings = StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=0)
    gc = GroupCoordinator(topic_info=topics.get, streams_settings=lambda gid: settings)
    retention = gc.config.offsets.retention_ms
    joined = gc.streams_group_heartbeat(_join("a", topology_of(subtopology("0", sources=["in"])), "p"), 1, 0)
    assert joined.response is not None and joined.response["error_code"] == 0
    epoch = joined.response["member_epoch"]
    committed = gc.commit_offsets({"group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": "a",
                                   "topics": [{"name": "in", "partitions": [{
                                       "partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
                                       "committed_metadata": ""}]}]}, 9, 10)
    assert committed.response is not None
    assert committed.response["topics"][0]["partitions"][0]["error_code"] == 0
    gc.cleanup(10 + retention)
    assert gc.group_type_of("g") == "streams"  # a member: its topics' offsets stay
    left = gc.streams_group_heartbeat({"group_id": "g", "member_id": "a", "member_epoch": -1}, 1, 20)
    assert left.response is not None and left.response["error_code"] == 0
    gc.cleanup(20)
    assert gc.group_type_of("g") == "streams"  # not expired yet
    res = gc.cleanup(10 + retention)
    assert gc.group_type_of("g") is None and res.records


def test_reported_task_offsets_replace_the_last_and_a_duplicate_is_refused():
    manager = _manager({"in": 2})
    topology = topology_of(subtopology("0", sources=["in"]))
    joined = manager.heartbeat(_join("a", topology, "pa"), 1, 1000).response
    assert joined is not None and joined["error_code"] == 0

    def beat(**fields) -> dict:
        body = {"group_id": "g", "member_id": "a", "member_epoch": manager.groups["g"].members["a"].member_epoch,
                "active_tasks": None, "standby_tasks": None, "warmup_tasks": None, **fields}
        res = manager.heartbeat(body, 1, 1001)
        assert res.response is not None
        return {"error": (res.response["error_code"], res.response["error_message"]), "records": len(res.records),
                "described": [(m["task_offsets"], m["task_end_offsets"]) for m in manager.describe("g")["members"]]}

    def offsets(*items: tuple[int, int]) -> list[dict]:
        return [{"subtopology_id": "0", "partition": p, "offset": o} for p, o in items]

    first = beat(task_offsets=offsets((0, 5), (1, 6)), task_end_offsets=offsets((0, 9)))
    assert first["described"] == [(offsets((0, 5), (1, 6)), offsets((0, 9)))]
    assert beat(task_offsets=offsets((1, 7)))["described"] == [(offsets((1, 7)), offsets((0, 9)))]
    refused = beat(task_end_offsets=offsets((1, 1), (1, 2)))
    assert refused["error"] == (42, "Task offsets contain a duplicate entry for subtopology 0 and partition 1.")
    assert refused["records"] == 0 and refused["described"] == [(offsets((1, 7)), offsets((0, 9)))]
