"""SASL for tests: the PLAIN JAAS line with the test users, SCRAM users added through the AdminClient, and a
broker with a SASL_SSL listener next to PLAINTEXT."""

from __future__ import annotations

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def add_scram_user(broker, user: str, password: str, mechanism=ScramMechanism.SCRAM_SHA_256) -> None:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
    admin.alter_user_scram_credentials([upsert])[user].result(timeout=30)


def sasl_ssl_broker(broker_factory, tls, **extra):
    return broker_factory({"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                           "ssl.keystore.location": str(tls.broker_keystore),
                           "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512", **extra})
