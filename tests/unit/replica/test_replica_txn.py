"""The partition side of transactions in the ReplicaManager, without sockets: transactional produce checks,
KIP-890 verification, markers (durable, indexed), the LSO, read_committed reads, restart recovery of the
transaction state and the aborted-transaction index, DescribeProducers' view."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.replica_manager import ReplicaManager
from broker.txn.results import TxnMarker
from protocol import records as rec
from protocol.errors import ErrorCode
from tests.helpers.replica_node import Clock, Node
from tests.helpers.replica_node import node_with_topic as _node_with_topic

NOW = 1_700_000_000_000


def txn_batch(pid: int, seq: int, *, epoch: int = 0, count: int = 1, transactional: bool = True) -> bytes:
    return rec.build_batch([rec.Record(None, b"v%d" % (seq + i)) for i in range(count)], timestamp=NOW,
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)


def marker(pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0, partition: int = 0,
           topic: str = "t") -> TxnMarker:
    return TxnMarker("tx", topic, partition, pid, epoch, commit, coordinator_epoch, 0)


def produce(node: Node, batch: bytes, verified=None):
    return node.replicas.append(node.topics.registry.get("t"), 0, batch, verified=verified)[0]


def read(node: Node, offset: int, *, committed: bool):
    return node.replicas.read(node.topics.registry.get("t"), 0, offset, 1 << 20, min_one=True,
                              read_committed=committed)


def offsets_in(data: bytes) -> list[tuple[int, int, bool]]:
    return [(h.base_offset, h.last_offset, h.is_control) for h in rec.validate_batches(data, allow_control=True)]


def test_lso_read_committed_and_abort_index(tmp_path: Path) -> None:
    node = _node_with_topic(tmp_path, Clock(NOW))
    try:
        assert produce(node, txn_batch(7, 0, count=2)).base_offset == 0  # txn of 7 starts at 0
        assert produce(node, txn_batch(8, 0, transactional=False)).base_offset == 2  # plain idempotent batch
        assert node.replicas.last_stable_offset("t", 0) == 0
        committed = read(node, 0, committed=True)
        assert committed.records == b"" and committed.last_stable_offset == 0 and committed.high_watermark == 3
        uncommitted = read(node, 0, committed=False)
        assert offsets_in(uncommitted.records) == [(0, 1, False), (2, 2, False)]
        assert uncommitted.last_stable_offset == 0 and uncommitted.aborted_transactions is None
        # a plain batch from a producer inside a transaction is refused, as Kafka
        assert produce(node, txn_batch(7, 2, transactional=False)).error == ErrorCode.INVALID_TXN_STATE

        codes = asyncio.run(node.replicas.write_txn_markers([marker(7, commit=False)]))
        assert codes == {("t", 0): ErrorCode.NONE}
        assert node.replicas.last_stable_offset("t", 0) == 4  # the marker is at 3
        result = read(node, 0, committed=True)
        assert offsets_in(result.records) == [(0, 1, False), (2, 2, False), (3, 3, True)]
        assert [(t.producer_id, t.first_offset) for t in result.aborted_transactions] == [(7, 0)]
        plog = node.topics.log("t", 0)
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in plog.active.txn_index] == [(7, 0, 3)]
        assert not plog.dirty  # fsynced before write_txn_markers returned (the .txnindex with it)
        # a fetch from the marker still gets it (Kafka: every entry whose marker is at or after the fetch offset)
        assert [t.first_offset for t in read(node, 3, committed=True).aborted_transactions] == [0]

        # a second transaction, committed, with the first one of another producer still open in between
        assert produce(node, txn_batch(7, 2, count=1)).base_offset == 4
        assert produce(node, txn_batch(9, 0)).base_offset == 5
        asyncio.run(node.replicas.write_txn_markers([marker(7, commit=True)]))
        assert node.replicas.last_stable_offset("t", 0) == 5  # 9's transaction is still open
        data = read(node, 4, committed=True).records
        assert offsets_in(data) == [(4, 4, False)]  # cut before 5, never a batch at or past the LSO
        assert read(node, 4, committed=True).aborted_transactions == []  # past the aborted range
    finally:
        node.close()


def test_markers_are_checked(tmp_path: Path) -> None:
    node = _node_with_topic(tmp_path, Clock(NOW))
    try:
        produce(node, txn_batch(7, 0, epoch=3))
        write = node.replicas.write_txn_markers
        assert asyncio.run(write([marker(7, True, epoch=2)])) == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
        assert asyncio.run(write([marker(7, True, epoch=3, coordinator_epoch=5)])) == {("t", 0): ErrorCode.NONE}
        assert asyncio.run(write([marker(7, True, epoch=3, coordinator_epoch=4)])) == {
            ("t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        assert asyncio.run(write([marker(7, True, partition=9)])) == {("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # a zombie's data batch with the old epoch is fenced
        assert produce(node, txn_batch(7, 0, epoch=2)).error == ErrorCode.INVALID_PRODUCER_EPOCH
        described = {d.producer_id: d for d in node.replicas.describe_producers("t", 0)}
        assert described[7].producer_epoch == 3 and described[7].coordinator_epoch == 5
        assert described[7].last_sequence == 0 and described[7].current_txn_start_offset == -1
    finally:
        node.close()


def test_state_and_index_survive_a_restart(tmp_path: Path) -> None:
    clock = Clock(NOW)
    node = _node_with_topic(tmp_path, clock)
    produce(node, txn_batch(7, 0))
    asyncio.run(node.replicas.write_txn_markers([marker(7, commit=False)]))
    produce(node, txn_batch(8, 0, count=3))  # open at 2
    node.topics.log("t", 0).flush()
    txnindex = node.topics.log("t", 0).active.txn_index.path
    node.close()
    Path(txnindex).unlink()  # lost: rebuilt from the log's markers by the scan

    restarted = Node(tmp_path / "data", clock)
    try:
        asyncio.run(restarted.replicas.ensure_loaded([("t", 0)]))
        assert restarted.replicas.last_stable_offset("t", 0) == 2
        described = {d.producer_id: d for d in restarted.replicas.describe_producers("t", 0)}
        assert described[8].current_txn_start_offset == 2 and described[8].last_sequence == 2
        result = read(restarted, 0, committed=True)
        assert offsets_in(result.records) == [(0, 0, False), (1, 1, True)]
        assert [(t.producer_id, t.first_offset) for t in result.aborted_transactions] == [(7, 0)]
        assert Path(txnindex).exists()
    finally:
        restarted.close()


class Verifier:
    def __init__(self, errors: dict) -> None:
        self.errors = errors
        self.calls: list = []

    async def verify_partitions(self, transactional_id, producer_id, producer_epoch, partitions):
        self.calls.append((transactional_id, producer_id, producer_epoch, list(partitions)))
        return {p: self.errors.get(p, ErrorCode.NONE) for p in partitions}


def test_verification_of_a_transaction_start(tmp_path: Path) -> None:
    node = _node_with_topic(tmp_path, Clock(NOW))
    try:
        replicas: ReplicaManager = node.replicas
        verifier = Verifier({("t", 0): ErrorCode.INVALID_TXN_STATE})
        replicas.set_txn_verifier(verifier)
        batch = txn_batch(7, 0)
        header = rec.read_header(batch)
        # not verified at all: refused
        assert produce(node, batch).error == ErrorCode.INVALID_TXN_STATE
        verified = asyncio.run(replicas.verify_transactional("tx", [(("t", 0), header)]))
        refused = produce(node, batch, verified)
        assert refused.error == ErrorCode.INVALID_TXN_STATE and "not added" in refused.error_message
        verifier.errors = {}
        verified = asyncio.run(replicas.verify_transactional("tx", [(("t", 0), header)]))
        assert produce(node, batch, verified).error == ErrorCode.NONE
        # the transaction is ongoing here: the next batch needs no verification
        assert asyncio.run(replicas.verify_transactional("tx", [(("t", 0), rec.read_header(txn_batch(7, 1)))])) == {}
        assert produce(node, txn_batch(7, 1)).error == ErrorCode.NONE
        # a verification raced by the marker ending the transaction no longer holds
        asyncio.run(replicas.write_txn_markers([marker(7, commit=True)]))
        verified = asyncio.run(replicas.verify_transactional("tx", [(("t", 0), rec.read_header(txn_batch(7, 2)))]))
        asyncio.run(replicas.write_txn_markers([marker(7, commit=True)]))  # a retried marker
        assert produce(node, txn_batch(7, 2), verified).error == ErrorCode.INVALID_TXN_STATE
        # retriable coordinator errors become NOT_ENOUGH_REPLICAS, fencing INVALID_PRODUCER_EPOCH
        for code, expected in ((ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_ENOUGH_REPLICAS),
                               (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)):
            verifier.errors = {("t", 0): code}
            verified = asyncio.run(replicas.verify_transactional("tx", [(("t", 0), rec.read_header(txn_batch(7, 2)))]))
            assert produce(node, txn_batch(7, 2), verified).error == expected
    finally:
        node.close()


class AddingVerifier(Verifier):
    """Also takes `add` (TV2: Produce v12 asks the coordinator to add the partitions)."""

    async def verify_partitions(self, transactional_id, producer_id, producer_epoch, partitions, *, add=False):
        self.calls.append((transactional_id, producer_id, producer_epoch, list(partitions), add))
        return {p: self.errors.get(p, ErrorCode.NONE) for p in partitions}


def test_produce_v12_adds_the_partition_and_knows_transaction_abortable(tmp_path: Path) -> None:
    node = _node_with_topic(tmp_path, Clock(NOW))
    try:
        replicas: ReplicaManager = node.replicas
        verifier = AddingVerifier({})
        replicas.set_txn_verifier(verifier)
        header = rec.read_header(txn_batch(7, 0))
        verified = asyncio.run(replicas.verify_transactional("tx", [(("t", 0), header)], add=True, abortable=True))
        assert verifier.calls == [("tx", 7, header.producer_epoch, [("t", 0)], True)]
        assert produce(node, txn_batch(7, 0), verified).error == ErrorCode.NONE
        # TRANSACTION_ABORTABLE as is from v11 (Kafka's genericErrorSupported), INVALID_TXN_STATE before
        asyncio.run(replicas.write_txn_markers([marker(7, commit=True)]))
        verifier.errors = {("t", 0): ErrorCode.TRANSACTION_ABORTABLE}
        for abortable, expected in ((True, ErrorCode.TRANSACTION_ABORTABLE), (False, ErrorCode.INVALID_TXN_STATE)):
            verified = asyncio.run(replicas.verify_transactional("tx", [(("t", 0), rec.read_header(txn_batch(7, 1)))],
                                                                 add=True, abortable=abortable))
            assert produce(node, txn_batch(7, 1), verified).error == expected
    finally:
        node.close()


def test_a_coordinators_transactional_batch_and_marker_move_the_lso(tmp_path: Path) -> None:
    """A group coordinator's transactional offset commit (an internal append, no sequence) opens a transaction on
    its partition and its marker ends it, as for a producer: the LSO and the aborted index follow them."""
    node = _node_with_topic(tmp_path, Clock(NOW))
    try:
        info = node.topics.registry.get("t")
        assert node.replicas.last_stable_offset("t", 0) == 0  # the partition's state is loaded (empty)
        batch = txn_batch(9, -1, count=2)
        result, _plog = node.replicas.append(info, 0, batch, allow_internal=True)
        assert result.error == ErrorCode.NONE and result.base_offset == 0
        assert node.replicas.last_stable_offset("t", 0) == 0  # pending: the LSO stays at the batch
        code, plog = node.replicas.append_marker(marker(9, commit=False))
        assert code == ErrorCode.NONE and plog is not None
        assert node.replicas.last_stable_offset("t", 0) == 3  # marker at 2
        assert [(t.producer_id, t.first_offset) for t in read(node, 0, committed=True).aborted_transactions] == [
            (9, 0)]
    finally:
        node.close()


def test_a_batch_of_another_epoch_is_verified_even_with_a_transaction_open(tmp_path: Path) -> None:
    """Kafka's hasOngoingTransaction(producer id, epoch): only a batch of the open transaction's own epoch skips
    verification, so an epoch the coordinator never gave is fenced by it instead of being appended (which would
    also refuse the transaction's TV2 marker and leave it hanging)."""
    node = _node_with_topic(tmp_path, Clock(NOW))
    try:
        replicas: ReplicaManager = node.replicas
        verifier = Verifier({})
        replicas.set_txn_verifier(verifier)
        first = txn_batch(7, 0, epoch=1)
        verified = asyncio.run(replicas.verify_transactional("tx", [(("t", 0), rec.read_header(first))]))
        assert produce(node, first, verified).error == ErrorCode.NONE
        same_epoch = rec.read_header(txn_batch(7, 1, epoch=1))
        assert asyncio.run(replicas.verify_transactional("tx", [(("t", 0), same_epoch)])) == {}
        newer = txn_batch(7, 0, epoch=2)
        assert produce(node, newer).error == ErrorCode.INVALID_TXN_STATE  # not verified: not appended
        verifier.errors = {("t", 0): ErrorCode.PRODUCER_FENCED}
        verified = asyncio.run(replicas.verify_transactional("tx", [(("t", 0), rec.read_header(newer))]))
        assert verifier.calls[-1] == ("tx", 7, 2, [("t", 0)])
        assert produce(node, newer, verified).error == ErrorCode.INVALID_PRODUCER_EPOCH
        assert produce(node, txn_batch(7, 1, epoch=1)).error == ErrorCode.NONE  # the open transaction goes on
    finally:
        node.close()


def test_describe_producers_after_a_marker(tmp_path: Path) -> None:
    """As Kafka's one producer entry: a marker is the producer's last write (its timestamp), and a TV2 marker of a
    newer epoch drops the sequences (last sequence -1)."""
    clock = Clock(NOW)
    node = _node_with_topic(tmp_path, clock)
    try:
        produce(node, txn_batch(7, 0, count=2))
        produce(node, txn_batch(8, 0, epoch=4))
        clock.now_ms = NOW + 5_000
        asyncio.run(node.replicas.write_txn_markers([marker(7, commit=True), marker(8, commit=False, epoch=5)]))
        described = {d.producer_id: d for d in node.replicas.describe_producers("t", 0)}
        assert (described[7].producer_epoch, described[7].last_sequence, described[7].current_txn_start_offset) \
            == (0, 1, -1)
        assert (described[8].producer_epoch, described[8].last_sequence) == (5, -1)
        assert described[7].last_timestamp == described[8].last_timestamp != NOW  # the markers' time
        produce(node, txn_batch(8, 0, epoch=5))  # the next transaction: sequences start again
        described = {d.producer_id: d for d in node.replicas.describe_producers("t", 0)}
        assert (described[8].last_sequence, described[8].last_timestamp) == (0, NOW)
    finally:
        node.close()
