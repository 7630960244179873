"""Transactional offset commits in the sans-IO group coordinator (KIP-98, KIP-447): pending per producer until
the marker, require_stable, member checks, deletion and expiry, and replay of transactional batches + markers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups.coordinator import OffsetsConfig
from protocol.errors import ErrorCode
from tests.unit.groups.group_helpers import Topics, Waiters, cg_req, join_req, make, sync_req

E = ErrorCode
DAY = 24 * 3600 * 1000


class Log:
    """What `__consumer_offsets` holds, in order: record batches (with their producer) and markers."""

    def __init__(self) -> None:
        self.entries: list[tuple] = []

    def records(self, res, pid: int = -1, epoch: int = -1):
        self.entries += [("record", r.key, r.value, pid, epoch) for r in res.records]
        return res

    def marker(self, gc, pid: int, epoch: int, commit: bool) -> list[str]:
        self.entries.append(("marker", pid, epoch, commit))
        return gc.replay_end_txn(pid, epoch, commit)

    def replay_into(self, gc):
        gc.begin_load(1)
        for entry in self.entries:
            if entry[0] == "record":
                gc.replay(*entry[1:])
            else:
                gc.replay_end_txn(*entry[1:])
        gc.loaded(1)
        return gc


def setup(**kw):
    topics = Topics()
    topics.create("t", 3)
    topics.create("u", 1)
    return make(topics, **kw), topics


def txn_req(group="g", *, pid=7, epoch=0, generation=-1, member="", instance=None, topic="t", partitions=(0,),
            offset=100, metadata=None):
    return {"transactional_id": "tx", "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id_or_member_epoch": generation, "member_id": member, "group_instance_id": instance,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": offset + p, "committed_leader_epoch": 2,
                 "committed_metadata": metadata} for p in partitions]}]}


def txn_commit(gc, log: Log | None = None, now=1000, **kw):
    req = txn_req(**kw)
    res = gc.commit_txn_offsets(req, now)
    if log is not None:
        log.records(res, req["producer_id"], req["producer_epoch"])
    return res


def plain_commit(gc, log: Log | None = None, group="g", topic="t", partition=0, offset=5, now=1000):
    req = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
           "retention_time_ms": -1, "topics": [{"name": topic, "topic_id": None, "partitions": [
               {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                "committed_metadata": ""}]}]}
    res = gc.commit_offsets(req, 8, now)
    if log is not None:
        log.records(res)
    return res


def codes(res) -> list[int]:
    return [p["error_code"] for t in res.response["topics"] for p in t["partitions"]]


def fetched(gc, group="g", topic="t", partitions=(0,), stable=False, version=8):
    out = gc.fetch_offsets(group, [{"name": topic, "partition_indexes": list(partitions)}], version,
                           require_stable=stable)
    return [(p["committed_offset"], p["error_code"]) for p in out["topics"][0]["partitions"]]


def test_pending_offsets_are_invisible_until_the_commit_marker():
    gc, _ = setup()
    log = Log()
    res = txn_commit(gc, log, partitions=(0, 1))
    assert codes(res) == [0, 0] and len(res.records) == 2
    assert "g" in gc.classic.groups  # a simple group, as for a plain commit
    assert fetched(gc, partitions=(0, 1, 2)) == [(-1, 0), (-1, 0), (-1, 0)]
    assert fetched(gc, partitions=(0, 1, 2), stable=True) == [
        (-1, E.UNSTABLE_OFFSET_COMMIT), (-1, E.UNSTABLE_OFFSET_COMMIT), (-1, 0)]
    assert log.marker(gc, 7, 0, True) == ["g"]
    assert fetched(gc, partitions=(0, 1), stable=True) == [(100, 0), (101, 0)]
    assert gc.offsets.pending == {} and gc.offsets.open_transactions == {}


def test_abort_drops_pending_offsets_and_keeps_the_committed_ones():
    gc, _ = setup()
    plain_commit(gc, offset=5)
    txn_commit(gc)
    assert fetched(gc) == [(5, 0)]
    assert fetched(gc, stable=True) == [(-1, E.UNSTABLE_OFFSET_COMMIT)]
    gc.replay_end_txn(7, 0, False)
    assert fetched(gc, stable=True) == [(5, 0)]


def test_log_order_decides_between_plain_and_transactional_commits():
    gc, _ = setup()
    txn_commit(gc, offset=100)          # pending first ...
    plain_commit(gc, offset=5)          # ... a later plain commit of the same partition
    gc.replay_end_txn(7, 0, True)
    assert fetched(gc) == [(5, 0)]       # the later record wins, as in Kafka
    txn_commit(gc, pid=8, offset=200)
    gc.replay_end_txn(8, 0, True)
    assert fetched(gc) == [(200, 0)]


def test_fetch_of_all_offsets_with_require_stable():
    gc, _ = setup()
    plain_commit(gc, partition=0, offset=5)
    plain_commit(gc, partition=1, offset=6)
    txn_commit(gc, partitions=(1, 2))
    every = gc.fetch_offsets("g", None, 8, require_stable=True)
    assert [(p["partition_index"], p["committed_offset"], p["error_code"]) for p in every["topics"][0]["partitions"]] \
        == [(0, 5, 0), (1, -1, E.UNSTABLE_OFFSET_COMMIT)]  # only committed partitions are listed, as Kafka


def test_a_marker_completes_only_the_groups_of_its_partition():
    gc, _ = setup()
    txn_commit(gc, group="a")
    txn_commit(gc, group="b")
    assert gc.replay_end_txn(7, 0, True, owns=lambda g: g == "a") == ["a"]
    assert fetched(gc, "a") == [(100, 0)]
    assert fetched(gc, "b", stable=True) == [(-1, E.UNSTABLE_OFFSET_COMMIT)]
    gc.replay_end_txn(7, 0, False, owns=lambda g: g == "b")
    assert fetched(gc, "b", stable=True) == [(-1, 0)]


def test_marker_and_commit_epoch_checks():
    gc, _ = setup()
    txn_commit(gc, epoch=3)
    assert gc.check_marker(7, 2) == E.INVALID_PRODUCER_EPOCH
    assert gc.check_marker(7, 3) == E.NONE and gc.check_marker(7, 4) == E.NONE
    assert codes(txn_commit(gc, epoch=2)) == [E.INVALID_PRODUCER_EPOCH]
    assert gc.check_marker(99, 0) == E.NONE  # a producer never seen here


def test_metadata_too_large():
    gc, _ = setup()
    assert codes(txn_commit(gc, metadata="x" * 4097)) == [E.OFFSET_METADATA_TOO_LARGE]


def test_classic_member_and_generation_checks():
    gc, _ = setup()
    w = Waiters(gc)
    mid = w.answers[w.join(join_req(), 1000)]["member_id"]
    w.join(join_req(mid), 1000)
    w.tick(1000)
    # CompletingRebalance: the group's state is not enforced for transactional commits.
    assert codes(txn_commit(gc, generation=1, member=mid)) == [0]
    w.sync(sync_req(mid, 1, {mid: b""}), 1000)
    assert codes(txn_commit(gc, generation=1, member=mid)) == [0]
    assert codes(txn_commit(gc, generation=0, member=mid)) == [E.ILLEGAL_GENERATION]
    assert codes(txn_commit(gc, generation=1, member="other")) == [E.UNKNOWN_MEMBER_ID]
    # Without member id and generation (TxnOffsetCommit v0-2) a group with members accepts it.
    assert codes(txn_commit(gc)) == [0]
    # A group that does not exist: ILLEGAL_GENERATION with a generation, else created.
    assert codes(txn_commit(gc, group="absent", generation=2, member="m")) == [E.ILLEGAL_GENERATION]
    assert "absent" not in gc.classic.groups


def test_static_member_is_fenced():
    gc, _ = setup()
    w = Waiters(gc)
    a = w.join(join_req(instance="i1"), 1000)
    w.tick(1000)
    mid = w.answers[a]["member_id"]
    w.sync(sync_req(mid, 1, {mid: b""}, instance="i1"), 1000)
    assert codes(txn_commit(gc, generation=1, member=mid, instance="i1")) == [0]
    assert codes(txn_commit(gc, generation=1, member="old", instance="i1")) == [E.FENCED_INSTANCE_ID]


def test_consumer_group_member_epoch_checks():
    gc, _ = setup()
    res = gc.consumer_group_heartbeat(cg_req("a", 0, topics=["t"]), 1, 1000, client_id="c", client_host="/h")
    epoch = res.response["member_epoch"]
    assert codes(txn_commit(gc, generation=epoch, member="a")) == [0]
    assert codes(txn_commit(gc, generation=epoch + 1, member="a")) == [E.ILLEGAL_GENERATION]  # stale epoch
    assert codes(txn_commit(gc, generation=epoch, member="b")) == [E.UNKNOWN_MEMBER_ID]
    assert codes(txn_commit(gc)) == [E.UNKNOWN_MEMBER_ID]  # the group has members


def test_delete_group_tombstones_pending_offsets():
    gc, _ = setup()
    plain_commit(gc, partition=0)
    txn_commit(gc, partitions=(0, 1))
    res = gc.delete_groups(["g"])
    assert res.response["results"] == {"g": 0}
    keys = [r.key for r in res.records if r.value is None]
    assert len(keys) >= 3  # t-0 and t-1 (one each), and the group
    assert gc.offsets.pending_offsets("g") == {}
    gc.replay_end_txn(7, 0, True)
    assert gc.offsets.group_offsets("g") == {}


def test_offset_delete_tombstones_a_pending_only_partition():
    gc, _ = setup()
    txn_commit(gc, topic="u")
    res = gc.delete_offsets("g", [{"name": "u", "partitions": [{"partition_index": 0}]}])
    assert res.response["error_code"] == 0 and len(res.records) == 1
    assert fetched(gc, topic="u", stable=True) == [(-1, 0)]


def test_offsets_with_pending_transactions_do_not_expire_nor_does_their_group():
    gc, _ = setup(offsets=OffsetsConfig(retention_ms=DAY, retention_check_interval_ms=60_000))
    plain_commit(gc, partition=0, now=1000)
    plain_commit(gc, partition=1, now=1000)
    txn_commit(gc, partitions=(0,), now=1000)
    res = gc.cleanup(1000 + DAY + 1)
    assert len(res.records) == 1  # t-1 expired, t-0 waits for its transaction
    assert "g" in gc.classic.groups
    gc.replay_end_txn(7, 0, False)
    res = gc.cleanup(1000 + 2 * DAY)
    assert "g" not in gc.classic.groups


def test_a_group_with_only_pending_offsets_is_not_removed():
    gc, _ = setup(offsets=OffsetsConfig(retention_ms=DAY, retention_check_interval_ms=60_000))
    txn_commit(gc)
    gc.cleanup(10 * DAY)
    assert "g" in gc.classic.groups
    gc.replay_end_txn(7, 0, True)
    assert fetched(gc) == [(100, 0)]


def test_topic_deletion_tombstones_pending_offsets():
    gc, _ = setup()
    txn_commit(gc, topic="u")
    res = gc.topic_deleted("u")
    assert len(res.records) == 1
    gc.replay_end_txn(7, 0, True)
    assert gc.offsets.group_offsets("g") == {}


def test_replay_of_transactional_batches_and_markers_is_the_served_state():
    gc, topics = setup()
    log = Log()
    plain_commit(gc, log, offset=1)
    txn_commit(gc, log, pid=1, partitions=(0, 1), offset=10)
    txn_commit(gc, log, pid=2, partitions=(2,), offset=20)
    log.marker(gc, 1, 0, True)
    txn_commit(gc, log, pid=3, partitions=(0,), offset=30)  # left pending
    log.records(gc.delete_offsets("g", [{"name": "u", "partitions": [{"partition_index": 0}]}]))
    log.marker(gc, 2, 0, False)
    replayed = log.replay_into(make(topics))
    assert replayed.snapshot() == gc.snapshot()
    assert fetched(replayed, partitions=(0, 1, 2), stable=True) == [
        (-1, E.UNSTABLE_OFFSET_COMMIT), (11, 0), (-1, 0)]


ops = st.lists(st.one_of(
    st.tuples(st.just("plain"), st.integers(0, 2), st.integers(0, 1000)),
    st.tuples(st.just("txn"), st.integers(1, 3), st.integers(0, 2), st.integers(0, 1000)),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 2)),
), max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_served_state_equals_replay_and_the_model(operations):
    gc, topics = setup()
    log = Log()
    committed: dict[int, int] = {}
    pending: dict[int, dict[int, int]] = {}  # pid -> partition -> offset
    order: dict[int, int] = {}  # partition -> position of the record now committed
    pending_pos: dict[int, dict[int, int]] = {}
    for position, op in enumerate(operations, 1):
        if op[0] == "plain":
            _, p, off = op
            plain_commit(gc, log, partition=p, offset=off)
            committed[p], order[p] = off, position
        elif op[0] == "txn":
            _, pid, p, off = op
            txn_commit(gc, log, pid=pid, partitions=(p,), offset=off - p)
            pending.setdefault(pid, {})[p] = off
            pending_pos.setdefault(pid, {})[p] = position
        elif op[0] == "end":
            _, pid, commit = op
            log.marker(gc, pid, 0, commit)
            for p, off in pending.pop(pid, {}).items():
                pos = pending_pos[pid][p]
                if commit and pos > order.get(p, -1):
                    committed[p], order[p] = off, pos
            pending_pos.pop(pid, None)
        else:
            _, p = op
            log.records(gc.delete_offsets("g", [{"name": "t", "partitions": [{"partition_index": p}]}]))
            committed.pop(p, None)
            order.pop(p, None)
            for pid in pending:
                pending[pid].pop(p, None)
                pending_pos[pid].pop(p, None)
        if "g" in gc.classic.groups:
            got = fetched(gc, partitions=(0, 1, 2))
            assert got == [(committed.get(p, -1), 0) for p in range(3)]
            stable = fetched(gc, partitions=(0, 1, 2), stable=True)
            unstable = {p for offs in pending.values() for p in offs}
            assert [code == E.UNSTABLE_OFFSET_COMMIT for _, code in stable] == [p in unstable for p in range(3)]
    assert log.replay_into(make(topics)).snapshot() == gc.snapshot()
