"""Delegation tokens (KIP-48) against a real broker: CreateDelegationToken, RenewDelegationToken,
ExpireDelegationToken and DescribeDelegationToken from SCRAM-authenticated connections, then SCRAM token
authentication (`tokenauth=true`) that produces and fetches as the token's owner.

No installed client exposes these APIs (confluent-kafka 2.16 AdminClient has no token calls) or sends the SCRAM
`tokenauth` extension (librdkafka, kafka-python and aiokafka all write `n,,n=USER,r=NONCE` with no extensions), so
both are driven with raw requests (tests/helpers/sasl.py `scram_raw_client`).
"""

from __future__ import annotations

import base64
import ssl
import time

import pytest

from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import FETCH, create_topic, fetch_body, produce
from tests.helpers.record_batches import batch
from tests.helpers.sasl import SaslRefused, scram_raw_client
from tests.helpers.tls_material import make_tls_files
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

CREATE, RENEW, EXPIRE, DESCRIBE, CREATE_ACLS = 38, 39, 40, 41, 30
NONE, TOKEN_AUTH_DISABLED, TOKEN_NOT_FOUND, OWNER_MISMATCH, REQUEST_NOT_ALLOWED = 0, 61, 62, 63, 64
TOKEN_AUTHORIZATION_FAILED, INVALID_PRINCIPAL_TYPE, SASL_AUTHENTICATION_FAILED = 65, 67, 58
DAY = 86_400_000
TOPIC = "token-topic"
USERS = ("admin", "alice", "bob", "carol")


def _broker_config(secret: str | None) -> tuple[dict, list[str]]:
    overrides = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                 "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:admin", "delegation.token.expiry.check.interval.ms": "200"}
    if secret is not None:
        overrides["delegation.token.secret.key"] = secret
    scram = [arg for user in USERS for arg in ("--add-scram", f"SCRAM-SHA-256=[name={user},password={user}-pw]")]
    return overrides, scram


@pytest.fixture(scope="module")
def tokens_broker(tmp_path_factory):
    from tests.helpers.broker_process import start_broker  # noqa: PLC0415

    overrides, scram = _broker_config("token-secret")
    proc = start_broker(tmp_path_factory.mktemp("tokens"), overrides, scram)
    try:
        with as_user(proc, "admin") as admin:
            create_topic(admin, TOPIC)
            allow(admin, 2, TOPIC, "User:alice", 2)  # TOPIC, ALL: the owner produces and fetches
        yield proc
    finally:
        proc.stop()


def sasl_port(broker) -> int:
    return broker.ports["SASL_PLAINTEXT"]


def as_user(broker, user: str) -> RawClient:
    return scram_raw_client(sasl_port(broker), user, f"{user}-pw")[0]


def with_token(broker, token_id: str, hmac: bytes, mechanism: str = "SCRAM-SHA-512"):
    return scram_raw_client(sasl_port(broker), token_id, base64.b64encode(hmac).decode(), mechanism,
                            extensions={"tokenauth": "true"})


def allow(client: RawClient, resource_type: int, name: str, principal: str, operation: int) -> None:
    resp = client.call(CREATE_ACLS, 3, {"creations": [{
        "resource_type": resource_type, "resource_name": name, "resource_pattern_type": 3, "principal": principal,
        "host": "*", "operation": operation, "permission_type": 3}]})
    assert resp.results[0].error_code == 0, resp


def create(client: RawClient, version: int = 3, renewers=(), owner: str | None = None, max_lifetime_ms: int = -1):
    body = {"renewers": [{"principal_type": t, "principal_name": n} for t, n in (r.split(":", 1) for r in renewers)],
            "max_lifetime_ms": max_lifetime_ms}
    if owner is not None:
        body["owner_principal_type"], body["owner_principal_name"] = owner.split(":", 1)
    return client.call(CREATE, version, body)


def describe(client: RawClient, owners=None, version: int = 3):
    owners = None if owners is None else [{"principal_type": t, "principal_name": n}
                                          for t, n in (o.split(":", 1) for o in owners)]
    return client.call(DESCRIBE, version, {"owners": owners})


def described_ids(client: RawClient, owners=None) -> set[str]:
    resp = describe(client, owners)
    assert resp.error_code == NONE, resp
    return {t.token_id for t in resp.tokens}


def test_token_lifecycle_and_authentication(tokens_broker):
    with as_user(tokens_broker, "alice") as alice, as_user(tokens_broker, "bob") as bob:
        before = int(time.time() * 1000)
        created = create(alice, renewers=["User:bob"])
        assert created.error_code == NONE, created
        assert (created.principal_type, created.principal_name) == ("User", "alice")
        assert (created.token_requester_principal_type, created.token_requester_principal_name) == ("User", "alice")
        assert before <= created.issue_timestamp_ms <= int(time.time() * 1000)
        assert created.expiry_timestamp_ms == created.issue_timestamp_ms + DAY
        assert created.max_timestamp_ms == created.issue_timestamp_ms + 7 * DAY
        assert len(created.hmac) == 64  # HmacSHA512

        [token] = [t for t in describe(alice).tokens if t.token_id == created.token_id]
        assert token.hmac == created.hmac and [(r.principal_type, r.principal_name) for r in token.renewers] == \
            [("User", "bob")]
        assert created.token_id in described_ids(bob)  # a renewer sees the token

        # Authenticated with the token: the principal is alice (only she may write the topic); the session ends
        # at the token's expiry.
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            client, final = with_token(tokens_broker, created.token_id, created.hmac, mechanism)
            with client:
                assert 0 < final.session_lifetime_ms <= DAY
                assert produce(client, TOPIC, batch(3)).error_code == 0
                fetched = client.call(FETCH, 12, fetch_body(TOPIC, 0)).responses[0].partitions[0]
                assert fetched.error_code == 0 and fetched.records
                # a token-authenticated connection may not manage tokens (Kafka's allowTokenRequests)
                assert create(client).error_code == REQUEST_NOT_ALLOWED
                assert describe(client).error_code == REQUEST_NOT_ALLOWED
                assert client.call(RENEW, 2, {"hmac": created.hmac, "renew_period_ms": -1}).error_code == \
                    REQUEST_NOT_ALLOWED

        # Expire in 5 s, then a renewal moves the expiry a day ahead again.
        shortened = alice.call(EXPIRE, 2, {"hmac": created.hmac, "expiry_time_period_ms": 5000})
        assert shortened.error_code == NONE and shortened.expiry_timestamp_ms < created.expiry_timestamp_ms
        renewed = bob.call(RENEW, 1, {"hmac": created.hmac, "renew_period_ms": -1})
        assert renewed.error_code == NONE and renewed.expiry_timestamp_ms > shortened.expiry_timestamp_ms + DAY // 2
        [token] = [t for t in describe(alice, version=1).tokens if t.token_id == created.token_id]
        assert token.expiry_timestamp == renewed.expiry_timestamp_ms

        with as_user(tokens_broker, "carol") as carol:
            assert carol.call(RENEW, 2, {"hmac": created.hmac, "renew_period_ms": -1}).error_code == OWNER_MISMATCH
            assert carol.call(EXPIRE, 2, {"hmac": created.hmac, "expiry_time_period_ms": -1}).error_code == \
                OWNER_MISMATCH
        assert alice.call(RENEW, 2, {"hmac": b"x" * 64, "renew_period_ms": -1}).error_code == TOKEN_NOT_FOUND

        # Expired at once: gone, and authentication with it fails.
        expired = alice.call(EXPIRE, 1, {"hmac": created.hmac, "expiry_time_period_ms": -1})
        assert expired.error_code == NONE
        assert created.token_id not in described_ids(alice)
        with pytest.raises(SaslRefused) as refused:
            with_token(tokens_broker, created.token_id, created.hmac)
        assert refused.value.answer.error_code == SASL_AUTHENTICATION_FAILED


def test_no_token_requests_over_plaintext(tokens_broker):
    with RawClient(tokens_broker.ports["PLAINTEXT"]) as plain:
        for version in (1, 2, 3):
            resp = create(plain, version)
            assert resp.error_code == REQUEST_NOT_ALLOWED and resp.expiry_timestamp_ms == -1, resp
            assert describe(plain, version=version).error_code == REQUEST_NOT_ALLOWED
        for version in (1, 2):
            assert plain.call(RENEW, version, {"hmac": b"x", "renew_period_ms": 1}).error_code == REQUEST_NOT_ALLOWED
            assert plain.call(EXPIRE, version, {"hmac": b"x", "expiry_time_period_ms": 1}).error_code == \
                REQUEST_NOT_ALLOWED


def test_owners_renewers_and_describe_acls(tokens_broker):
    with as_user(tokens_broker, "alice") as alice, as_user(tokens_broker, "admin") as admin, \
            as_user(tokens_broker, "bob") as bob, as_user(tokens_broker, "carol") as carol:
        # a token for someone else needs CREATE_TOKENS on USER:<owner>
        refused = create(alice, owner="User:bob")
        assert refused.error_code == TOKEN_AUTHORIZATION_FAILED
        assert (refused.principal_name, refused.token_requester_principal_name) == ("bob", "alice")
        assert create(alice, renewers=["Group:ops"]).error_code == INVALID_PRINCIPAL_TYPE
        for_bob = create(admin, owner="User:bob")
        assert for_bob.error_code == NONE and for_bob.principal_name == "bob"
        assert for_bob.token_requester_principal_name == "admin"
        allow(admin, 7, "User:bob", "User:alice", 13)  # USER, CREATE_TOKENS
        by_alice = create(alice, owner="User:bob")
        assert by_alice.error_code == NONE and by_alice.token_requester_principal_name == "alice"

        # others' tokens: DESCRIBE on the token id (DELEGATION_TOKEN resource) or DESCRIBE_TOKENS on USER:<owner>
        assert not {for_bob.token_id, by_alice.token_id} & described_ids(alice)  # the requester is no owner
        allow(admin, 6, for_bob.token_id, "User:alice", 8)  # DELEGATION_TOKEN, DESCRIBE
        assert for_bob.token_id in described_ids(alice) and by_alice.token_id not in described_ids(alice)

        assert for_bob.token_id in described_ids(bob)
        assert for_bob.token_id not in described_ids(carol)
        allow(admin, 7, "User:bob", "User:carol", 14)  # USER, DESCRIBE_TOKENS
        assert for_bob.token_id in described_ids(carol)
        assert for_bob.token_id in described_ids(carol, owners=["User:bob"])
        assert for_bob.token_id not in described_ids(carol, owners=["User:alice"])
        assert describe(carol, owners=[]).tokens == []

        # the owner (or a renewer) may renew it: not its requester, not even a super user (Kafka's allowedToRenew)
        assert admin.call(RENEW, 2, {"hmac": for_bob.hmac, "renew_period_ms": -1}).error_code == OWNER_MISMATCH
        assert alice.call(RENEW, 2, {"hmac": for_bob.hmac, "renew_period_ms": -1}).error_code == OWNER_MISMATCH
        assert bob.call(RENEW, 2, {"hmac": for_bob.hmac, "renew_period_ms": -1}).error_code == NONE


def test_expired_tokens_are_removed(tokens_broker):
    with as_user(tokens_broker, "alice") as alice:
        short = create(alice, max_lifetime_ms=1500)
        assert short.error_code == NONE and short.max_timestamp_ms == short.issue_timestamp_ms + 1500
        assert short.expiry_timestamp_ms == short.max_timestamp_ms  # the maximum bounds the first expiry
        assert short.token_id in described_ids(alice)
        wait_until(lambda: short.token_id not in described_ids(alice), 30, "the expiry sweep to remove the token")
        assert alice.call(RENEW, 2, {"hmac": short.hmac, "renew_period_ms": -1}).error_code == TOKEN_NOT_FOUND


def test_tokens_survive_restart(tokens_broker):
    with as_user(tokens_broker, "alice") as alice:
        kept = create(alice, version=2)
        assert kept.error_code == NONE
    tokens_broker.restart()
    with as_user(tokens_broker, "alice") as alice:
        [token] = [t for t in describe(alice).tokens if t.token_id == kept.token_id]
        assert (token.hmac, token.expiry_timestamp, token.max_timestamp) == \
            (kept.hmac, kept.expiry_timestamp_ms, kept.max_timestamp_ms)
        client, _ = with_token(tokens_broker, kept.token_id, kept.hmac)
        with client:
            assert produce(client, TOPIC, batch(1)).error_code == 0
        assert alice.call(RENEW, 2, {"hmac": kept.hmac, "renew_period_ms": -1}).error_code == NONE


def test_tokens_disabled_without_a_secret_key(broker_factory):
    overrides, scram = _broker_config(None)
    broker = broker_factory(overrides, scram)
    with as_user(broker, "alice") as alice:
        resp = create(alice)
        assert resp.error_code == TOKEN_AUTH_DISABLED and resp.token_id == "" and resp.hmac == b""
        assert describe(alice).error_code == TOKEN_AUTH_DISABLED
        assert alice.call(RENEW, 2, {"hmac": b"x", "renew_period_ms": -1}).error_code == TOKEN_AUTH_DISABLED
        assert alice.call(EXPIRE, 2, {"hmac": b"x", "expiry_time_period_ms": -1}).error_code == TOKEN_AUTH_DISABLED
    with pytest.raises(SaslRefused):
        with_token(broker, "0c2f6c2e-2a43-4b59-9f0e-7b9c1f1d2e3a", b"x" * 64)


def test_two_way_tls_only(broker_factory, tmp_path):
    """Over SSL a token request needs a client certificate (Kafka refuses one-way SSL, principal ANONYMOUS)."""
    tls = make_tls_files(tmp_path / "tls")
    broker = broker_factory({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(tls.broker_keystore),
                             "ssl.truststore.location": str(tls.ca), "ssl.client.auth": "requested",
                             "delegation.token.secret.key": "token-secret"})

    def tls_client(certificate: str | None) -> RawClient:
        context = ssl.create_default_context(cafile=str(tls.ca))
        if certificate is not None:
            context.load_cert_chain(*tls.client(certificate))
        raw = RawClient(broker.port)
        raw.sock = context.wrap_socket(raw.sock, server_hostname="127.0.0.1")
        return raw

    with tls_client(None) as anonymous:
        assert create(anonymous).error_code == REQUEST_NOT_ALLOWED
        assert describe(anonymous).error_code == REQUEST_NOT_ALLOWED
    with tls_client("alice") as alice:
        created = create(alice)
        assert created.error_code == NONE, created
        assert (created.principal_type, created.principal_name) == ("User", "CN=alice,O=Shoal Tests")
        assert created.token_id in described_ids(alice)
