"""Transactions with kafka-python and aiokafka transactional producers (TV1: AddPartitionsToTxn v0-3, EndTxn
v0-3): commit and abort, and read_committed consumers of kafka-python, aiokafka and confluent-kafka that all
see the committed records only, and stop before a transaction left open."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTP
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP

from tests.helpers.confluent_clients import create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.txn_clients import (
    aiokafka_commit_abort_commit,
    describe_txn,
    offsets,
    open_transactions,
    read_to_end,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC, PARTS = "tpy", 2


def kafka_python_transactions(bootstrap: str) -> KafkaProducer:
    """Commit, abort, commit on partition 0; then a transaction left open (returned)."""
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn", acks="all")
    p.init_transactions()
    for values, commit in (([b"kp-c1", b"kp-c2"], True), ([b"kp-a1"], False), ([b"kp-c3"], True)):
        p.begin_transaction()
        for v in values:
            p.send(TOPIC, v, partition=0)
        p.flush(30)
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.begin_transaction()
    p.send(TOPIC, b"kp-open", partition=0)
    p.flush(30)
    return p


def kafka_python_read(bootstrap: str, ends: list[int]) -> list[bytes]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    try:
        tps = [KpTP(TOPIC, p) for p in range(PARTS)]
        c.assign(tps)
        c.seek_to_beginning()
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTS)}
        deadline = time.monotonic() + 30
        while any(c.position(tp) < ends[tp.partition] for tp in tps):
            assert time.monotonic() < deadline, [c.position(tp) for tp in tps]
            for tp, msgs in c.poll(500).items():
                got[tp.partition] += [m.value for m in msgs]
        return got[0] + got[1]
    finally:
        c.close()


async def aiokafka_read(bootstrap: str, ends: list[int]) -> list[bytes]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    await c.start()
    try:
        tps = [AioTP(TOPIC, p) for p in range(PARTS)]
        c.assign(tps)
        await c.seek_to_beginning()
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTS)}
        deadline = time.monotonic() + 30

        async def behind() -> bool:
            return any([await c.position(tp) < ends[tp.partition] for tp in tps])

        while await behind():
            assert time.monotonic() < deadline
            for tp, msgs in (await c.getmany(timeout_ms=500)).items():
                got[tp.partition] += [m.value for m in msgs]
        return got[0] + got[1]
    finally:
        await c.stop()


def test_python_clients_transactions_and_read_committed(broker):
    create_topic(broker.bootstrap, TOPIC, PARTS)
    open_producer = kafka_python_transactions(broker.bootstrap)
    asyncio.run(aiokafka_commit_abort_commit(broker.bootstrap, "aio-txn", TOPIC, 1, [b"aio-c1", b"aio-c2"],
                                             b"aio-a1", b"aio-c3", acks="all"))
    committed = [b"kp-c1", b"kp-c2", b"kp-c3", b"aio-c1", b"aio-c2", b"aio-c3"]
    with RawClient(broker.port) as c:
        assert describe_txn(c, "kp-txn").transaction_state == "Ongoing"
        # EndTxn is answered once PrepareCommit is durable; the markers, then CompleteCommit, follow (as Kafka)
        wait_until(lambda: describe_txn(c, "aio-txn").transaction_state == "CompleteCommit", 60,
                   "aiokafka's last transaction completed")
        lso = offsets(c, TOPIC, PARTS, committed=True)
        hw = offsets(c, TOPIC, PARTS, committed=False)
    assert lso[0] < hw[0] and lso[1] == hw[1]  # the open transaction holds partition 0's LSO back
    # every read_committed consumer reads up to the LSO and sees the committed records only
    assert kafka_python_read(broker.bootstrap, lso) == committed
    assert asyncio.run(aiokafka_read(broker.bootstrap, lso)) == committed
    assert read_to_end(broker.bootstrap, TOPIC, PARTS, committed=True) == committed
    assert b"kp-a1" in read_to_end(broker.bootstrap, TOPIC, PARTS, committed=False)

    open_producer.commit_transaction()
    open_producer.close()
    committed.insert(3, b"kp-open")
    with RawClient(broker.port) as c:
        wait_until(lambda: not open_transactions(c), 30, "no open transaction")
        lso = offsets(c, TOPIC, PARTS, committed=True)
        assert lso == offsets(c, TOPIC, PARTS, committed=False)
    assert kafka_python_read(broker.bootstrap, lso) == committed
    assert asyncio.run(aiokafka_read(broker.bootstrap, lso)) == committed
    assert read_to_end(broker.bootstrap, TOPIC, PARTS, committed=True) == committed
