"""The secured setup of docs/operations.md: one SASL_SSL listener, SCRAM, ACLs, an admin created with
--add-scram."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.helpers.broker_process import BrokerProcess, venv_python
from tests.helpers.tls_material import make_tls_files

pytestmark = pytest.mark.integration


@pytest.fixture
def secured(tmp_path):
    tls = make_tls_files(tmp_path / "tls")
    properties = tmp_path / "server-secure.properties"
    properties.write_text(
        "listeners=SASL_SSL://127.0.0.1:0\n"
        "listener.security.protocol.map=SASL_SSL:SASL_SSL\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={tls.broker_keystore}\n"
        "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n")
    proc = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", python=venv_python(),
                         overrides={"listeners": "SASL_SSL://127.0.0.1:0"},
                         extra_args=[str(properties), "--add-scram",
                                     "SCRAM-SHA-512=[name=admin,password=admin-secret]"])
    proc.start()
    try:
        yield proc, tls
    finally:
        proc.stop()


def config(broker, tls, user: str, password: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(tls.ca)}


def test_readme_secured_setup(secured):
    broker, tls = secured
    admin = AdminClient(config(broker, tls, "admin", "admin-secret"))
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"alice-secret")])["alice"].result(30)
    admin.create_topics([NewTopic("orders", 1)])["orders"].result(timeout=30)
    write = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_acls([write])[write].result(timeout=30)

    delivered: list = []
    producer = Producer(config(broker, tls, "alice", "alice-secret"))
    producer.produce("orders", b"hello", on_delivery=lambda err, _m: delivered.append(err))
    producer.flush(30)
    assert delivered == [None]

    # The next start keeps credentials; --add-scram does not reset a password changed since.
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "admin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"new-secret")])["admin"].result(30)
    broker.restart()
    errors: list = []
    stale = Producer({**config(broker, tls, "admin", "admin-secret"), "error_cb": errors.append})
    deadline = time.monotonic() + 60  # a TLS handshake and a SCRAM exchange: slow on a loaded machine
    while not errors and time.monotonic() < deadline:
        stale.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    admin = AdminClient(config(broker, tls, "admin", "new-secret"))
    assert "orders" in admin.list_topics(timeout=30).topics
