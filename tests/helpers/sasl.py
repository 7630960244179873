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


def scram_raw_client(port: int, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                     extensions: dict[str, str] | None = None):
    """A RawClient authenticated over SASL/SCRAM (SaslHandshake v1, SaslAuthenticate v2) on a SASL_PLAINTEXT
    listener. `extensions={"tokenauth": "true"}` authenticates with a delegation token (user = token id,
    password = its HMAC in base64): no installed client sends that SCRAM extension. Returns (client, the final
    SaslAuthenticate answer); a failed authentication raises SaslRefused with the broker's answer."""
    from broker.security.scram import MECHANISMS, ScramClient  # noqa: PLC0415 - only the raw SASL tests need it
    from tests.helpers.raw_client import RawClient  # noqa: PLC0415

    raw = RawClient(port)
    try:
        handshake = raw.call(17, 1, {"mechanism": mechanism})
        assert handshake.error_code == 0, handshake
        scram = ScramClient(MECHANISMS[mechanism], user, password, extensions=extensions)
        first = raw.call(36, 2, {"auth_bytes": scram.first()})
        if first.error_code:
            raise SaslRefused(first)
        final = raw.call(36, 2, {"auth_bytes": scram.final(first.auth_bytes)})
        if final.error_code:
            raise SaslRefused(final)
        assert scram.verify(final.auth_bytes), "the broker's server signature does not verify"
    except BaseException:
        raw.close()
        raise
    return raw, final


class SaslRefused(Exception):
    """SaslAuthenticate answered with an error; `.answer` is the decoded response."""

    def __init__(self, answer) -> None:
        super().__init__(f"SaslAuthenticate refused: {answer.error_code} {answer.error_message}")
        self.answer = answer
