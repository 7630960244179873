"""Transactional offset commits over TCP (KIP-98, KIP-447): raw TxnOffsetCommit after InitProducerId and
AddOffsetsToTxn, OffsetFetch require_stable (UNSTABLE_OFFSET_COMMIT until the COMMIT marker is written to
`__consumer_offsets`), abort, member/generation checks, restarts (SIGTERM and kill -9) with pending and completed
transactional offsets, and a confluent-kafka transactional producer committing only offsets.

Only the `__consumer_offsets` side of the markers exists here (data-partition markers belong to the partition
side), so every transaction below has offsets and no produced records.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.errors import ErrorCode
from tests.helpers.confluent_clients import create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import join
from tests.helpers.txn_clients import add_offsets, end_txn, init_producer
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

OFFSET_COMMIT, OFFSET_FETCH, SYNC, TXN_OFFSET_COMMIT = 8, 9, 14, 28
E = ErrorCode
TOPIC = "txo"


@pytest.fixture(scope="module")
def txo_broker(broker_module):
    create_topic(broker_module.bootstrap, TOPIC, 3)
    return broker_module


def txn_commit(c: RawClient, tid: str, pid: int, epoch: int, group: str, offsets: dict[int, int], *, version=3,
               topic=TOPIC, generation=-1, member="", instance=None) -> dict[int, int]:
    r = c.call(TXN_OFFSET_COMMIT, version, {
        "transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
        "generation_id_or_member_epoch": generation, "member_id": member, "group_instance_id": instance,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "committed_metadata": "m"}
            for p, o in offsets.items()]}]})
    return {p.partition_index: p.error_code for t in r.topics for p in t.partitions}


def fetch(c: RawClient, group: str, partitions=(0, 1, 2), *, stable: bool, version: int = 8):
    """[(offset, error)] per partition."""
    topics = [{"name": TOPIC, "partition_indexes": list(partitions)}]
    if version < 8:
        r = c.call(OFFSET_FETCH, version, {"group_id": group, "topics": topics, "require_stable": stable})
        assert r.error_code == 0
        parts = r.topics[0].partitions
    else:
        r = c.call(OFFSET_FETCH, version, {"groups": [{"group_id": group, "topics": topics}],
                                           "require_stable": stable})
        assert r.groups[0].error_code == 0
        parts = r.groups[0].topics[0].partitions
    return [(p.committed_offset, p.error_code) for p in parts]


def plain_commit(c: RawClient, group: str, offsets: dict[int, int]) -> None:
    r = c.call(OFFSET_COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                  "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                                      {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                       "committed_metadata": ""} for p, o in offsets.items()]}]})
    assert all(p.error_code == 0 for t in r.topics for p in t.partitions)


def wait_stable(c: RawClient, group: str, expected, partitions=(0, 1, 2)) -> None:
    wait_until(lambda: fetch(c, group, partitions, stable=True) == expected, 60, f"stable offsets of {group}")


UNSTABLE = (-1, E.UNSTABLE_OFFSET_COMMIT)


@pytest.mark.parametrize("version", range(6))
def test_commit_is_pending_until_end_txn_commit(txo_broker, version):
    group, tid = f"txo-commit-{version}", f"tx-commit-{version}"
    with RawClient(txo_broker.port) as c:
        pid, epoch = init_producer(c, tid)
        assert add_offsets(c, tid, pid, epoch, group) == 0
        assert txn_commit(c, tid, pid, epoch, group, {0: 10, 1: 11}, version=version) == {0: 0, 1: 0}
        # KIP-447: per partition, in v7 and in v8+
        assert fetch(c, group, stable=True, version=7) == [UNSTABLE, UNSTABLE, (-1, 0)]
        assert fetch(c, group, stable=True) == [UNSTABLE, UNSTABLE, (-1, 0)]
        assert fetch(c, group, stable=False) == [(-1, 0)] * 3  # the committed (non-pending) offsets
        assert end_txn(c, tid, pid, epoch, commit=True) == 0
        wait_stable(c, group, [(10, 0), (11, 0), (-1, 0)])
        assert fetch(c, group, stable=False, version=7) == [(10, 0), (11, 0), (-1, 0)]


def test_abort_leaves_the_committed_offsets(txo_broker):
    group, tid = "txo-abort", "tx-abort"
    with RawClient(txo_broker.port) as c:
        plain_commit(c, group, {0: 5})
        pid, epoch = init_producer(c, tid)
        assert add_offsets(c, tid, pid, epoch, group) == 0
        assert txn_commit(c, tid, pid, epoch, group, {0: 50, 2: 52}) == {0: 0, 2: 0}
        assert fetch(c, group, stable=True) == [UNSTABLE, (-1, 0), UNSTABLE]
        assert fetch(c, group, stable=False) == [(5, 0), (-1, 0), (-1, 0)]
        assert end_txn(c, tid, pid, epoch, commit=False) == 0
        wait_stable(c, group, [(5, 0), (-1, 0), (-1, 0)])


def test_partition_not_in_the_transaction_and_fenced_producer(txo_broker):
    group, tid = "txo-verify", "tx-verify"
    with RawClient(txo_broker.port) as c:
        pid, epoch = init_producer(c, tid)
        # no AddOffsetsToTxn: the transaction coordinator does not have the offsets partition (KIP-890 verification)
        assert txn_commit(c, tid, pid, epoch, group, {0: 1}, version=3) == {0: E.INVALID_TXN_STATE}
        assert txn_commit(c, tid, pid, epoch, group, {0: 1}, version=4) == {0: E.TRANSACTION_ABORTABLE}
        assert fetch(c, group, stable=True) == [(-1, 0)] * 3
        pid2, epoch2 = init_producer(c, tid)  # a new instance fences the first
        assert (pid2, epoch2) == (pid, epoch + 1)
        assert txn_commit(c, tid, pid, epoch, group, {0: 1}) == {0: E.INVALID_PRODUCER_EPOCH}
        # unknown topic and partition are answered by the handler
        assert txn_commit(c, tid, pid2, epoch2, group, {0: 1}, topic="no-such-topic") == {
            0: E.UNKNOWN_TOPIC_OR_PARTITION}
        assert add_offsets(c, tid, pid2, epoch2, group) == 0
        assert txn_commit(c, tid, pid2, epoch2, group, {0: 7, 9: 1}) == {0: 0, 9: E.UNKNOWN_TOPIC_OR_PARTITION}
        assert end_txn(c, tid, pid2, epoch2, commit=True) == 0
        wait_stable(c, group, [(7, 0), (-1, 0), (-1, 0)])


def test_member_and_generation_checks_from_v3(txo_broker):
    group, tid = "txo-members", "tx-members"
    with RawClient(txo_broker.port) as c:
        first = join(c, 5, group)
        assert first.error_code == E.MEMBER_ID_REQUIRED
        joined = join(c, 5, group, first.member_id)
        assert joined.error_code == 0, joined
        mid, gen = joined.member_id, joined.generation_id
        synced = c.call(SYNC, 5, {"group_id": group, "generation_id": gen, "member_id": mid,
                                  "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                                  "assignments": [{"member_id": mid, "assignment": b""}]})
        assert synced.error_code == 0
        pid, epoch = init_producer(c, tid)
        assert add_offsets(c, tid, pid, epoch, group) == 0
        assert txn_commit(c, tid, pid, epoch, group, {0: 1}, generation=gen + 1, member=mid) == {
            0: E.ILLEGAL_GENERATION}
        assert txn_commit(c, tid, pid, epoch, group, {0: 1}, generation=gen, member="stranger") == {
            0: E.UNKNOWN_MEMBER_ID}
        assert txn_commit(c, tid, pid, epoch, group, {0: 1}, generation=gen, member=mid, instance="nobody") == {
            0: E.UNKNOWN_MEMBER_ID}
        # a group that does not exist, with a generation (its offsets partition is in the transaction)
        assert add_offsets(c, tid, pid, epoch, "txo-absent") == 0
        assert txn_commit(c, tid, pid, epoch, "txo-absent", {0: 1}, generation=3, member="m") == {
            0: E.ILLEGAL_GENERATION}
        assert txn_commit(c, tid, pid, epoch, group, {0: 3}, generation=gen, member=mid) == {0: 0}
        # v0-2 carry no member: accepted for a group with members (transactional commits)
        assert txn_commit(c, tid, pid, epoch, group, {1: 4}, version=2) == {1: 0}
        assert end_txn(c, tid, pid, epoch, commit=True) == 0
        wait_stable(c, group, [(3, 0), (4, 0), (-1, 0)])


def test_pending_and_completed_offsets_survive_sigterm_and_kill9(broker):
    create_topic(broker.bootstrap, TOPIC, 3)
    with RawClient(broker.port) as c:
        done_pid, done_epoch = init_producer(c, "tx-done")
        assert add_offsets(c, "tx-done", done_pid, done_epoch, "g-done") == 0
        assert txn_commit(c, "tx-done", done_pid, done_epoch, "g-done", {0: 100}) == {0: 0}
        assert end_txn(c, "tx-done", done_pid, done_epoch, commit=True) == 0
        wait_stable(c, "g-done", [(100, 0)], partitions=(0,))
        pid, epoch = init_producer(c, "tx-open")
        assert add_offsets(c, "tx-open", pid, epoch, "g-open") == 0
        assert txn_commit(c, "tx-open", pid, epoch, "g-open", {1: 200}) == {1: 0}
    broker.restart()
    with RawClient(broker.port) as c:
        assert fetch(c, "g-done", (0,), stable=True) == [(100, 0)]
        assert fetch(c, "g-open", (1,), stable=True) == [UNSTABLE]
        assert fetch(c, "g-open", (1,), stable=False) == [(-1, 0)]
        assert end_txn(c, "tx-open", pid, epoch, commit=True) == 0
        wait_stable(c, "g-open", [(200, 0)], partitions=(1,))
        # another pending commit over the completed one, then kill -9
        assert add_offsets(c, "tx-open", pid, epoch, "g-open") == 0
        assert txn_commit(c, "tx-open", pid, epoch, "g-open", {1: 300}) == {1: 0}
    broker.kill9()
    broker.start()
    with RawClient(broker.port) as c:
        assert fetch(c, "g-done", (0,), stable=True) == [(100, 0)]
        assert fetch(c, "g-open", (1,), stable=True) == [UNSTABLE]
        assert fetch(c, "g-open", (1,), stable=False) == [(200, 0)]
        assert end_txn(c, "tx-open", pid, epoch, commit=False) == 0
        wait_stable(c, "g-open", [(200, 0)], partitions=(1,))
    broker.restart()
    with RawClient(broker.port) as c:
        assert fetch(c, "g-open", (1,), stable=True) == [(200, 0)]


def test_confluent_producer_sends_offsets_to_the_transaction(txo_broker):
    group = "txo-confluent"
    consumer = Consumer({"bootstrap.servers": txo_broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10_000})
    producer = Producer({"bootstrap.servers": txo_broker.bootstrap, "transactional.id": "confluent-offsets",
                         "transaction.timeout.ms": 60_000})
    try:
        consumer.subscribe([TOPIC])
        wait_until(lambda: (consumer.poll(0.2), bool(consumer.assignment()))[1], 30, "the consumer's assignment")
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 42), TopicPartition(TOPIC, 1, 7)],
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)

        def committed() -> list[int]:
            return [tp.offset for tp in consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)],
                                                           timeout=10)]

        wait_until(lambda: committed() == [42, 7], 60, "the transaction's offsets")
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 99)], consumer.consumer_group_metadata(), 30)
        producer.abort_transaction(30)
        with RawClient(txo_broker.port) as c:
            wait_stable(c, group, [(42, 0), (7, 0)], partitions=(0, 1))
        assert committed() == [42, 7]
    finally:
        consumer.close()
