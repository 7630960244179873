"""confluent-kafka (librdkafka) helpers for tests: create topics, produce and consume whole lists, a background
producer, group configs and committed offsets through the AdminClient."""

from __future__ import annotations

import threading
import time

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)


def admin_client(bootstrap: str, **conf) -> AdminClient:
    """An AdminClient for `bootstrap` ("host:port"), with any further librdkafka settings."""
    return AdminClient({"bootstrap.servers": bootstrap, **conf})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = admin_client(bootstrap)
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, config=config or {})])
    futures[name].result(timeout=30)


def produce_all(bootstrap: str, topic: str, values: list[bytes], partition: int | None = 0,
                **conf) -> list[tuple[int, int]]:
    """Produce with acks=all and idempotence; return (partition, offset) of every delivered record.

    `partition=None` lets the client's partitioner spread the records (keyed by their index)."""
    delivered: list[tuple[int, int]] = []
    errors: list[object] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            **conf,
        }
    )
    for i, value in enumerate(values):
        while True:
            try:
                extra = {} if partition is None else {"partition": partition}
                producer.produce(topic, key=str(i).encode(), value=value, on_delivery=on_delivery, **extra)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    return delivered


def consume_all(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[tuple[bytes, bytes, int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-with-assign",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes, bytes, int]] = []
    import time

    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 1.0):
                if msg.error():
                    raise KafkaException(msg.error())
                out.append((msg.key(), msg.value(), msg.offset()))
    finally:
        consumer.close()
    return out


def read_partition(bootstrap: str, topic: str, isolation: str = "read_uncommitted",
                   timeout: float = 60) -> list[tuple[bytes, bytes | None, int]]:
    """(key, value, offset) of every record of partition 0 from offset 0 to its end (the LSO under read_committed,
    the high watermark otherwise), as a consumer sees them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise KafkaException(msg.error())
            out.append((msg.key(), msg.value(), msg.offset()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within {timeout}s ({len(out)} records)")


def alter_group_config(admin: AdminClient, group: str, name: str, value: str | None, op=AlterConfigOpType.SET) -> None:
    resource = ConfigResource(ResourceType.GROUP, group,
                              incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def share_from_earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest for `group`: its members start at the log start, not at its end."""
    alter_group_config(admin_client(bootstrap), group, "share.auto.offset.reset", "earliest")


def describe_group_config(admin: AdminClient, group: str) -> dict:
    resource = ConfigResource(ResourceType.GROUP, group)
    return admin.describe_configs([resource])[resource].result(timeout=30)


class BackgroundProducer(threading.Thread):
    """Produces keyed records in small rounds until stopped; remembers every delivered (partition, offset)."""

    def __init__(self, bootstrap: str, topic: str, prefix: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2})
        self.topic, self.prefix = topic, prefix
        self.delivered: set[tuple[int, int]] = set()
        self.failed: list[str] = []
        self._halt = threading.Event()

    def _done(self, err, msg) -> None:
        if err is None:
            self.delivered.add((msg.partition(), msg.offset()))
        else:
            self.failed.append(str(err))

    def run(self) -> None:
        i = 0
        while not self._halt.is_set():
            for _ in range(50):
                self.producer.produce(self.topic, key=f"{self.prefix}-{i}".encode(), value=b"x" * 100,
                                      on_delivery=self._done)
                i += 1
            self.producer.flush(30)
            self._halt.wait(0.02)  # a steady stream, not a burst
        self.producer.flush(30)

    def stop(self) -> set[tuple[int, int]]:
        self._halt.set()
        self.join(60)
        assert not self.failed, self.failed[:3]
        return set(self.delivered)


def produce_batch(bootstrap: str, topic: str, n: int, prefix: str) -> set[tuple[int, int]]:
    p = BackgroundProducer(bootstrap, topic, prefix)
    for i in range(n):
        p.producer.produce(topic, key=f"{prefix}-{i}".encode(), value=b"y", on_delivery=p._done)
    assert p.producer.flush(60) == 0
    assert not p.failed
    return set(p.delivered)


def first_consumer_error(conf: dict, topic: str, timeout: float = 30):
    c = Consumer(conf)
    c.subscribe([topic])
    try:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is not None:
                return msg.error()
        raise AssertionError("no error reported")
    finally:
        c.close()


def committed_offsets(broker, group: str, topic: str) -> dict[int, int]:
    admin = admin_client(broker.bootstrap)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in listed.topic_partitions if tp.topic == topic}


def read_partitions(bootstrap: str, topic: str, partitions: int, *, committed: bool = False,
                    timeout: float = 60.0, keys: bool = False, timestamps: bool = False) -> dict[int, list[tuple]]:
    """(offset, value) of every record of each partition from its start to its end (the LSO under read_committed,
    the high watermark otherwise), as a confluent consumer sees them; (offset, key, value) with `keys`, and the
    record's timestamp last with `timestamps`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: dict[int, list[tuple]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"not at the end of {topic} after {timeout}s: {sorted(at_end)}"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            item = (m.offset(), m.key(), m.value()) if keys else (m.offset(), m.value())
            got[m.partition()].append((*item, m.timestamp()[1]) if timestamps else item)
        return got
    finally:
        c.close()
