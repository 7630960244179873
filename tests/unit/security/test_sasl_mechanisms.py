"""SCRAM (RFC 7677 test vector, Kafka's message rules) and PLAIN (Kafka's PlainSaslServer messages)."""

from __future__ import annotations

import base64

import pytest

from broker.security.plain import PlainServer
from broker.security.sasl_errors import SaslAuthenticationError, SaslFailure
from broker.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramCredential,
    ScramServer,
    saslname_from_username,
    username_from_saslname,
)

# RFC 7677 section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def rfc_server() -> ScramServer:
    credential = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)
    return ScramServer(SCRAM_SHA_256, {"user": credential}.get, nonce=lambda: RFC_SERVER_NONCE)


def test_rfc7677_exchange() -> None:
    server = rfc_server()
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


def test_wrong_proof_fails_with_the_standard_message() -> None:
    server = rfc_server()
    server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    bad = base64.b64encode(bytes(32)).decode()
    with pytest.raises(SaslFailure):
        server.evaluate(f"c=biws,r=rOprNGfwEbeRWgbNEkqO{RFC_SERVER_NONCE},p={bad}".encode())
    assert not server.complete
    with pytest.raises(SaslFailure):  # a failed exchange stays failed
        server.evaluate(b"n,,n=user,r=abc")


@pytest.mark.parametrize("message", [
    b"n,,n=nobody,r=abc",  # unknown user: the same answer as a wrong password
    b"y,,n=user,r=abc",  # only gs2 header "n" is accepted
    b"p=tls-unique,,n=user,r=abc",
    b"n,,n=user",  # no nonce
    b"n,,n=us=er,r=abc",  # '=' must be escaped as =3D
    b"n,,n=user,r=abc,tokenauth=true",  # no such delegation token
    "n,,n=usér,r=abc".encode(),
])
def test_bad_client_first(message: bytes) -> None:
    with pytest.raises(SaslFailure):
        rfc_server().evaluate(message)


def test_authzid_must_be_the_user() -> None:
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        rfc_server().evaluate(b"n,a=admin,n=user,r=abc")
    assert rfc_server().evaluate(b"n,a=user,n=user,r=abc").startswith(b"r=abc")


def test_final_checks_nonce_and_channel_binding() -> None:
    server = rfc_server()
    server.evaluate(b"n,,n=user,r=abc")
    with pytest.raises(SaslFailure, match="nonce"):
        server.evaluate(b"c=biws,r=abcWRONG,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    server = rfc_server()
    server.evaluate(b"n,,n=user,r=abc")
    nonce = "abc" + RFC_SERVER_NONCE
    with pytest.raises(SaslFailure, match="Channel binding"):
        server.evaluate(f"c=eSws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode())


def test_too_few_iterations_in_a_stored_credential_fails() -> None:
    weak = ScramCredential.from_password(SCRAM_SHA_256, "pw", 1000)
    with pytest.raises(SaslFailure, match="minimum"):
        ScramServer(SCRAM_SHA_256, {"u": weak}.get).evaluate(b"n,,n=u,r=abc")


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
@pytest.mark.parametrize("user", ["alice", "a,b=c", "x=2Cy"])
def test_client_and_server_agree(mechanism, user: str) -> None:
    credential = ScramCredential.from_password(mechanism, "s3cret", 4096)
    server = ScramServer(mechanism, {user: credential}.get)
    client = ScramClient(mechanism, user, "s3cret")
    server_first = server.evaluate(client.first())
    assert client.verify(server.evaluate(client.final(server_first)))
    assert server.authorization_id == user
    wrong = ScramClient(mechanism, user, "guess")
    server = ScramServer(mechanism, {user: credential}.get)
    with pytest.raises(SaslFailure):
        server.evaluate(wrong.final(server.evaluate(wrong.first())))


def test_saslname_escaping_round_trips() -> None:
    for name in ["plain", "a,b", "a=b", "=2C", ",,=="]:
        assert username_from_saslname(saslname_from_username(name)) == name


def test_credential_keys_follow_rfc5802() -> None:
    mech = SCRAM_SHA_512
    salted = mech.salted_password("pw", b"salt", 4096)
    cred = ScramCredential.from_salted_password(mech, b"salt", salted, 4096)
    assert cred.stored_key == mech.hash(mech.hmac(salted, b"Client Key"))
    assert cred.server_key == mech.hmac(salted, b"Server Key")
    assert len(cred.stored_key) == 64


def test_plain() -> None:
    server = PlainServer({"alice": "alice-secret"})
    assert server.evaluate(b"\x00alice\x00alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"
    assert PlainServer({"alice": "pw"}).evaluate(b"alice\x00alice\x00pw") == b""


@pytest.mark.parametrize("message,error", [
    (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
    (b"\x00bob\x00alice-secret", "Authentication failed: Invalid username or password"),
    (b"\x00\x00pw", "Authentication failed: username not specified"),
    (b"\x00alice\x00", "Authentication failed: password not specified"),
    (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"a\x00b\x00c\x00d\x00e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"bob\x00alice\x00alice-secret", "Authentication failed: Client requested an authorization id that is "
                                       "different from username"),
])
def test_plain_failures(message: bytes, error: str) -> None:
    server = PlainServer({"alice": "alice-secret"})
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(message)
    assert str(info.value) == error and not server.complete
