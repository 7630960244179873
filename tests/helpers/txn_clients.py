"""Helpers for transaction acceptance tests: read a topic to its end under an isolation level with a real client,
and look at the coordinator and the partitions with raw requests (DescribeTransactions, ListTransactions,
DescribeProducers, ListOffsets)."""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka import AIOKafkaProducer

from tests.helpers.confluent_clients import read_partitions
from tests.helpers.raw_client import RawClient

LIST_OFFSETS, INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, WRITE_MARKERS = 2, 22, 24, 25, 26, 27
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66


def read_to_end(bootstrap: str, topic: str, partitions: int, *, committed: bool, timeout: float = 30.0) -> list[bytes]:
    """Every value a confluent consumer sees from the beginning to the end of each partition (the LSO under
    read_committed, the high watermark otherwise), in partition then offset order."""
    got = read_partitions(bootstrap, topic, partitions, committed=committed, timeout=timeout)
    return [v for p in range(partitions) for _, v in sorted(got[p])]


async def aiokafka_commit_abort_commit(bootstrap: str, transactional_id: str, topic: str, partition: int,
                                       committed: Sequence[bytes], aborted: bytes, last: bytes,
                                       **config: object) -> None:
    """An aiokafka transactional producer (TV1 only) on one partition: commits `committed`, aborts `aborted`,
    then commits `last`, with `config` passed to the producer."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, **config)
    await p.start()
    try:
        async with p.transaction():
            for value in committed:
                await p.send_and_wait(topic, value, partition=partition)
        await p.begin_transaction()
        await p.send_and_wait(topic, aborted, partition=partition)
        await p.abort_transaction()
        async with p.transaction():
            await p.send_and_wait(topic, last, partition=partition)
    finally:
        await p.stop()


def describe_txn(c: RawClient, tid: str):
    (state,) = c.call(DESCRIBE_TXNS, 0, {"transactional_ids": [tid]}).transaction_states
    return state


def txn_snapshot(c: RawClient, tid: str) -> tuple:
    """What DescribeTransactions says of an id, comparable before and after a refused request."""
    d = describe_txn(c, tid)
    return (d.error_code, d.transaction_state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms,
            d.transaction_start_time_ms, sorted((t.topic, sorted(t.partitions)) for t in d.topics))


def open_transactions(c: RawClient) -> list[str]:
    r = c.call(LIST_TXNS, 0, {"state_filters": ["Ongoing", "PrepareCommit", "PrepareAbort"],
                              "producer_id_filters": []})
    assert r.error_code == 0
    return sorted(t.transactional_id for t in r.transaction_states)


def ongoing_transactions(c: RawClient) -> list[str]:
    """ListTransactions: the transactional ids in state Ongoing (begun, neither committing nor aborting)."""
    r = c.call(LIST_TXNS, 0, {"state_filters": ["Ongoing"], "producer_id_filters": []})
    assert r.error_code == 0
    return sorted(t.transactional_id for t in r.transaction_states)


def open_producer_transactions(c: RawClient, topic: str, partitions: int) -> dict[int, list[int]]:
    """DescribeProducers: per partition, the producer ids with a transaction open on it."""
    r = c.call(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": list(range(partitions))}]})
    out = {}
    for p in r.topics[0].partitions:
        assert p.error_code == 0, p
        out[p.partition_index] = [a.producer_id for a in p.active_producers if a.current_txn_start_offset >= 0]
    return out


def offsets(c: RawClient, topic: str, partitions: int, *, committed: bool) -> list[int]:
    """ListOffsets latest: the LSO under read_committed, the high watermark otherwise."""
    r = c.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1 if committed else 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "timestamp": -1} for p in range(partitions)]}]})
    parts = sorted(r.topics[0].partitions, key=lambda p: p.partition_index)
    assert all(p.error_code == 0 for p in parts), parts
    return [p.offset for p in parts]


def init_pid(c: RawClient, tid: str, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1, version: int = 4):
    return c.call(INIT_PID, version, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms,
                                      "producer_id": pid, "producer_epoch": epoch})


def init_producer(c: RawClient, tid: str, version: int = 4) -> tuple[int, int]:
    """InitProducerId that must succeed: the producer id and epoch."""
    r = init_pid(c, tid, version=version)
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def add_partitions(c: RawClient, tid: str, pid: int, epoch: int, topics: dict[str, list[int]],
                   version: int = 3) -> dict[tuple[str, int], int]:
    r = c.call(ADD_PARTITIONS, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def add_offsets(c: RawClient, tid: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
    return c.call(ADD_OFFSETS, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                         "group_id": group}).error_code


def end_txn(c: RawClient, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return c.call(END_TXN, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                     "committed": commit}).error_code
