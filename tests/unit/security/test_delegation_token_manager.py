"""The sans-IO delegation token manager (Kafka's DelegationTokenControlManager rules) and the SCRAM token path."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from broker.security.delegation_tokens import (
    DELEGATION_TOKEN_RECORD,
    REMOVE_DELEGATION_TOKEN_RECORD,
    DelegationTokenManager,
)
from broker.security.sasl import SaslAuthenticator
from broker.security.sasl_errors import SaslFailure
from broker.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramClient, ScramServer
from protocol.codec import request_codec, response_codec
from protocol.errors import ErrorCode
from protocol.framing import RequestHeader, decode_response_header, encode_request, response_header_version

DAY, WEEK = 86_400_000, 7 * 86_400_000
ALICE, BOB, CAROL = "User:alice", "User:bob", "User:carol"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def manager(clock: Clock, key: str | None = "secret") -> DelegationTokenManager:
    return DelegationTokenManager(secret_key=key, max_lifetime_ms=WEEK, renew_ms=DAY, now_ms=clock)


def commit(m: DelegationTokenManager, records) -> None:
    for record_type, value in records:
        m.apply(record_type, value)


def create(m: DelegationTokenManager, owner=ALICE, renewers=(), max_lifetime_ms=-1):
    records, created = m.create(owner, owner, list(renewers), max_lifetime_ms)
    assert created.error == ErrorCode.NONE
    commit(m, records)
    return created


def test_create_sets_hmac_lifetimes_and_journals_the_token() -> None:
    clock = Clock()
    m = manager(clock)
    records, created = m.create(BOB, ALICE, [CAROL], -1)
    assert created.error == ErrorCode.NONE and len(m) == 0  # nothing changes before the records are applied
    token = created.token
    assert created.hmac == hmac.new(b"secret", token.token_id.encode(), hashlib.sha512).digest()
    assert (token.issue_ms, token.expiry_ms, token.max_ms) == (clock.now, clock.now + DAY, clock.now + WEEK)
    assert records == [(DELEGATION_TOKEN_RECORD, {
        "owner": ALICE, "requester": BOB, "renewers": [CAROL], "issue_timestamp": clock.now,
        "max_timestamp": clock.now + WEEK, "expiration_timestamp": clock.now + DAY, "token_id": token.token_id})]
    commit(m, records)
    assert m.token(token.token_id) == token


def test_requested_lifetime_is_capped_and_bounds_the_expiry() -> None:
    clock = Clock()
    m = manager(clock)
    short = create(m, max_lifetime_ms=1000).token
    assert (short.max_ms, short.expiry_ms) == (clock.now + 1000, clock.now + 1000)
    long = create(m, max_lifetime_ms=10 * WEEK).token
    assert long.max_ms == clock.now + WEEK


def test_disabled_without_a_secret_key() -> None:
    m = manager(Clock(), key=None)
    assert not m.enabled
    assert m.create(ALICE, ALICE, [], -1)[1].error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert m.renew(ALICE, b"x", -1)[1] == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert m.expire(ALICE, b"x", -1)[1] == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def test_renewers_must_be_users() -> None:
    m = manager(Clock())
    assert m.create(ALICE, ALICE, ["Group:g"], -1)[1].error == ErrorCode.INVALID_PRINCIPAL_TYPE


def test_renew_extends_the_expiry_up_to_the_maximum() -> None:
    clock = Clock()
    m = manager(clock)
    created = create(m, renewers=[CAROL], max_lifetime_ms=2 * DAY)
    clock.now += DAY // 2
    records, error, expiry = m.renew(CAROL, created.hmac, -1)
    assert (error, expiry) == (ErrorCode.NONE, clock.now + DAY)
    commit(m, records)
    assert m.token(created.token.token_id).expiry_ms == expiry
    clock.now += DAY // 2
    assert m.renew(ALICE, created.hmac, 10)[2] == clock.now + 10  # a shorter period is taken as asked
    clock.now += DAY // 2
    assert m.renew(ALICE, created.hmac, -1)[2] == created.token.max_ms  # never past the maximum


def test_renew_errors_in_kafkas_order() -> None:
    clock = Clock()
    m = manager(clock)
    created = create(m)
    assert m.renew(ALICE, b"nope", -1)[1] == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert m.renew(BOB, created.hmac, -1)[1] == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    clock.now += DAY + 1
    assert m.renew(BOB, created.hmac, -1)[1] == ErrorCode.DELEGATION_TOKEN_EXPIRED  # expiry is checked first


def test_expire_now_removes_and_later_shortens() -> None:
    clock = Clock()
    m = manager(clock)
    created = create(m)
    assert m.expire(BOB, created.hmac, -1)[1] == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    records, error, expiry = m.expire(ALICE, created.hmac, 5000)
    assert (error, expiry) == (ErrorCode.NONE, clock.now + 5000)
    commit(m, records)
    records, error, expiry = m.expire(ALICE, created.hmac, -1)
    assert (error, expiry) == (ErrorCode.NONE, clock.now)
    assert records == [(REMOVE_DELEGATION_TOKEN_RECORD, {"token_id": created.token.token_id})]
    commit(m, records)
    assert len(m) == 0
    assert m.expire(ALICE, created.hmac, -1)[1] == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_sweep_removes_expired_tokens_only() -> None:
    clock = Clock()
    m = manager(clock)
    old = create(m, max_lifetime_ms=1000).token
    young = create(m).token
    assert m.sweep() == []
    clock.now += 1001
    records = m.sweep()
    assert records == [(REMOVE_DELEGATION_TOKEN_RECORD, {"token_id": old.token_id})]
    commit(m, records)
    assert [t.token_id for t in m.tokens()] == [young.token_id]


def test_describe_filters_by_owner_and_permission() -> None:
    m = manager(Clock())
    mine = create(m, owner=ALICE, renewers=[CAROL]).token
    bobs = create(m, owner=BOB).token
    ids = lambda tokens: sorted(t.token_id for t in tokens)  # noqa: E731
    assert ids(m.describe(ALICE, None, lambda t: False)) == [mine.token_id]
    assert ids(m.describe(CAROL, None, lambda t: False)) == [mine.token_id]  # renewers see it too
    assert ids(m.describe(CAROL, None, lambda t: True)) == ids([mine, bobs])
    assert ids(m.describe(CAROL, [BOB], lambda t: True)) == [bobs.token_id]
    assert ids(m.describe(ALICE, [CAROL], lambda t: False)) == [mine.token_id]  # owners match renewers


def test_replay_rebuilds_the_same_tokens_and_hmacs() -> None:
    clock = Clock()
    m = manager(clock)
    journal = []
    records, created = m.create(ALICE, ALICE, [CAROL], -1)
    journal += records
    commit(m, records)
    records, _, _ = m.renew(ALICE, created.hmac, 1000)
    journal += records
    commit(m, records)
    again = manager(clock)
    commit(again, journal)
    assert again.tokens() == m.tokens()
    assert again.renew(ALICE, created.hmac, -1)[1] == ErrorCode.NONE  # found by its HMAC


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_token_authentication(mechanism) -> None:
    clock = Clock()
    m = manager(clock)
    created = create(m, owner=BOB)
    m.prepare_credentials()
    token_id = created.token.token_id
    password = base64.b64encode(created.hmac).decode()

    def exchange(password: str, extensions=None) -> ScramServer:
        server = ScramServer(mechanism, lambda user: None, token_lookup=lambda tid: m.lookup(mechanism, tid))
        client = ScramClient(mechanism, token_id, password, extensions=extensions)
        server_final = server.evaluate(client.final(server.evaluate(client.first())))
        assert client.verify(server_final)
        return server

    server = exchange(password, {"tokenauth": "true"})
    assert server.complete and server.authorization_id == "bob" and server.token_authenticated
    assert server.credential_expiry_ms == created.token.expiry_ms
    with pytest.raises(SaslFailure):  # the HMAC is the password
        exchange("wrong", {"tokenauth": "true"})
    with pytest.raises(SaslFailure):  # without the extension the token id is an (unknown) user name
        exchange(password)
    commit(m, m.expire(BOB, created.hmac, -1)[0])
    with pytest.raises(SaslFailure, match="Invalid tokenId"):
        exchange(password, {"tokenauth": "true"})


def _frame(api_key: int, version: int, body: dict) -> bytes:
    return encode_request(RequestHeader(api_key, version, 7, "test"), request_codec(api_key, version).encode(body))[4:]


def _answer(step) -> object:
    payload = step.response[4:]
    _, offset = decode_response_header(payload, response_header_version(36, 2))
    return response_codec(36, 2).decode(payload[offset:])


@pytest.mark.parametrize(("reauth_ms", "lifetime_ms"), [(0, DAY), (60_000, 60_000), (2 * DAY, DAY)])
def test_token_session_ends_at_the_token_expiry(reauth_ms, lifetime_ms) -> None:
    """Kafka's SaslServerAuthenticator: the session lifetime is the lesser of the token's remaining life and
    connections.max.reauth.ms (if set); the connection is token-authenticated with the owner as principal."""
    clock = Clock()
    m = manager(clock)
    created = create(m, owner=BOB)
    monotonic = [50.0]
    auth = SaslAuthenticator(
        listener="SASL_PLAINTEXT", mechanisms=["SCRAM-SHA-512"],
        new_server=lambda mech: ScramServer(SCRAM_SHA_512, lambda user: None,
                                            token_lookup=lambda tid: m.lookup(SCRAM_SHA_512, tid)),
        version_range=lambda key: (0, 4), reauth_ms=reauth_ms, clock=lambda: monotonic[0], wall_ms=clock)
    auth.receive(_frame(17, 1, {"mechanism": "SCRAM-SHA-512"}))
    client = ScramClient(SCRAM_SHA_512, created.token.token_id, base64.b64encode(created.hmac).decode(),
                         extensions={"tokenauth": "true"})
    first = _answer(auth.receive(_frame(36, 2, {"auth_bytes": client.first()})))
    final = _answer(auth.receive(_frame(36, 2, {"auth_bytes": client.final(first.auth_bytes)})))
    assert final.error_code == 0 and final.session_lifetime_ms == lifetime_ms
    assert auth.principal == "User:bob" and auth.token_authenticated
    monotonic[0] += lifetime_ms / 1000 + 1
    assert auth.receive(_frame(3, 12, {"topics": None})).close
