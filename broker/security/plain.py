"""SASL/PLAIN (RFC 4616), server side, as Kafka's PlainSaslServer: one message `authzid NUL authcid NUL passwd`,
checked against the `user_<name>="<password>"` options of the listener's PlainLoginModule JAAS entry."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from broker.security.sasl_errors import SaslAuthenticationError


class PlainServer:
    mechanism_name = "PLAIN"
    token_authenticated = False  # only SCRAM authenticates delegation tokens
    credential_expiry_ms: int | None = None

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, response: bytes) -> bytes:
        text = bytes(response).decode("utf-8", errors="replace")
        tokens = text.split("\x00", 3)
        if len(tokens) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Constant-time comparison, as Kafka's Utils.isEqualConstantTime.
        if expected is None or not hmac.compare_digest(password.encode(), expected.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""
