"""More partitions than the process may hold descriptors open: one CreatePartitions to 10 000 partitions under a
low `ulimit -n` succeeds, the broker restarts with them, and produce/consume work on partitions across the range.
Kafka's bound on one operation (10 000 metadata records) answers POLICY_VIOLATION before anything is journaled."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic

from tests.helpers.broker_process import BrokerProcess, venv_python
from tests.helpers.confluent_clients import admin_client

pytestmark = pytest.mark.integration

LIMIT = 512  # RLIMIT_NOFILE of the broker process: far fewer than the partitions' ~30 000 files


def _roundtrip(bootstrap: str, topic: str, partitions: list[int], tag: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in partitions:
        producer.produce(topic, tag + b"-%d" % p, partition=p)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "many-" + tag.decode(),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    seen: set[bytes] = set()
    wanted = {tag + b"-%d" % p for p in partitions}
    for _ in range(200):
        msg = consumer.poll(1)
        if msg is not None and msg.error() is None:
            seen.add(msg.value())
        if wanted <= seen:
            break
    consumer.close()
    assert wanted <= seen


def test_ten_thousand_partitions_under_a_low_descriptor_limit(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", python=venv_python(), max_open_files=LIMIT,
                           start_timeout=120)
    broker.start()
    try:
        admin = admin_client(broker.bootstrap)
        admin.create_topics([NewTopic("many", num_partitions=1)])["many"].result(timeout=30)
        # Kafka's limit: one operation writes at most 10 000 metadata records (here 10 000 new partitions)
        with pytest.raises(KafkaException) as err:
            admin.create_partitions([NewPartitions("many", 10_002)])["many"].result(timeout=60)
        assert err.value.args[0].code() == KafkaError.POLICY_VIOLATION
        with pytest.raises(KafkaException) as err:
            admin.create_topics([NewTopic("huge", num_partitions=10_000)])["huge"].result(timeout=60)
        assert err.value.args[0].code() == KafkaError.POLICY_VIOLATION
        assert set(admin.list_topics(timeout=30).topics) >= {"many"}
        assert "huge" not in admin.list_topics(timeout=30).topics

        admin.create_partitions([NewPartitions("many", 10_000)])["many"].result(timeout=300)
        assert len(admin.list_topics(topic="many", timeout=60).topics["many"].partitions) == 10_000
        assert broker.open_files() < LIMIT
        sample = [0, 1, 777, 5_000, 9_998, 9_999]
        _roundtrip(broker.bootstrap, "many", sample, b"before")
        assert broker.open_files() < LIMIT

        assert broker.stop() == 0
        broker.start()
        admin = admin_client(broker.bootstrap)
        assert len(admin.list_topics(topic="many", timeout=60).topics["many"].partitions) == 10_000
        _roundtrip(broker.bootstrap, "many", sample + [123, 4_321], b"after")
        assert broker.open_files() < LIMIT
        assert (tmp_path / "data" / "many-9999").is_dir()
    finally:
        broker.stop()
