"""SASL (PLAIN, SCRAM) and TLS listeners with real clients; a wrong password, Kafka's way; re-authentication."""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramMechanism,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka import errors as kafka_errors

from tests.helpers.raw_client import RawClient
from tests.helpers.sasl import PLAIN_JAAS, add_scram_user, sasl_ssl_broker
from tests.helpers.tls_material import make_tls_files

pytestmark = pytest.mark.integration


@pytest.fixture
def tls(tmp_path):
    return make_tls_files(tmp_path / "tls")


def scram_ssl_config(broker, tls, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(tls.ca)}


def produce_consume(config: dict, topic: str, count: int = 20) -> list[bytes]:
    producer = Producer({**config, "acks": "all"})
    errors = []
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_confluent_scram_over_sasl_ssl(broker_factory, tls):
    broker = sasl_ssl_broker(broker_factory, tls)
    add_scram_user(broker, "alice", "alice-pw")
    add_scram_user(broker, "bob", "bob-pw", ScramMechanism.SCRAM_SHA_512)
    got = produce_consume(scram_ssl_config(broker, tls, "alice", "alice-pw"), "scram-topic")
    assert got == [f"v{i}".encode() for i in range(20)]
    got = produce_consume(scram_ssl_config(broker, tls, "bob", "bob-pw", "SCRAM-SHA-512"), "scram-topic-512", 5)
    assert len(got) == 5
    # Metadata on the SASL_SSL listener advertises that listener's port, not the PLAINTEXT one.
    admin = AdminClient(scram_ssl_config(broker, tls, "alice", "alice-pw"))
    brokers = admin.list_topics(timeout=30).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", broker.ports["SASL_SSL"])]


def test_confluent_wrong_password_fails_authentication(broker_factory, tls):
    broker = sasl_ssl_broker(broker_factory, tls)
    add_scram_user(broker, "alice", "alice-pw")
    seen = []
    producer = Producer({**scram_ssl_config(broker, tls, "alice", "wrong"), "error_cb": seen.append})
    deadline = time.monotonic() + 30
    while not any(e.code() == KafkaError._AUTHENTICATION for e in seen) and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in seen), seen
    assert any("Authentication failed during authentication due to invalid credentials with SASL mechanism "
               "SCRAM-SHA-256" in e.str() for e in seen), [e.str() for e in seen]


def test_kafka_python_plain_over_sasl_plaintext(broker_factory):
    broker = broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    auth = {"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    producer = KafkaProducer(**auth, acks="all")
    for i in range(10):
        producer.send("plain-topic", f"m{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(**auth, enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=20_000)
    consumer.assign([KafkaTopicPartition("plain-topic", 0)])
    got = [m.value for _, m in zip(range(10), consumer, strict=False)]  # range first: no 11th, waited-for poll
    consumer.close()
    assert got == [f"m{i}".encode() for i in range(10)]
    with pytest.raises(kafka_errors.KafkaError):
        # kafka-python retries a refused bootstrap until bootstrap_timeout_ms (30 s by default) runs out
        KafkaProducer(**{**auth, "sasl_plain_password": "nope"}, max_block_ms=5000,
                      bootstrap_timeout_ms=5000).send("plain-topic", b"x").get(10)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def test_wrong_password_is_answered_then_the_connection_closes(broker_factory):
    """Kafka answers SaslAuthenticate with SASL_AUTHENTICATION_FAILED and its message, then closes the connection
    (after connection.failed.authentication.delay.ms)."""
    broker = broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    with RawClient(broker.port) as raw:
        versions = raw.call(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        assert {k.api_key for k in versions.api_keys} >= {17, 36}
        handshake = raw.call(17, 1, {"mechanism": "PLAIN"})
        assert handshake.error_code == 0 and handshake.mechanisms == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]  # Kafka's HashSet order
        started = time.monotonic()
        answer = raw.call(36, 2, {"auth_bytes": b"\x00alice\x00wrong"})
        assert answer.error_code == 58 and answer.error_message == \
            "Authentication failed: Invalid username or password"
        assert time.monotonic() - started >= 0.09  # the failed-authentication delay (100 ms by default)
        with pytest.raises(ConnectionError):
            raw.call(3, 12, {"topics": None})
    # Anything but ApiVersions/SaslHandshake first: closed, no answer.
    with RawClient(broker.port) as raw, pytest.raises(ConnectionError):
        raw.call(3, 12, {"topics": None})
    with RawClient(broker.port) as raw:
        answer = raw.call(17, 1, {"mechanism": "GSSAPI"})
        assert answer.error_code == 33 and "PLAIN" in answer.mechanisms
        with pytest.raises(ConnectionError):
            raw.call(17, 1, {"mechanism": "PLAIN"})
    with RawClient(broker.port) as raw:  # v0 handshake: raw tokens, success is an empty token
        assert raw.call(17, 0, {"mechanism": "PLAIN"}).error_code == 0
        token = b"\x00alice\x00alice-secret"
        raw.sock.sendall(struct.pack(">i", len(token)) + token)
        assert recv_exact(raw.sock, 4) == b"\x00\x00\x00\x00"
        assert raw.call(3, 12, {"topics": None}).brokers[0].port == broker.port


def test_sasl_frames_before_authentication_are_bounded(broker_factory):
    broker = broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.server.max.receive.size": "1000"})
    with RawClient(broker.port) as raw:
        raw.call(17, 1, {"mechanism": "PLAIN"})
        raw.sock.sendall(struct.pack(">i", 5000) + bytes(5000))
        with pytest.raises(ConnectionError):
            recv_exact(raw.sock, 4)


def test_ssl_listener_with_client_certificates(broker_factory, tls):
    broker = broker_factory({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(tls.broker_keystore),
                             "ssl.truststore.location": str(tls.ca), "ssl.client.auth": "required"})
    cert, key = tls.client("alice")
    config = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(tls.ca),
              "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    assert produce_consume(config, "tls-topic", 5) == [f"v{i}".encode() for i in range(5)]
    # Without a client certificate the TLS handshake fails.
    context = ssl.create_default_context(cafile=str(tls.ca))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock, pytest.raises(
            (ssl.SSLError, ConnectionError)), context.wrap_socket(sock, server_hostname="127.0.0.1") as wrapped:
        wrapped.sendall(b"\x00\x00\x00\x01\x00")
        recv_exact(wrapped, 4)


def test_librdkafka_reauthenticates_within_the_session_lifetime(broker_factory, tls):
    broker = sasl_ssl_broker(broker_factory, tls, **{"connections.max.reauth.ms": "1500"})
    add_scram_user(broker, "alice", "alice-pw")
    producer = Producer({**scram_ssl_config(broker, tls, "alice", "alice-pw"), "acks": "all"})
    errors = []
    deadline = time.monotonic() + 6
    sent = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", b"x", on_delivery=lambda err, _m: err and errors.append(err))
        sent += 1
        producer.poll(0.1)
    assert producer.flush(30) == 0 and not errors, errors
    log = broker.log_path.read_text()
    assert log.count('"re-authenticated"') >= 2, "librdkafka should have re-authenticated"
    assert "SASL session expired" not in log


def test_aiokafka_plain_and_scram_over_sasl_plaintext(broker_factory):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition
    from aiokafka.errors import KafkaConnectionError

    broker = broker_factory({"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    add_scram_user(broker, "bob", "bob-pw")
    bootstrap = f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}"

    async def roundtrip(mechanism: str, user: str, password: str) -> list[bytes]:
        auth = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                "sasl_plain_username": user, "sasl_plain_password": password}
        producer = AIOKafkaProducer(**auth)
        await producer.start()
        try:
            await producer.send_and_wait("aio", mechanism.encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**auth, enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([AioTopicPartition("aio", 0)])
            batches = await consumer.getmany(timeout_ms=10_000)
        finally:
            await consumer.stop()
        return [m.value for ms in batches.values() for m in ms]

    async def wrong_password() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="no")
        try:
            await producer.start()
        finally:
            await producer.stop()

    assert asyncio.run(roundtrip("PLAIN", "alice", "alice-secret")) == [b"PLAIN"]
    assert asyncio.run(roundtrip("SCRAM-SHA-256", "bob", "bob-pw")) == [b"PLAIN", b"SCRAM-SHA-256"]
    with pytest.raises(KafkaConnectionError):
        asyncio.run(wrong_password())
    assert "Authentication failed: Invalid username or password" in broker.log_path.read_text()


def test_ssl_client_certificate_principal_in_acls(broker_factory, tls):
    """The principal of a TLS client is User:<subject DN in RFC 2253 form>, as Kafka's default principal builder."""
    broker = broker_factory({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                             "ssl.keystore.location": str(tls.broker_keystore), "ssl.truststore.location": str(tls.ca),
                             "ssl.client.auth": "required",
                             "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                             "super.users": "User:ANONYMOUS"})
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    operator = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
    operator.create_topics([NewTopic("mtls", 1)])["mtls"].result(timeout=30)
    acl = AclBinding(ResourceType.TOPIC, "mtls", ResourcePatternType.LITERAL, "User:CN=alice,O=Shoal Tests", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)
    operator.create_acls([acl])[acl].result(timeout=30)

    def produce_as(name: str) -> list:
        cert, key = tls.client(name)
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.ports['SSL']}", "security.protocol": "SSL",
                             "ssl.ca.location": str(tls.ca), "ssl.certificate.location": str(cert),
                             "ssl.key.location": str(key), "message.timeout.ms": 10_000})
        outcome: list = []
        producer.produce("mtls", b"x", on_delivery=lambda err, _m: outcome.append(err and err.code()))
        producer.flush(30)
        return outcome

    assert produce_as("alice") == [None]
    assert produce_as("mallory") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
