"""share.isolation.level=read_committed in the share-partition leader (KIP-932; Kafka's SharePartition with
READ_COMMITTED fetches): acquisition stops at the LSO, aborted transactions' batches are archived as ranges and
persisted ARCHIVED, control batches (transaction markers) are acquired with the records around them, as Kafka
acquires them (the consumer skips their records); read_uncommitted acquires every batch. Real PartitionLogs with
transactional batches, markers and a `.txnindex`; the LSO comes from a fake replica manager, except in the wake-up
test, which runs a real ReplicaManager writing markers."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import GroupCommitFlusher
from broker.log.partition_log import PartitionLog
from broker.log.txn_index import AbortedTxn
from broker.replica_manager import ReplicaManager
from broker.share_partition.delayed_fetch import DelayedShareFetch, ShareFetchParams
from broker.share_partition.inflight import ACK_ACCEPT, ACK_RELEASE, ARCHIVED
from protocol.control_records import build_end_txn_marker
from protocol.records import Record, build_batch, iter_batches
from tests.helpers.share_state import MemoryShareState
from tests.helpers.waiting import async_assert_stays
from tests.unit.share_partition.share_fakes import (
    EARLIEST,
    OneTopic,
    broker_config,
    effective_group_configs,
    group_configs,
    make_manager,
    served_bytes,
)

TOPIC_ID = uuid.uuid4()
KEY = ("g", TOPIC_ID, 0)
CONFIG = {"group.share.max.share.sessions": 10, "group.share.partition.max.record.locks": 2000,
          "group.share.delivery.count.limit": 5, "group.share.record.lock.duration.ms": 30_000}


class TxnLog:
    """A partition log written as a transactional producer and the coordinator's markers would write it; the LSO
    is computed here (the first offset of the oldest open transaction, else the log end)."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction

    @property
    def lso(self) -> int:
        return min(self.open.values(), default=self.plog.log_end_offset)

    def plain(self, n: int) -> tuple[int, int]:
        return self._append(build_batch([Record(value=b"p%d" % i) for i in range(n)]))

    def txn(self, pid: int, n: int) -> tuple[int, int]:
        batch = build_batch([Record(value=b"t%d-%d" % (pid, i)) for i in range(n)], producer_id=pid,
                            producer_epoch=0, base_sequence=0, transactional=True)
        first, last = self._append(batch)
        self.open.setdefault(pid, first)
        return first, last

    def end(self, pid: int, commit: bool) -> int:
        lso = self.lso
        marker, _ = self._append(build_end_txn_marker(producer_id=pid, producer_epoch=0, commit=commit,
                                                      coordinator_epoch=0))
        first = self.open.pop(pid)
        if not commit:
            self.plog.append_aborted_txn(AbortedTxn(pid, first, marker, lso))
        return marker

    def _append(self, batch: bytes) -> tuple[int, int]:
        start = self.plog.log_end_offset
        self.plog.append(batch)
        return start, self.plog.log_end_offset - 1


def make(tmp_path: Path, level: str = "read_committed", store: MemoryShareState | None = None,
         locks: int = 2000):
    topics = OneTopic(tmp_path, TOPIC_ID)
    log = TxnLog(topics.logs[0])
    configs = {"share.auto.offset.reset": "earliest", "share.isolation.level": level,
               "share.partition.max.record.locks": str(locks)}

    class TxnLogReplicas(ReplicaManager):
        """The replica manager over `log`, whose LSO the test's transactions decide (they are written straight
        to the log, past the replica manager's transaction state)."""

        def __init__(self) -> None:
            super().__init__(topics, GroupCommitFlusher())
            self.loaded: list = []

        def last_stable_offset(self, topic: str, partition: int) -> int:
            return log.lso

        async def ensure_loaded(self, keys) -> None:
            self.loaded.extend(keys)

    replicas = TxnLogReplicas()
    config = broker_config(CONFIG)
    mgr = make_manager(
        config=config,
        topics=topics,
        persister=store if store is not None else MemoryShareState(),
        # a new mapping per call, as after every change (GroupConfigs)
        group_configs=lambda g: effective_group_configs(config, configs),
        replicas=replicas,
    )
    return mgr, log, configs


def ranges(got) -> list[tuple[int, int]]:
    return [] if got is None else [(r.first_offset, r.last_offset) for r in got.ranges]


def served(got) -> list[int]:
    return [] if got is None else [h.base_offset for _, h in iter_batches(served_bytes(got.records))]


def test_read_committed_stops_at_the_lso_archives_aborted_batches_and_acquires_markers(tmp_path):
    async def run():
        store = MemoryShareState()
        mgr, log, _ = make(tmp_path, store=store)
        assert log.txn(1, 3) == (0, 2)
        assert log.end(1, commit=True) == 3
        assert log.plain(2) == (4, 5)
        assert log.txn(2, 3) == (6, 8)
        assert log.end(2, commit=False) == 9
        assert log.txn(3, 2) == (10, 11)  # interleaved: 3 commits, 4 aborts
        assert log.txn(4, 2) == (12, 13)
        assert log.txn(3, 1) == (14, 14)
        log.end(3, commit=True)  # 15
        log.end(4, commit=False)  # 16
        assert log.txn(5, 2) == (17, 18)  # left open: the LSO
        assert log.plain(1) == (19, 19)
        assert log.lso == 17
        sp = await mgr.partition("g", TOPIC_ID, 0)
        got = mgr.acquire(sp, "m", 500, 1 << 20, min_one=True)
        assert ranges(got) == [(0, 5), (9, 11), (14, 16)]  # markers with the data around them
        assert served(got) == [0, 3, 4, 9, 10, 14, 15, 16]  # aborted batches are never served
        inflight = sp.inflight
        assert inflight.end_offset == 17  # nothing at or past the LSO
        archived = [(p.first, p.last) for p in inflight.iter_pieces() if p.state == ARCHIVED]
        assert archived == [(6, 8), (12, 13)]  # ranges, a whole aborted batch in one
        assert mgr.acquire(sp, "m", 500, 1 << 20, min_one=True) is None
        assert await mgr.acknowledge_records(sp, "m", [(0, 5, [ACK_ACCEPT])]) == 0
        start, batches = store.writes[-1]
        assert start == 9  # the archived aborted batch does not hold SPSO back
        # written with the next state write (as Kafka's archived aborted records), in ranges
        assert [(b.first_offset, b.last_offset, b.delivery_state) for b in batches
                if b.delivery_state == ARCHIVED] == [(12, 13, ARCHIVED)]
        # The open transaction commits: its records become acquirable, with the marker.
        log.end(5, commit=True)  # 20
        got = mgr.acquire(sp, "m", 500, 1 << 20, min_one=True)
        assert ranges(got) == [(17, 20)]
        assert served(got) == [17, 19, 20]
        assert await mgr.acknowledge_records(sp, "m", [(9, 11, [ACK_ACCEPT]), (14, 16, [ACK_ACCEPT]),
                                               (17, 20, [ACK_ACCEPT])]) == 0
        assert log.plain(1) == (21, 21)
        assert ranges(mgr.acquire(sp, "m", 500, 1 << 20, min_one=True)) == [(21, 21)]
        assert store.state[KEY].start_offset == 21

    asyncio.run(run())


def test_read_uncommitted_delivers_open_and_aborted_transactions_and_markers(tmp_path):
    async def run():
        mgr, log, _ = make(tmp_path, level="read_uncommitted")
        log.txn(1, 3)  # 0-2
        log.end(1, commit=False)  # 3
        log.txn(2, 2)  # 4-5, open
        sp = await mgr.partition("g", TOPIC_ID, 0)
        assert ranges(mgr.acquire(sp, "m", 500, 1 << 20, min_one=True)) == [(0, 5)]  # a marker is a batch too
        assert mgr._replicas.loaded == []  # read_uncommitted never asks for the transaction state

    asyncio.run(run())


def test_switching_the_group_to_read_committed_applies_to_the_next_acquisition(tmp_path):
    async def run():
        mgr, log, configs = make(tmp_path, level="read_uncommitted")
        log.plain(2)  # 0-1
        log.txn(1, 2)  # 2-3, open
        sp = await mgr.partition("g", TOPIC_ID, 0)
        assert ranges(mgr.acquire(sp, "m", 1, 1 << 20, min_one=True)) == [(0, 1)]
        configs["share.isolation.level"] = "read_committed"
        assert mgr.acquire(sp, "m", 500, 1 << 20, min_one=True) is None  # 2-3 are past the LSO now
        assert mgr.available_bytes(sp, 1) == 0
        log.end(1, commit=False)  # 4
        log.plain(1)  # 5
        assert mgr.available_bytes(sp, 1) > 0
        got = mgr.acquire(sp, "m", 500, 1 << 20, min_one=True)
        assert ranges(got) == [(4, 5)] and served(got) == [4, 5]  # the abort marker, then the new record

    asyncio.run(run())


def test_a_fetch_of_aborted_data_archives_it_and_acquires_the_marker(tmp_path):
    async def run():
        store = MemoryShareState()
        mgr, log, _ = make(tmp_path, store=store, locks=10)
        for _ in range(5):  # 5 aborted batches of 10: more than the in-flight limit, archived all the same
            log.txn(7, 10)
        log.end(7, commit=False)  # 50
        sp = await mgr.partition("g", TOPIC_ID, 0)
        assert mgr.available_bytes(sp, 1) > 0  # the marker
        got = mgr.acquire(sp, "m", 500, 1 << 20, min_one=True)
        assert ranges(got) == [(50, 50)] and served(got) == [50]
        assert (sp.inflight.start_offset, sp.inflight.end_offset) == (50, 51)
        assert await mgr.acknowledge_records(sp, "m", [(50, 50, [ACK_ACCEPT])]) == 0
        assert store.state[KEY].start_offset == 51

    asyncio.run(run())


def test_released_records_come_back_and_aborted_ones_never_do(tmp_path):
    async def run():
        mgr, log, _ = make(tmp_path)
        log.txn(1, 2)  # 0-1
        log.txn(2, 2)  # 2-3
        log.end(2, commit=False)  # 4
        log.end(1, commit=True)  # 5
        sp = await mgr.partition("g", TOPIC_ID, 0)
        assert ranges(mgr.acquire(sp, "m", 500, 1 << 20, min_one=True)) == [(0, 1), (4, 5)]  # 2-3 aborted
        assert await mgr.acknowledge_records(sp, "m", [(0, 1, [ACK_RELEASE]), (4, 5, [ACK_ACCEPT])]) == 0
        got = mgr.acquire(sp, "n", 500, 1 << 20, min_one=True)
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.ranges] == [(0, 1, 2)]
        assert served(got) == [0]

    asyncio.run(run())


def test_record_limit_mode_cuts_a_committed_batch_and_skips_aborted_ones(tmp_path):
    async def run():
        mgr, log, _ = make(tmp_path)
        log.txn(2, 3)  # 0-2 aborted
        log.txn(1, 4)  # 3-6 committed
        log.end(2, commit=False)  # 7
        log.end(1, commit=True)  # 8
        sp = await mgr.partition("g", TOPIC_ID, 0)
        got = mgr.acquire(sp, "m", 2, 1 << 20, min_one=True, strict=True)
        assert ranges(got) == [(3, 4)] and served(got) == [3]
        assert sp.inflight.start_offset == 3

    asyncio.run(run())


# --- property: the leader against a per-record reference -------------------------------------------------------

# A step writes one of: a plain batch, a transactional batch of producer p, or ends p's transaction.
_steps = st.lists(st.one_of(
    st.tuples(st.just("plain"), st.integers(1, 4)),
    st.tuples(st.just("txn"), st.integers(1, 3), st.integers(1, 4)),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
), max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_steps, max_records=st.integers(1, 12))
def test_acquired_offsets_are_exactly_the_committed_records_below_the_lso(tmp_path_factory, steps, max_records):
    """Per record: a plain record is delivered; a transactional record is delivered iff its transaction
    committed (and ended); markers are acquired too (Kafka acquires them, the consumer skips their records).
    Acquiring and accepting until nothing is left must acquire exactly those offsets, each once, and every
    other offset below the LSO must end up archived."""
    async def run():
        mgr, log, _ = make(tmp_path_factory.mktemp("p"))
        fate: dict[int, str] = {}  # offset -> "deliver" | "skip" | ("txn", pid)
        pending: dict[int, list[int]] = {}  # producer -> offsets of its open transaction
        for step in steps:
            if step[0] == "plain":
                a, b = log.plain(step[1])
                fate.update((o, "deliver") for o in range(a, b + 1))
            elif step[0] == "txn":
                a, b = log.txn(step[1], step[2])
                pending.setdefault(step[1], []).extend(range(a, b + 1))
            elif step[1] in pending:
                marker = log.end(step[1], commit=step[2])
                fate.update((o, "deliver" if step[2] else "skip") for o in pending.pop(step[1]))
                fate[marker] = "deliver"
        lso = log.lso
        expected = {o for o, f in fate.items() if f == "deliver" and o < lso}
        sp = await mgr.partition("g", TOPIC_ID, 0)
        got: list[int] = []
        while (acq := mgr.acquire(sp, "m", max_records, 1 << 20, min_one=True)) is not None:
            for r in acq.ranges:
                got.extend(range(r.first_offset, r.last_offset + 1))
            assert {h.base_offset for _, h in iter_batches(served_bytes(acq.records))} <= {
                o for o in fate if fate[o] == "deliver"}
            assert await mgr.acknowledge_records(sp, "m", [(r.first_offset, r.last_offset, [ACK_ACCEPT])
                                                   for r in acq.ranges]) == 0
        assert len(got) == len(set(got))
        assert set(got) == expected
        assert sp.inflight.end_offset == lso and sp.inflight.start_offset == lso

    asyncio.run(run())


# --- wake-up: a parked read_committed share fetch wakes when a marker moves the LSO --------------------------

def test_a_parked_read_committed_share_fetch_wakes_when_the_transaction_commits(tmp_path):
    from broker.cluster.journal import MetadataJournal
    from broker.cluster.manager import TopicManager
    from broker.config import BrokerConfig
    from broker.log import GroupCommitFlusher, LogManager
    from broker.log.log_manager import METADATA_LOG_DIR
    from broker.replica_manager import ReplicaManager
    from broker.txn.results import TxnMarker

    async def run():
        data = tmp_path / "data"
        config = BrokerConfig({"log.dirs": str(data)})
        logs = LogManager(data, config.log_config({}))
        logs.start()
        journal = PartitionLog(data / METADATA_LOG_DIR, strict_recovery=True)
        topics = TopicManager(config, logs, MetadataJournal(journal), 1)
        topics.load()
        replicas = ReplicaManager(topics, GroupCommitFlusher())
        await topics.create_topic("t", num_partitions=1, replication_factor=1, assignments=[], configs={},
                                  validate_only=False)
        info = topics.registry.get("t")
        mgr = make_manager(config=broker_config(CONFIG), topics=topics,
                           persister=MemoryShareState(), replicas=replicas,
                           group_configs=group_configs(broker_config(CONFIG), {
                               **EARLIEST, "share.isolation.level": "read_committed"}))
        try:
            batch = build_batch([Record(value=b"x")] * 3, producer_id=9, producer_epoch=0, base_sequence=0,
                                transactional=True)
            result, _ = replicas.append(info, 0, batch)
            assert result.error == 0, result
            assert replicas.last_stable_offset("t", 0) == 0
            fetch = DelayedShareFetch(mgr, "g", "m", ShareFetchParams(max_wait_ms=20_000, min_bytes=1,
                                                                      max_bytes=1 << 20, max_records=100))
            loop = asyncio.get_running_loop()
            started = loop.time()
            task = asyncio.ensure_future(fetch.run([(info.topic_id, 0)]))
            # parked: nothing committed below the LSO
            await async_assert_stays(lambda: not task.done(), 0.2, "the fetch parked")
            codes = await replicas.write_txn_markers([TxnMarker("tx", "t", 0, 9, 0, True, 0, 1)])
            assert codes == {("t", 0): 0}
            results = await asyncio.wait_for(task, 5)
            assert loop.time() - started < 5  # woken by the marker, not by MaxWaitMs
            got = results[(info.topic_id, 0)].acquired
            assert ranges(got) == [(0, 3)] and served(got) == [0, 3]  # the commit marker with its records
        finally:
            logs.close()
            journal.close()

    asyncio.run(run())


# --- ShareInFlight.acquire with archived ranges (sans-IO) ----------------------------------------------------

def test_inflight_archived_ranges_are_skipped_not_counted_and_persisted():
    from broker.share_partition.inflight import ShareInFlight

    sp = ShareInFlight(0)
    # batches 0-1, 5-6, 9-10; archived 2-4 (an aborted batch) and 7-8 (a marker and an aborted batch), 11-11
    got = sp.acquire("m", [(0, 1), (5, 6), (9, 10)], 4, 0, archived=[(2, 4), (7, 8), (11, 11)])
    # 4 records: up to the end of the batch holding the 4th acquired one; archived offsets do not count
    assert [(r.first_offset, r.last_offset) for r in got] == [(0, 1), (5, 6)]
    assert sp.end_offset == 7  # the archived range after the last batch taken waits for the next acquisition
    delta = sp.take_dirty()
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in delta.state_batches] == [
        (2, 4, ARCHIVED, 0)]
    got = sp.acquire("m", [(9, 10)], 10, 0, archived=[(7, 8), (11, 11)])
    assert [(r.first_offset, r.last_offset) for r in got] == [(9, 10)]
    assert sp.end_offset == 12 and sp.archived_count == 3 + 2 + 1
    assert sp.acknowledge("m", [(0, 1, [ACK_ACCEPT]), (5, 6, [ACK_ACCEPT]), (9, 10, [ACK_ACCEPT])], 0) == [0, 0, 0]
    assert (sp.start_offset, sp.piece_count) == (12, 0)


def test_inflight_archived_only_at_the_head_moves_the_start_offset():
    from broker.share_partition.inflight import ShareInFlight

    sp = ShareInFlight(0)
    assert sp.acquire("m", [], 10, 0, archived=[(0, 3)]) == []
    assert (sp.start_offset, sp.end_offset, sp.piece_count) == (4, 4, 0)
    assert sp.take_dirty().start_offset == 4
