"""Delegation tokens (KIP-48), as Kafka's DelegationTokenControlManager and DelegationTokenCache.

Sans-IO: an injected clock in (`now_ms()`), records and answers out. State changes only through `apply()` (when a
change is committed to the metadata journal and when the journal is replayed), so the tokens served and the tokens
rebuilt on start are the same:
- DelegationTokenRecord (10): a token created, renewed or given a shorter life (the whole token each time),
- RemoveDelegationTokenRecord (26): a token expired at once, or removed by the expiry sweep.

A token's HMAC is HmacSHA512(delegation.token.secret.key, token id); it is never journaled but computed again from
the key, as Kafka does. The HMAC in base64 is the password of the token's SCRAM credentials (one per mechanism, a
random salt, the mechanism's minimum iterations); they are derived on first use, off the event loop
(`prepare_credentials`), and never stored.

Tokens are disabled (DELEGATION_TOKEN_AUTH_DISABLED, no token authentication) while no secret key is configured.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import structlog

from broker.security.scram import MECHANISMS, ScramCredential, ScramMechanism, TokenCredential
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

DELEGATION_TOKEN_RECORD = 10
REMOVE_DELEGATION_TOKEN_RECORD = 26
RECORD_TYPES = (DELEGATION_TOKEN_RECORD, REMOVE_DELEGATION_TOKEN_RECORD)
USER_TYPE = "User"
LONG_MAX = (1 << 63) - 1


def split_principal(principal: str) -> tuple[str, str]:
    """"User:alice" -> ("User", "alice") (Kafka's KafkaPrincipal: the type is what precedes the first colon)."""
    kind, _, name = principal.partition(":")
    return kind, name


def _sum(now: int, duration: int) -> int:
    # Kafka's saturating addition: a huge lifetime does not overflow past Long.MAX_VALUE
    return LONG_MAX if now > LONG_MAX - duration else now + duration


def new_token_id() -> str:
    """A token id as Kafka makes one (Uuid.randomUuid().toString()): 16 random bytes in URL-safe base64 without
    padding, 22 characters, never starting with '-'. It is the SCRAM user name a client logs in with."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


@dataclass(frozen=True, slots=True)
class TokenInfo:
    token_id: str
    owner: str  # principal strings, "User:alice"
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms

    def record(self) -> tuple[int, dict]:
        return DELEGATION_TOKEN_RECORD, {
            "owner": self.owner, "requester": self.requester, "renewers": list(self.renewers),
            "issue_timestamp": self.issue_ms, "max_timestamp": self.max_ms,
            "expiration_timestamp": self.expiry_ms, "token_id": self.token_id}


@dataclass(frozen=True, slots=True)
class Created:
    error: ErrorCode
    token: TokenInfo | None = None
    hmac: bytes = b""


class DelegationTokenManager:
    def __init__(self, *, secret_key: str | None, max_lifetime_ms: int, renew_ms: int,
                 now_ms: Callable[[], int]) -> None:
        self._key = secret_key.encode() if secret_key else None
        self.max_lifetime_ms = max_lifetime_ms
        self.renew_ms = renew_ms
        self._now = now_ms
        self._tokens: dict[str, TokenInfo] = {}
        self._by_hmac: dict[bytes, str] = {}
        self._credentials: dict[tuple[str, int], ScramCredential] = {}

    @property
    def enabled(self) -> bool:
        return self._key is not None

    def __len__(self) -> int:
        return len(self._tokens)

    def hmac(self, token_id: str) -> bytes:
        assert self._key is not None
        return hmac.new(self._key, token_id.encode(), hashlib.sha512).digest()

    def token(self, token_id: str) -> TokenInfo | None:
        return self._tokens.get(token_id)

    def tokens(self) -> list[TokenInfo]:
        return list(self._tokens.values())

    # --- records ---------------------------------------------------------------------------------------------
    def apply(self, record_type: int, value) -> None:
        if record_type == DELEGATION_TOKEN_RECORD:
            token = TokenInfo(value["token_id"], value["owner"], value["requester"], tuple(value["renewers"]),
                              value["issue_timestamp"], value["max_timestamp"], value["expiration_timestamp"])
            self._tokens[token.token_id] = token
            if self._key is not None:
                self._by_hmac[self.hmac(token.token_id)] = token.token_id
        elif record_type == REMOVE_DELEGATION_TOKEN_RECORD:
            token_id = value["token_id"]
            if self._tokens.pop(token_id, None) is None:
                log.warning("metadata journal removes an unknown delegation token", token_id=token_id)
            if self._key is not None:
                self._by_hmac.pop(self.hmac(token_id), None)
            for mechanism in MECHANISMS.values():
                self._credentials.pop((token_id, mechanism.type), None)

    # --- SCRAM -----------------------------------------------------------------------------------------------
    def prepare_credentials(self, token_ids: Iterable[str] | None = None) -> None:
        """Derive the SCRAM credentials of these tokens (all: None). Blocking (PBKDF2): run in a worker thread."""
        if self._key is None:
            return
        for token_id in list(self._tokens) if token_ids is None else token_ids:
            for mechanism in MECHANISMS.values():
                self._credential(mechanism, token_id)

    def _credential(self, mechanism: ScramMechanism, token_id: str) -> ScramCredential:
        key = (token_id, mechanism.type)
        credential = self._credentials.get(key)
        if credential is None:
            password = base64.b64encode(self.hmac(token_id)).decode()
            credential = ScramCredential.from_password(mechanism, password, mechanism.min_iterations)
            self._credentials[key] = credential
        return credential

    def lookup(self, mechanism: ScramMechanism, token_id: str) -> TokenCredential | None:
        """The credential of a token for SCRAM token authentication (None: unknown token or tokens disabled).
        An expired token not yet removed by the sweep still authenticates, as in Kafka; its session ends at its
        expiry."""
        token = self._tokens.get(token_id)
        if token is None or self._key is None:
            return None
        return TokenCredential(self._credential(mechanism, token_id), split_principal(token.owner)[1],
                               token.expiry_ms)

    # --- CreateDelegationToken -------------------------------------------------------------------------------
    def create(self, requester: str, owner: str, renewers: list[str],
               max_lifetime_ms: int) -> tuple[list[tuple[int, dict]], Created]:
        """The controller's part (the handler has checked the connection, the ACL and the renewers' type)."""
        if self._key is None:
            return [], Created(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        if any(split_principal(r)[0] != USER_TYPE for r in renewers):
            return [], Created(ErrorCode.INVALID_PRINCIPAL_TYPE)
        now = self._now()
        lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(self.max_lifetime_ms, max_lifetime_ms)
        max_ms = _sum(now, lifetime)
        expiry_ms = min(max_ms, _sum(now, self.renew_ms))
        token = TokenInfo(new_token_id(), owner, requester, tuple(renewers), now, max_ms, expiry_ms)
        return [token.record()], Created(ErrorCode.NONE, token, self.hmac(token.token_id))

    # --- RenewDelegationToken / ExpireDelegationToken --------------------------------------------------------
    def renew(self, principal: str, token_hmac: bytes,
              renew_period_ms: int) -> tuple[list[tuple[int, dict]], ErrorCode, int]:
        """-> (records, error, new expiry timestamp; 0 with an error, as Kafka's controller answers)."""
        token, error = self._find(token_hmac)
        if token is None:
            return [], error, 0
        now = self._now()
        if token.expired(now):
            return [], ErrorCode.DELEGATION_TOKEN_EXPIRED, 0
        if not token.owner_or_renewer(principal):
            return [], ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, 0
        period = self.renew_ms if renew_period_ms <= 0 else min(self.renew_ms, renew_period_ms)
        expiry = min(token.max_ms, now + period)
        return [replace(token, expiry_ms=expiry).record()], ErrorCode.NONE, expiry

    def expire(self, principal: str, token_hmac: bytes,
               expiry_period_ms: int) -> tuple[list[tuple[int, dict]], ErrorCode, int]:
        """A negative period removes the token at once; otherwise its expiry moves to now + period (never past
        its maximum). Kafka checks ownership before expiry here (the other way round from renew)."""
        token, error = self._find(token_hmac)
        if token is None:
            return [], error, 0
        if not token.owner_or_renewer(principal):
            return [], ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, 0
        now = self._now()
        if expiry_period_ms < 0:
            return [(REMOVE_DELEGATION_TOKEN_RECORD, {"token_id": token.token_id})], ErrorCode.NONE, now
        if token.expired(now):
            return [], ErrorCode.DELEGATION_TOKEN_EXPIRED, 0
        expiry = min(token.max_ms, _sum(now, expiry_period_ms))
        return [replace(token, expiry_ms=expiry).record()], ErrorCode.NONE, expiry

    def _find(self, token_hmac: bytes) -> tuple[TokenInfo | None, ErrorCode]:
        if self._key is None:
            return None, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        token_id = self._by_hmac.get(bytes(token_hmac))
        token = self._tokens.get(token_id) if token_id is not None else None
        return token, ErrorCode.DELEGATION_TOKEN_NOT_FOUND if token is None else ErrorCode.NONE

    # --- DescribeDelegationToken -----------------------------------------------------------------------------
    def describe(self, requester: str, owners: list[str] | None,
                 may_describe: Callable[[TokenInfo], bool]) -> list[TokenInfo]:
        """Kafka's filterToken: tokens owned or renewable by one of `owners` (None: any), of which the requester
        sees those it owns or may renew, and others only when `may_describe(token)` (the ACL checks)."""
        out = []
        for token in self._tokens.values():
            if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
                continue
            if token.owner_or_renewer(requester) or may_describe(token):
                out.append(token)
        return out

    # --- the expiry sweep ------------------------------------------------------------------------------------
    def sweep(self) -> list[tuple[int, dict]]:
        """Records removing every token past its expiry or maximum (delegation.token.expiry.check.interval.ms)."""
        now = self._now()
        records = []
        for token in self._tokens.values():
            if token.expired(now):
                log.info("delegation token expired", token_id=token.token_id, owner=token.owner)
                records.append((REMOVE_DELEGATION_TOKEN_RECORD, {"token_id": token.token_id}))
        return records
