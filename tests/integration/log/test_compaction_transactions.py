"""Compaction of a topic written in transactions, over TCP with real clients: a confluent-kafka transactional
producer writes keyed records to a compacted topic, committing some transactions and aborting others; once the
cleaner has run, a read_committed and a read_uncommitted consumer both read exactly the latest committed value of
every key, once, and no aborted value (the cleaner removed the aborted batches, as Kafka's does)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.helpers.confluent_clients import admin_client, read_partition
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "txn-compacted"
KEYS = 20


def cleaned_rounds(broker) -> int:
    return sum(1 for line in broker.log_path.read_text(errors="replace").splitlines()
               if '"log cleaned"' in line and f'"topic": "{TOPIC}"' in line)


def test_compaction_removes_aborted_transactions_and_keeps_the_latest_committed_values(broker_factory) -> None:
    broker = broker_factory({"log.cleaner.backoff.ms": "100"})
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, config={
        "cleanup.policy": "compact", "internal.segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.001",
        "segment.ms": "500", "delete.retention.ms": "1000"})])[TOPIC].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "compacting-writer",
                         "linger.ms": 5, "batch.num.messages": 5})
    producer.init_transactions(30)
    committed: dict[bytes, bytes] = {}
    aborted: set[bytes] = set()
    rounds = 12
    for r in range(rounds):
        commit = r % 3 != 1 and r != rounds - 1  # the last transaction aborts: the newest values are aborted ones
        producer.begin_transaction()
        written = {}
        for k in range(KEYS):
            if (k + r) % 4 == 0 and r > 0:
                continue  # not every key in every transaction
            key = b"key-%02d" % k
            value = b"%s-r%d-k%d-" % (b"committed" if commit else b"aborted", r, k) + b"x" * 100
            producer.produce(TOPIC, key=key, value=value, partition=0)
            written[key] = value
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
            committed.update(written)
        else:
            producer.abort_transaction(30)
            aborted.update(written.values())
    assert aborted and len(committed) == KEYS

    def compacted(isolation: str):
        got = [(k, v) for k, v, _offset in read_partition(broker.bootstrap, TOPIC, isolation, timeout=30)]
        keys = [k for k, _v in got]
        if len(keys) != len(set(keys)) or any(v in aborted for _k, v in got):
            return None
        return got if dict(got) == committed else None

    # the idle active segment rolls after segment.ms; the cleaner then cleans the whole log below the LSO
    wait_until(lambda: compacted("read_uncommitted"), 60, "one committed value per key, read_uncommitted")
    assert cleaned_rounds(broker) > 0
    got = wait_until(lambda: compacted("read_committed"), 30, "one committed value per key, read_committed")
    assert dict(got) == committed
    producer.flush(5)
