"""Property test of the classic group state machine: random client behaviour and time never breaks its
invariants, and cooperative clients always end in one Stable generation holding all of them."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.groups.classic import records as classic_records
from broker.groups.classic.group import ClassicState
from protocol.errors import ErrorCode
from tests.unit.groups.group_helpers import Waiters, hb_req, join_req, make, sync_req

SESSION, REBALANCE = 10_000, 20_000


@dataclass
class Client:
    name: str
    instance: str | None
    member_id: str = ""
    generation: int = -1
    join: str | None = None  # parked JoinGroup waiter
    sync: str | None = None
    assignment: bytes | None = None


ops = st.lists(st.tuples(st.sampled_from(["join", "sync", "heartbeat", "leave", "advance"]),
                         st.integers(0, 3), st.integers(0, 25_000)), max_size=40)


def check_invariants(gc) -> None:
    for group in gc.classic.groups.values():
        members = group.members
        assert group.awaiting_join_count == sum(1 for m in members.values() if m.awaiting_join)
        assert (group.leader_id in members) if members else group.leader_id is None
        for instance, mid in group.static_members.items():
            assert members[mid].group_instance_id == instance
        if group.state is ClassicState.EMPTY:
            assert not members
        if not members:
            assert group.state in (ClassicState.EMPTY, ClassicState.PREPARING_REBALANCE)
        assert group.pending_sync <= set(members)


def settle(w: Waiters, clients: list[Client], now: int) -> None:
    """Every client that wants to be in the group talks to it as a well-behaved consumer would."""
    gc = w.gc
    for _ in range(40):
        for c in clients:
            if c.join is not None and c.join in w.answers:
                answer = w.answers[c.join]
                c.join = None
                if answer["error_code"] == 0:
                    c.member_id, c.generation = answer["member_id"], answer["generation_id"]
                    assigns = {m["member_id"]: m["member_id"].encode() for m in answer["members"]}
                    c.sync = w.sync(sync_req(c.member_id, c.generation, assigns, instance=c.instance), now)
                elif answer["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
                    c.member_id = answer["member_id"]
                elif answer["error_code"] in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    c.member_id = ""  # as clients do: start over without an id
            if c.sync is not None and c.sync in w.answers:
                answer = w.answers[c.sync]
                c.sync = None
                c.assignment = answer["assignment"] if answer["error_code"] == 0 else None
                if answer["error_code"] != 0:
                    c.generation = -1
            if c.join is None and c.sync is None:
                hb = gc.heartbeat(hb_req(c.member_id, c.generation, instance=c.instance), now).response
                if hb["error_code"] != 0 or c.generation < 0:
                    c.join = w.join(join_req(c.member_id, instance=c.instance, session=SESSION,
                                             rebalance=REBALANCE), now)
        check_invariants(gc)
        now += 500
        w.tick(now)
        group = gc.classic.groups.get("g")
        if group is not None and group.state is ClassicState.STABLE and all(
                c.join is None and c.sync is None and c.member_id in group.members and c.assignment is not None
                and c.generation == group.generation_id for c in clients):
            assert set(group.members) == {c.member_id for c in clients}
            for c in clients:
                assert c.assignment == c.member_id.encode()
            return
    raise AssertionError(f"group did not settle: {gc.snapshot()['classic']} {clients}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.lists(st.booleans(), min_size=4, max_size=4))
def test_random_clients_keep_invariants_and_cooperative_clients_settle(steps, static):
    gc = make(initial_rebalance_delay_ms=0, max_size=10)
    w = Waiters(gc)
    clients = [Client(f"c{i}", f"inst-{i}" if static[i] else None) for i in range(4)]
    now = 1000
    generations = [0]
    for op, i, dt in steps:
        c = clients[i]
        if op == "join":
            c.join = w.join(join_req(c.member_id, instance=c.instance, session=SESSION, rebalance=REBALANCE), now)
        elif op == "sync":
            c.sync = w.sync(sync_req(c.member_id, c.generation, instance=c.instance), now)
        elif op == "heartbeat":
            gc.heartbeat(hb_req(c.member_id, c.generation, instance=c.instance), now)
        elif op == "leave":
            w.run(gc.leave_group("g", [{"member_id": c.member_id, "group_instance_id": c.instance}], now))
        else:
            now += dt
            w.tick(now)
        for cl in clients:  # learn ids/generations from whatever was answered
            if cl.join in w.answers and w.answers[cl.join]["member_id"]:
                cl.member_id = w.answers[cl.join]["member_id"]
                if w.answers[cl.join]["error_code"] == 0:
                    cl.generation = w.answers[cl.join]["generation_id"]
        check_invariants(gc)
        group = gc.classic.groups.get("g")
        if group is not None:
            assert group.generation_id >= generations[-1]
            generations.append(group.generation_id)
    # Answers to requests made during the random phase are stale for the clients from here on.
    for c in clients:
        c.join = c.sync = None
        c.generation = -1
    settle(w, clients, now)
    # The last GroupMetadata record written is the group as it is now.
    group = gc.classic.groups["g"]
    last = [r for r in w.records if r.key == classic_records.tombstone("g").key][-1]
    loaded = classic_records.load("g", last.value, now)
    assert (loaded.generation_id, loaded.leader_id, loaded.protocol_name) == (
        group.generation_id, group.leader_id, group.protocol_name)
    assert {m: x.assignment for m, x in loaded.members.items()} == group.assignments()
