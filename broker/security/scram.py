"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, as Kafka runs them.

Kafka keeps, per user and mechanism, the salt, the iteration count, StoredKey = H(HMAC(SaltedPassword,
"Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key"); the password and the salted password are never
stored. Clients send the salted password when they create a credential (AlterUserScramCredentials), and the broker
derives the two keys from it. Mechanism type codes (1, 2) and the iteration bounds (4096..16384) are Kafka's.

`ScramServer` is one exchange: `evaluate(client_first)` returns the server-first message, `evaluate(client_final)`
the server-final message; a failure raises `SaslFailure` (standard message to the client) or
`SaslAuthenticationError` (its own message to the client), as Kafka's ScramSaslServer does.

Delegation tokens (KIP-48): a client-first message with the extension `tokenauth=true` names a token id as its
user and proves the token's HMAC (base64) as its password; the credential comes from `token_lookup`, the
authenticated user is the token's owner, and the session may not outlive the token (`credential_expiry_ms`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from broker.security.sasl_errors import SaslAuthenticationError, SaslFailure


@dataclass(frozen=True)
class ScramMechanism:
    name: str
    type: int  # Kafka's ScramMechanism code in the admin APIs and records
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        # Hi() of RFC 5802 is PBKDF2 with HMAC as the PRF and one block of output. Kafka does not SASLprep.
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE: dict[int, ScramMechanism] = {m.type: m for m in MECHANISMS.values()}


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(salt, mechanism.hash(client_key), mechanism.hmac(salted_password, b"Server Key"), iterations)

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, iterations: int = 4096,
                      salt: bytes | None = None) -> ScramCredential:
        salt = secrets.token_bytes(16) if salt is None else salt
        return cls.from_salted_password(mechanism, salt, mechanism.salted_password(password, salt, iterations),
                                        iterations)


@dataclass(frozen=True, slots=True)
class TokenCredential:
    """What the SCRAM server needs to authenticate with a delegation token (broker.security.delegation_tokens
    looks it up)."""

    credential: ScramCredential
    owner: str  # the owner's principal name: the authenticated principal is User:<owner name>, as Kafka
    expiry_ms: int


# --- message grammar (RFC 5802 section 7, restricted as Kafka's ScramMessages) ---------------------------------
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # 7-bit, no comma
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
# Only the gs2 header "n" (no channel binding) is accepted, as in Kafka.
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))", re.S)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_B64})", re.S)


def username_from_saslname(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


def saslname_from_username(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _extensions(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(",")[1:]:
        key, _, value = item.partition("=")
        out[key] = value
    return out


def new_server_nonce() -> str:
    return secrets.token_urlsafe(24)


class ScramServer:
    """One server-side SCRAM exchange. `lookup(username)` returns the user's credential for this mechanism."""

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], ScramCredential | None],
                 nonce: Callable[[], str] = new_server_nonce,
                 token_lookup: Callable[[str], TokenCredential | None] | None = None) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._nonce = nonce
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._gs2 = b""
        self._client_first_bare = b""
        self._server_first = b""
        self._combined_nonce = ""
        self.authorization_id: str | None = None  # the authenticated user once complete
        self.token_authenticated = False  # with a delegation token (Kafka's KafkaPrincipal.tokenAuthenticated)
        self.credential_expiry_ms: int | None = None  # the token's expiry (wall clock), which ends the session

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, response: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._client_first(response)
            if self._state == "final":
                return self._client_final(response)
            raise SaslFailure(f"unexpected SCRAM message in state {self._state}")
        except (SaslFailure, SaslAuthenticationError):
            self._state = "failed"
            self._credential = None
            raise

    def _client_first(self, response: bytes) -> bytes:
        text = _ascii(response, "client first message")
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslFailure("Invalid SCRAM client first message format")
        extensions = _extensions(match["extensions"])
        username = username_from_saslname(match["saslname"])
        credential: ScramCredential | None
        if extensions.get("tokenauth", "").lower() == "true":  # Boolean.parseBoolean, as Kafka
            token = self._token_lookup(username) if self._token_lookup is not None else None
            if token is None:
                raise SaslFailure(f"Token Authentication failed: Invalid tokenId : {username}")
            credential, authorization_id = token.credential, token.owner
            self.token_authenticated, self.credential_expiry_ms = True, token.expiry_ms
        else:
            credential, authorization_id = self._lookup(username), username
        if credential is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        authzid = match["authzid"]
        if authzid and username_from_saslname(authzid) != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < self.mechanism.min_iterations:
            raise SaslFailure(f"Iterations {credential.iterations} is less than the minimum "
                              f"{self.mechanism.min_iterations} for {self.mechanism.name}")
        self._credential = credential
        self._gs2 = match["gs2"].encode()
        self._client_first_bare = match["bare"].encode()
        self._combined_nonce = match["nonce"] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._combined_nonce},s={salt},i={credential.iterations}".encode()
        self.authorization_id = authorization_id
        self._state = "final"
        return self._server_first

    def _client_final(self, response: bytes) -> bytes:
        text = _ascii(response, "client final message")
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslFailure("Invalid SCRAM client final message format")
        if match["nonce"] != self._combined_nonce:
            raise SaslFailure("Invalid client nonce in the final client message.")
        if base64.b64decode(match["channel"]) != self._gs2:
            raise SaslFailure("Channel binding does not match the gs2 header of the client first message")
        credential = self._credential
        assert credential is not None
        proof = base64.b64decode(match["proof"])
        auth_message = self._client_first_bare + b"," + self._server_first + b"," + match["without_proof"].encode()
        client_signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise SaslFailure("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise SaslFailure("Invalid client credentials")
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        return b"v=" + base64.b64encode(server_signature)


def _ascii(data: bytes, what: str) -> str:
    try:
        return bytes(data).decode("ascii")
    except UnicodeDecodeError:
        raise SaslFailure(f"Invalid SCRAM {what}: not 7-bit") from None


class ScramClient:
    """The client side, for tests and tools (the broker never authenticates to anyone)."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None,
                 extensions: dict[str, str] | None = None) -> None:
        """`extensions={"tokenauth": "true"}` authenticates with a delegation token (username = token id,
        password = the token's HMAC in base64)."""
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.nonce = nonce or new_server_nonce()
        extra = "".join(f",{key}={value}" for key, value in (extensions or {}).items())
        self._bare = f"n={saslname_from_username(username)},r={self.nonce}{extra}"
        self._server_signature = b""

    def first(self) -> bytes:
        return ("n,," + self._bare).encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        if not fields["r"].startswith(self.nonce):
            raise ValueError("server nonce does not extend the client nonce")
        salt = base64.b64decode(fields["s"])
        iterations = int(fields["i"])
        salted = self.mechanism.salted_password(self.password, salt, iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={fields['r']}"
        auth_message = f"{self._bare},{server_first.decode()},{without_proof}".encode()
        client_key = self.mechanism.hmac(salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self.mechanism.hmac(self.mechanism.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        return server_final == b"v=" + base64.b64encode(self._server_signature)
