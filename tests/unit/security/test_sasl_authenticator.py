"""The per-connection SASL state machine, driven with encoded request frames (no sockets)."""

from __future__ import annotations

import struct

import pytest

from broker.security.plain import PlainServer
from broker.security.sasl import SaslAuthenticator
from broker.security.scram import SCRAM_SHA_256, ScramClient, ScramCredential, ScramServer
from protocol import schema
from protocol.codec import request_codec, response_codec
from protocol.errors import ErrorCode
from protocol.framing import RequestHeader, decode_response_header, encode_request, response_header_version

ALICE = ScramCredential.from_password(SCRAM_SHA_256, "alice-pw", 4096)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def new_server(mechanism: str):
    if mechanism == "PLAIN":
        return PlainServer({"alice": "alice-pw", "bob": "bob-pw"})
    return ScramServer(SCRAM_SHA_256, {"alice": ALICE}.get)


def version_range(api_key: int):
    spec = schema.api_specs().get(api_key)
    return None if spec is None else (spec.min_version, spec.max_version)


def authenticator(reauth_ms: int = 0, clock=None) -> SaslAuthenticator:
    return SaslAuthenticator(listener="SASL_PLAINTEXT", mechanisms=["PLAIN", "SCRAM-SHA-256"], new_server=new_server,
                             version_range=version_range, reauth_ms=reauth_ms, clock=clock or Clock())


def frame(api_key: int, version: int, body: dict, correlation_id: int = 7) -> bytes:
    return encode_request(RequestHeader(api_key, version, correlation_id, "test"),
                          request_codec(api_key, version).encode(body))[4:]


def decode(api_key: int, version: int, response: bytes):
    payload = response[4:]
    _, offset = decode_response_header(payload, response_header_version(api_key, version))
    return response_codec(api_key, version).decode(payload[offset:])


def handshake(auth, mechanism: str, version: int = 1):
    step = auth.receive(frame(17, version, {"mechanism": mechanism}))
    return step, decode(17, version, step.response)


def authenticate(auth, token: bytes, version: int = 2):
    step = auth.receive(frame(36, version, {"auth_bytes": token}))
    return step, decode(36, version, step.response)


def test_plain_v1_exchange() -> None:
    auth = authenticator()
    assert auth.receive(frame(18, 3, {"client_software_name": "x", "client_software_version": "1"})).dispatch
    step, body = handshake(auth, "PLAIN")
    assert not step.fail and body.error_code == 0 and body.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    step, body = authenticate(auth, b"\x00alice\x00alice-pw")
    assert not step.fail and body.error_code == 0 and body.auth_bytes == b"" and body.session_lifetime_ms == 0
    assert auth.authenticated and auth.principal == "User:alice"
    assert auth.receive(frame(3, 12, {"topics": None})) is None  # ordinary requests go to the router


def test_scram_v1_exchange_and_wrong_password() -> None:
    auth = authenticator()
    handshake(auth, "SCRAM-SHA-256")
    client = ScramClient(SCRAM_SHA_256, "alice", "alice-pw")
    _, body = authenticate(auth, client.first(), version=1)
    step, body = authenticate(auth, client.final(body.auth_bytes), version=1)
    assert client.verify(body.auth_bytes) and auth.principal == "User:alice"

    auth = authenticator()
    handshake(auth, "SCRAM-SHA-256")
    wrong = ScramClient(SCRAM_SHA_256, "alice", "guess")
    _, body = authenticate(auth, wrong.first())
    step, body = authenticate(auth, wrong.final(body.auth_bytes))
    assert step.fail and body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert body.error_message == ("Authentication failed during authentication due to invalid credentials with "
                                  "SASL mechanism SCRAM-SHA-256")
    assert not auth.authenticated and auth.receive(frame(3, 12, {"topics": None})).close


def test_unknown_user_gets_the_same_answer_as_a_wrong_password() -> None:
    auth = authenticator()
    handshake(auth, "SCRAM-SHA-256")
    step, body = authenticate(auth, ScramClient(SCRAM_SHA_256, "nobody", "x").first())
    assert step.fail and body.error_message.startswith("Authentication failed during authentication due to invalid")


def test_plain_failure_message_is_the_mechanisms() -> None:
    auth = authenticator()
    handshake(auth, "PLAIN")
    step, body = authenticate(auth, b"\x00alice\x00nope", version=0)
    assert step.fail and body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert body.error_message == "Authentication failed: Invalid username or password"


def test_unsupported_mechanism() -> None:
    step, body = handshake(authenticator(), "GSSAPI")
    assert step.fail and body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert body.mechanisms == ["PLAIN", "SCRAM-SHA-256"]


def test_other_requests_before_authentication_close() -> None:
    step = authenticator().receive(frame(3, 12, {"topics": None}))
    assert step.fail and step.response is None
    auth = authenticator()
    handshake(auth, "PLAIN")
    step = auth.receive(frame(19, 5, {"topics": []}))  # CreateTopics in place of SaslAuthenticate
    assert step.fail and step.response is None  # CreateTopics has no top-level error code
    auth = authenticator()
    handshake(auth, "PLAIN")
    step = auth.receive(frame(60, 1, {}))  # DescribeCluster has one: ILLEGAL_SASL_STATE
    assert step.fail and decode(60, 1, step.response).error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert authenticator().receive(b"\x60\x01garbage").fail  # not a Kafka request (a GSSAPI token)


def test_api_versions_once_but_retries_after_unsupported_version() -> None:
    auth = authenticator()
    too_new = encode_request(RequestHeader(18, 99, 1, "test"), b"\x00\x00\x00")[4:]
    assert auth.receive(too_new).dispatch  # answered UNSUPPORTED_VERSION by the router
    assert auth.receive(frame(18, 3, {"client_software_name": "x", "client_software_version": "1"})).dispatch
    assert auth.receive(frame(18, 3, {"client_software_name": "x", "client_software_version": "1"})).close


def test_v0_handshake_uses_raw_tokens() -> None:
    auth = authenticator()
    step, body = handshake(auth, "SCRAM-SHA-256", version=0)
    assert body.error_code == 0
    client = ScramClient(SCRAM_SHA_256, "alice", "alice-pw")
    step = auth.receive(client.first())
    (size,) = struct.unpack(">i", step.response[:4])
    server_first = step.response[4:]
    assert size == len(server_first) and server_first.startswith(b"r=" + client.nonce.encode())
    step = auth.receive(client.final(server_first))
    assert client.verify(step.response[4:]) and auth.authenticated
    auth = authenticator()
    handshake(auth, "PLAIN", version=0)
    assert auth.receive(b"\x00alice\x00alice-pw").response == b"\x00\x00\x00\x00"
    auth = authenticator()
    handshake(auth, "PLAIN", version=0)
    step = auth.receive(b"\x00alice\x00bad")
    assert step.fail and step.response is None


def test_session_lifetime_and_reauthentication() -> None:
    clock = Clock()
    auth = authenticator(reauth_ms=60_000, clock=clock)
    handshake(auth, "PLAIN")
    _, body = authenticate(auth, b"\x00alice\x00alice-pw")
    assert body.session_lifetime_ms == 60_000
    clock.now += 30
    assert auth.receive(frame(3, 12, {"topics": None})) is None
    # Re-authenticate on the same connection, same mechanism and principal.
    step, body = handshake(auth, "PLAIN")
    assert body.error_code == 0 and not auth.authenticated
    _, body = authenticate(auth, b"\x00alice\x00alice-pw")
    assert body.error_code == 0 and body.session_lifetime_ms == 60_000 and auth.authenticated
    # A second re-authentication within a second is not one: the router answers the handshake.
    assert auth.receive(frame(17, 1, {"mechanism": "PLAIN"})) is None
    clock.now += 61
    assert auth.receive(frame(3, 12, {"topics": None})).close  # the session expired


def test_reauthentication_may_not_change_principal_or_mechanism() -> None:
    clock = Clock()
    auth = authenticator(reauth_ms=1000, clock=clock)
    handshake(auth, "PLAIN")
    authenticate(auth, b"\x00alice\x00alice-pw")
    clock.now += 2
    handshake(auth, "PLAIN")
    step, body = authenticate(auth, b"\x00bob\x00bob-pw")
    assert step.fail and body.error_message == "Cannot change principals during re-authentication from User.alice: " \
                                               "User.bob"
    auth = authenticator(reauth_ms=1000, clock=clock)
    handshake(auth, "PLAIN")
    authenticate(auth, b"\x00alice\x00alice-pw")
    clock.now += 2
    step, body = handshake(auth, "SCRAM-SHA-256")
    assert body.error_code == 0 and not step.fail
    step = auth.receive(frame(36, 2, {"auth_bytes": b"x"}))
    assert step.fail and step.response is None


def test_without_session_lifetime_a_handshake_after_authentication_goes_to_the_router() -> None:
    auth = authenticator()
    handshake(auth, "PLAIN")
    authenticate(auth, b"\x00alice\x00alice-pw")
    assert auth.receive(frame(17, 1, {"mechanism": "PLAIN"})) is None


@pytest.mark.parametrize("version", [0, 1, 2])
def test_authenticate_versions(version: int) -> None:
    auth = authenticator(reauth_ms=5000)
    handshake(auth, "PLAIN")
    _, body = authenticate(auth, b"\x00alice\x00alice-pw", version=version)
    assert body.error_code == 0 and body.session_lifetime_ms == (5000 if version >= 1 else 0)  # v1+ carry it


def test_handshake_lists_mechanisms_in_kafkas_hash_set_order():
    """Kafka's SaslServerAuthenticator copies sasl.enabled.mechanisms through a java.util.HashSet: Kafka 4.4 lists
    SCRAM-SHA-512 before SCRAM-SHA-256 whatever the configured order."""
    from broker.security.sasl import handshake_order

    assert handshake_order(["SCRAM-SHA-256", "SCRAM-SHA-512"]) == ["SCRAM-SHA-512", "SCRAM-SHA-256"]
    assert handshake_order(["SCRAM-SHA-512", "SCRAM-SHA-256", "SCRAM-SHA-512"]) == ["SCRAM-SHA-512", "SCRAM-SHA-256"]
    assert handshake_order(["PLAIN", "SCRAM-SHA-256"]) == ["PLAIN", "SCRAM-SHA-256"]
