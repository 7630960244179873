"""Acceptance: confluent-kafka Producer, Consumer and ShareConsumer over SASL_SSL with SCRAM are refused without
the ACLs they need (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED) and served once granted; Metadata leaves
out topics a client may not describe."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.helpers.bounded_close import close_within
from tests.helpers.raw_client import RawClient
from tests.helpers.tls_material import make_tls_files

pytestmark = pytest.mark.integration

# The PLAINTEXT listener is the operator's (its ANONYMOUS principal is a super user); clients use SASL_SSL.
SECURED = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
           "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
           "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:ANONYMOUS"}


@pytest.fixture
def secured(broker_factory, tmp_path):
    tls = make_tls_files(tmp_path / "tls")
    broker = broker_factory({**SECURED, "ssl.keystore.location": str(tls.broker_keystore)})
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
    for user in ("alice", "bob"):
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                              f"{user}-secret".encode())
        admin.alter_user_scram_credentials([upsert])[user].result(timeout=30)
    for topic in admin.create_topics([NewTopic("orders", 1), NewTopic("payments", 1)]).values():
        topic.result(timeout=30)
    return broker, admin, tls


def client_config(broker, tls, user: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": f"{user}-secret",
            "ssl.ca.location": str(tls.ca)}


def allow(admin: AdminClient, user: str, resource_type, name: str, *operations) -> None:
    bindings = [AclBinding(resource_type, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                           AclPermissionType.ALLOW) for op in operations]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)


def produce(config: dict, topic: str, values: list[bytes]) -> list:
    """Delivery errors (None for a delivered record)."""
    producer = Producer({**config, "message.timeout.ms": 10_000})
    outcome: list = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(30)
    return outcome


def test_producer_needs_write(secured):
    broker, admin, tls = secured
    alice = client_config(broker, tls, "alice")
    errors = produce(alice, "orders", [b"a", b"b"])
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2, errors
    allow(admin, "alice", ResourceType.TOPIC, "orders", AclOperation.WRITE)
    assert produce(alice, "orders", [b"a", b"b"]) == [None, None]
    # WRITE on orders is not WRITE on payments.
    assert [e.code() for e in produce(alice, "payments", [b"x"])] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_idempotent_producer_needs_write_on_some_topic(secured):
    broker, admin, tls = secured
    bob = {**client_config(broker, tls, "bob"), "enable.idempotence": True}
    errors = produce(bob, "orders", [b"a"])
    assert errors and errors[0] is not None
    allow(admin, "bob", ResourceType.TOPIC, "orders", AclOperation.WRITE)
    assert produce(bob, "orders", [b"a", b"b"]) == [None, None]


def consume_assigned(config: dict, topic: str, count: int, timeout: float = 20.0):
    consumer = Consumer({**config, "group.id": "assigned", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, errors = [], []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count and not errors and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error())
            else:
                values.append(msg.value())
    finally:
        consumer.close()
    return values, errors


def test_consumer_needs_read(secured):
    broker, admin, tls = secured
    assert produce({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"}, "orders", [b"1", b"2"]) == \
        [None, None]
    bob = client_config(broker, tls, "bob")
    # librdkafka looks up its group's coordinator even for assigned partitions: DESCRIBE (implied by READ) on
    # the group is needed first.
    values, errors = consume_assigned(bob, "orders", 2)
    assert values == [] and [e.code() for e in errors] == [KafkaError.GROUP_AUTHORIZATION_FAILED], errors
    allow(admin, "bob", ResourceType.GROUP, "assigned", AclOperation.READ)
    # Without DESCRIBE on the topic Metadata hides it and librdkafka never fetches; with DESCRIBE only, Fetch
    # itself is refused.
    values, errors = consume_assigned(bob, "orders", 2, timeout=5)
    assert values == [] and errors == []
    allow(admin, "bob", ResourceType.TOPIC, "orders", AclOperation.DESCRIBE)
    values, errors = consume_assigned(bob, "orders", 2)
    assert values == [] and [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    allow(admin, "bob", ResourceType.TOPIC, "orders", AclOperation.READ)
    values, errors = consume_assigned(bob, "orders", 2)
    assert values == [b"1", b"2"] and not errors


def share_poll(config: dict, group: str, topic: str, want: int, timeout: float = 30.0):
    """(values, error codes) from a ShareConsumer until `want` records or an error."""
    consumer = ShareConsumer({**config, "group.id": group})
    consumer.subscribe([topic])
    values, codes = [], []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < want and not codes and time.monotonic() < deadline:
            try:
                batch = consumer.poll(0.5)
            except KafkaException as err:
                codes.append(err.args[0].code())
                break
            for msg in batch:
                if msg.error():
                    codes.append(msg.error().code())
                else:
                    values.append(msg.value())
    finally:
        close_within(consumer)
    return values, codes


def test_share_consumer_needs_read_on_group_and_topic(secured):
    broker, admin, tls = secured
    operator = {"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"}
    from tests.helpers.confluent_clients import alter_group_config

    alter_group_config(admin, "shares", "share.auto.offset.reset", "earliest")
    assert produce(operator, "payments", [b"p1", b"p2", b"p3"]) == [None] * 3
    alice = client_config(broker, tls, "alice")

    values, codes = share_poll(alice, "shares", "payments", 3)
    assert values == [] and KafkaError.GROUP_AUTHORIZATION_FAILED in codes, codes
    allow(admin, "alice", ResourceType.GROUP, "shares", AclOperation.READ)
    values, codes = share_poll(alice, "shares", "payments", 3)
    assert values == [] and KafkaError.TOPIC_AUTHORIZATION_FAILED in codes, codes
    # DESCRIBE lets the member join with its subscription; ShareFetch then needs READ on the topic.
    allow(admin, "alice", ResourceType.TOPIC, "payments", AclOperation.DESCRIBE)
    values, codes = share_poll(alice, "shares", "payments", 3)
    assert values == [] and KafkaError.TOPIC_AUTHORIZATION_FAILED in codes, codes
    allow(admin, "alice", ResourceType.TOPIC, "payments", AclOperation.READ)
    values, codes = share_poll(alice, "shares", "payments", 3)
    assert sorted(values) == [b"p1", b"p2", b"p3"] and not codes, codes


def test_metadata_hides_topics_without_describe(secured):
    broker, admin, tls = secured
    allow(admin, "alice", ResourceType.TOPIC, "orders", AclOperation.READ)  # READ implies DESCRIBE
    client = AdminClient(client_config(broker, tls, "alice"))
    topics = client.list_topics(timeout=30).topics
    assert set(topics) == {"orders"}
    # Asked by name, a topic it may not describe answers TOPIC_AUTHORIZATION_FAILED, existing or not.
    for name in ("payments", "nope"):
        md = client.list_topics(topic=name, timeout=30).topics[name]
        assert md.error is not None and md.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_list_groups_shows_only_describable_groups(broker_factory, tmp_path):
    """ListGroups: every group with DESCRIBE on the cluster, else only the groups the client may DESCRIBE."""
    tls = make_tls_files(tmp_path / "tls")
    broker = broker_factory({**SECURED, "super.users": "User:admin", "ssl.keystore.location": str(tls.broker_keystore)},
                            ["--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"])
    with RawClient(broker.ports["PLAINTEXT"]) as raw:
        served = {k.api_key: k.max_version for k in raw.call(18, 3, {"client_software_name": "t",
                                                                    "client_software_version": "1"}).api_keys}
    admin_config = client_config(broker, tls, "admin")
    admin_config["sasl.password"] = "admin-secret"
    admin = AdminClient(admin_config)
    for topic in admin.create_topics([NewTopic("lg", 1)]).values():
        topic.result(timeout=30)
    for group in ("visible", "hidden"):  # share groups, created by a member's first heartbeat
        consumer = ShareConsumer({**admin_config, "group.id": group})
        consumer.subscribe(["lg"])
        consumer.poll(1.0)
        close_within(consumer)  # may close mid-join: bounded (see share_consumers.py)

    def listed() -> set[str]:
        with RawClient(broker.ports["PLAINTEXT"]) as raw:  # User:ANONYMOUS
            answer = raw.call(16, served[16], {"states_filter": [], "types_filter": []})
        assert answer.error_code == 0
        return {g.group_id for g in answer.groups}

    assert listed() == set()
    allow(admin, "ANONYMOUS", ResourceType.GROUP, "visible", AclOperation.DESCRIBE)
    assert listed() == {"visible"}
    allow(admin, "ANONYMOUS", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)
    assert listed() == {"visible", "hidden"}


def test_topic_admin_with_prefixed_acls(secured):
    broker, admin, tls = secured
    alice = AdminClient(client_config(broker, tls, "alice"))
    bindings = [AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.CREATE, AclOperation.DESCRIBE)]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)

    def code_of(future) -> int | None:
        try:
            future.result(timeout=30)
        except KafkaException as err:
            return err.args[0].code()
        return None

    created = alice.create_topics([NewTopic("alice-1", 1), NewTopic("bob-1", 1)])
    assert code_of(created["alice-1"]) is None
    assert code_of(created["bob-1"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code_of(alice.delete_topics(["alice-1"])["alice-1"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource(ResourceType.TOPIC, "alice-1")
    assert code_of(alice.describe_configs([resource])[resource]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(admin, "alice", ResourceType.TOPIC, "alice-1", AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS)
    assert code_of(alice.describe_configs([resource])[resource]) is None
    assert code_of(alice.delete_topics(["alice-1"])["alice-1"]) is None
    assert "alice-1" not in admin.list_topics(timeout=30).topics


def test_group_consumer_needs_read_on_group_and_topic(secured):
    broker, admin, tls = secured
    operator = {"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"}
    assert produce(operator, "orders", [b"1", b"2", b"3"]) == [None] * 3
    bob = client_config(broker, tls, "bob")

    def consume(group: str) -> tuple[list, list]:
        consumer = Consumer({**bob, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe(["orders"])
        values, codes = [], []
        deadline = time.monotonic() + 30
        try:
            while len(values) < 3 and not codes and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    codes.append(msg.error().code())
                else:
                    values.append(msg.value())
            if len(values) == 3:
                consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        return values, codes

    values, codes = consume("readers")
    assert values == [] and KafkaError.GROUP_AUTHORIZATION_FAILED in codes, codes
    allow(admin, "bob", ResourceType.GROUP, "readers", AclOperation.READ)
    values, codes = consume("readers")
    assert values == [] and KafkaError.TOPIC_AUTHORIZATION_FAILED in codes, codes
    allow(admin, "bob", ResourceType.TOPIC, "orders", AclOperation.READ)
    values, codes = consume("readers")
    assert values == [b"1", b"2", b"3"] and not codes, codes
    committed = Consumer({**bob, "group.id": "readers"}).committed([TopicPartition("orders", 0)], timeout=30)
    assert committed[0].offset == 3


def test_offset_commit_and_fetch_refuse_topics_one_by_one(secured):
    """OffsetCommit/OffsetFetch with the group allowed: each topic is checked on its own; the allowed one is
    committed, the other answered TOPIC_AUTHORIZATION_FAILED."""
    broker, admin, tls = secured
    # Alice may use group "mixed" and topic "orders", not "payments".
    allow(admin, "alice", ResourceType.GROUP, "mixed", AclOperation.READ)
    allow(admin, "alice", ResourceType.TOPIC, "orders", AclOperation.READ)
    consumer = Consumer({**client_config(broker, tls, "alice"), "group.id": "mixed", "enable.auto.commit": False})
    try:
        with pytest.raises(KafkaException) as err:
            consumer.commit(offsets=[TopicPartition("orders", 0, 1), TopicPartition("payments", 0, 1)],
                            asynchronous=False)
        assert err.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        committed = consumer.committed([TopicPartition("orders", 0), TopicPartition("payments", 0)], timeout=30)
    finally:
        consumer.close()
    by_topic = {tp.topic: tp for tp in committed}
    assert by_topic["orders"].offset == 1 and by_topic["orders"].error is None
    assert by_topic["payments"].error is not None and \
        by_topic["payments"].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
