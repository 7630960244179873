"""Share-group dead-letter queue (KIP-1191) with confluent_kafka ShareConsumer, Consumer and AdminClient."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

from tests.helpers.confluent_clients import (
    admin_client,
    alter_group_config,
    create_topic,
    describe_group_config,
    produce_all,
)
from tests.helpers.share_consumers import consumer, messages

pytestmark = pytest.mark.integration


def read_all(broker, topic: str, want: int, timeout_s: float = 30.0) -> list:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused-with-assign",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    partitions = c.list_topics(topic, timeout=30).topics[topic].partitions
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    out = []
    try:
        end = time.monotonic() + timeout_s
        while len(out) < want and time.monotonic() < end:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m)
    finally:
        c.close()
    return out


def produce_keyed(broker, topic: str, key: bytes, value: bytes) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    p.produce(topic, value, key=key, partition=0)
    assert p.flush(30) == 0


def headers(m) -> dict[str, str]:
    return {k: v.decode() for k, v in (m.headers() or [])}


def consume_with(c, handle, until, timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and not until():
        for m in messages(c, 0.5):
            c.acknowledge(m, handle(m))
        c.commit_sync()


def test_poison_records_land_in_the_dlq_with_their_context(broker_factory):
    broker = broker_factory({"group.share.delivery.count.limit": "2",
                             "errors.deadletterqueue.auto.create.topics.enable": "true"})
    admin = admin_client(broker.bootstrap)
    create_topic(broker.bootstrap, "orders", 1)
    for name, value in [("share.auto.offset.reset", "earliest"),
                        ("errors.deadletterqueue.topic.name", "dlq.orders")]:
        alter_group_config(admin, "g-dlq", name, value)
    produce_all(broker.bootstrap, "orders", [b"ok-0", b"poison-1", b"ok-2", b"stuck-3", b"ok-4"])
    c = consumer(broker, "g-dlq", "orders", "explicit")
    seen: dict[int, int] = {}

    def handle(m):
        seen[m.offset()] = m.delivery_count()
        if m.value().startswith(b"poison"):
            return AcknowledgeType.REJECT  # dead at once
        if m.value().startswith(b"stuck"):
            return AcknowledgeType.RELEASE  # dead when it reaches the delivery count limit (2)
        return AcknowledgeType.ACCEPT

    try:
        consume_with(c, handle, lambda: seen.get(3) == 2 and len(seen) == 5)
    finally:
        c.close()
    assert seen == {0: 1, 1: 1, 2: 1, 3: 2, 4: 1}
    dead = sorted(read_all(broker, "dlq.orders", 2), key=lambda m: int(headers(m)["__dlq.errors.offset"]))
    assert [headers(m) for m in dead] == [
        {"__dlq.errors.topic": "orders", "__dlq.errors.partition": "0", "__dlq.errors.offset": "1",
         "__dlq.errors.group": "g-dlq", "__dlq.errors.delivery.count": "1",
         "__dlq.errors.message": "Offset rejected by client."},
        {"__dlq.errors.topic": "orders", "__dlq.errors.partition": "0", "__dlq.errors.offset": "3",
         "__dlq.errors.group": "g-dlq", "__dlq.errors.delivery.count": "2",
         "__dlq.errors.message": "Offset delivery count exceeded the threshold."}]
    assert all(m.key() is None and m.value() is None for m in dead)  # metadata only by default
    # The auto-created DLQ topic is marked as one.
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "dlq.orders")])
    [(_, fut)] = described.items()
    assert fut.result(timeout=30)["errors.deadletterqueue.group.enable"].value == "true"


def test_copy_record_and_existing_topics_must_allow_being_a_dlq(broker):
    admin = admin_client(broker.bootstrap)
    create_topic(broker.bootstrap, "payments", 1)
    for f in admin.create_topics([NewTopic("payments-dead", 2, config={"errors.deadletterqueue.group.enable": "true"}),
                                  NewTopic("not-a-dlq", 1)]).values():
        f.result(timeout=30)
    for name, value in [("share.auto.offset.reset", "earliest"), ("errors.deadletterqueue.topic.name", "not-a-dlq")]:
        alter_group_config(admin, "g-copy", name, value)
    produce_keyed(broker, "payments", b"k0", b"bad-0")
    c = consumer(broker, "g-copy", "payments", "explicit")
    done: list = []
    try:
        # A topic that does not allow being a DLQ: the record is archived without a DLQ copy.
        consume_with(c, lambda m: done.append(m.offset()) or AcknowledgeType.REJECT, lambda: len(done) == 1)
        assert done == [0]
        alter_group_config(admin, "g-copy", "errors.deadletterqueue.topic.name", "payments-dead")
        alter_group_config(admin, "g-copy", "errors.deadletterqueue.copy.record.enable", "true")
        produce_keyed(broker, "payments", b"k1", b"bad-1")
        consume_with(c, lambda m: done.append(m.offset()) or AcknowledgeType.REJECT, lambda: len(done) == 2)
    finally:
        c.close()
    assert read_all(broker, "not-a-dlq", 1, timeout_s=3) == []
    [copy] = read_all(broker, "payments-dead", 1)
    assert copy.partition() == 0  # source partition % DLQ partitions
    assert (copy.key(), copy.value()) == (b"k1", b"bad-1")
    assert headers(copy)["__dlq.errors.offset"] == "1" and headers(copy)["__dlq.errors.group"] == "g-copy"
    assert describe_group_config(admin, "g-copy")["errors.deadletterqueue.topic.name"].value == "payments-dead"


def test_dlq_topic_name_must_not_be_internal(broker):
    admin = admin_client(broker.bootstrap)
    with pytest.raises(KafkaException) as err:
        alter_group_config(admin, "g", "errors.deadletterqueue.topic.name", "__consumer_offsets")
    assert "must not start with '__'" in err.value.args[0].str()


def test_a_dlq_that_refuses_the_copy_archives_the_record_without_one(broker):
    """A DLQ write refused by the DLQ topic (a copied record above its max.message.bytes) archives the dead record
    without a copy, as an unusable DLQ does: the acknowledgement succeeds and the record is not delivered again."""
    admin = admin_client(broker.bootstrap)
    create_topic(broker.bootstrap, "large", 1)
    for f in admin.create_topics([NewTopic("large-dead", 1, config={
            "errors.deadletterqueue.group.enable": "true", "max.message.bytes": "1000"})]).values():
        f.result(timeout=30)
    for name, value in [("share.auto.offset.reset", "earliest"), ("errors.deadletterqueue.topic.name", "large-dead"),
                        ("errors.deadletterqueue.copy.record.enable", "true")]:
        alter_group_config(admin, "g-large", name, value)
    produce_keyed(broker, "large", b"k0", b"x" * 5000)
    produce_keyed(broker, "large", b"k1", b"ok-1")
    c = consumer(broker, "g-large", "large", "explicit")
    deliveries: list[tuple[int, int]] = []  # (offset, delivery count)

    def handle(m):
        deliveries.append((m.offset(), m.delivery_count()))
        return AcknowledgeType.REJECT if m.offset() == 0 else AcknowledgeType.ACCEPT

    try:
        consume_with(c, handle, lambda: any(offset == 1 for offset, _ in deliveries))
        # a record produced after the rejection: delivered once the rejection was handled
        produce_keyed(broker, "large", b"k2", b"ok-2")
        consume_with(c, handle, lambda: any(offset == 2 for offset, _ in deliveries))
    finally:
        c.close()
    assert sorted(deliveries) == [(0, 1), (1, 1), (2, 1)]
    assert read_all(broker, "large-dead", 1, timeout_s=3) == []
    log_text = broker.log_path.read_text(errors="replace")
    assert "DLQ write refused" in log_text and "DLQ write failed" not in log_text
