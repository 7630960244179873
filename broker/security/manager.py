"""The `security` component: SCRAM credentials, delegation tokens and ACLs (kept in the metadata journal), the
authorizer decision for a connection, and the SASL settings of each listener.

Credentials, tokens and ACLs change only by records: `commit(records)` appends them to the metadata journal (fsynced)
and then applies them, and `load()` applies the journal's records on start. ACLs are kept even while no
authorizer is configured (`authorizer.class.name` empty: every request is allowed and the ACL APIs answer
SECURITY_DISABLED), so turning the authorizer on later finds them.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from typing import Any

import structlog

from broker.config import ConfigError
from broker.security import tls
from broker.security.acl import AclOperation, ResourceType
from broker.security.authorizer import (
    ACCESS_CONTROL_ENTRY_RECORD,
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
    Authorizer,
    parse_super_users,
)
from broker.security.config import ListenerConfig, SecurityConfig
from broker.security.credentials import (
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
    USER_SCRAM_CREDENTIAL_RECORD,
    ScramCredentialStore,
)
from broker.security.delegation_tokens import RECORD_TYPES as _TOKEN_RECORDS
from broker.security.delegation_tokens import DelegationTokenManager
from broker.security.jaas import JaasError, plain_users
from broker.security.listener import ListenerSecurity
from broker.security.plain import PlainServer
from broker.security.sasl import SaslAuthenticator
from broker.security.scram import MECHANISMS, ScramCredential, ScramServer

log = structlog.get_logger(__name__)

_CREDENTIAL_RECORDS = (USER_SCRAM_CREDENTIAL_RECORD, REMOVE_USER_SCRAM_CREDENTIAL_RECORD)
_ACL_RECORDS = (ACCESS_CONTROL_ENTRY_RECORD, REMOVE_ACCESS_CONTROL_ENTRY_RECORD)


_SCRAM_FIELD = re.compile(r'\s*(?P<key>[A-Za-z]+)=(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^,]*))\s*(?:,|$)')
_ADD_SCRAM = re.compile(r"^(?P<mechanism>[A-Z0-9-]+)=\[(?P<body>.*)\]$", re.S)


def parse_add_scram(text: str) -> tuple[str, str, str, int]:
    """`SCRAM-SHA-256=[name=alice,password=alice-secret(,iterations=8192)]` (kafka-storage's --add-scram syntax;
    quotes around values are allowed) -> (mechanism, user, password, iterations)."""
    match = _ADD_SCRAM.match(text.strip())
    if match is None or match["mechanism"] not in MECHANISMS:
        raise ConfigError(f"{text!r} is not MECHANISM=[name=...,password=...] with mechanism "
                          f"{' or '.join(MECHANISMS)}")
    fields: dict[str, str] = {}
    body = match["body"]
    pos = 0
    while pos < len(body):
        item = _SCRAM_FIELD.match(body, pos)
        if item is None:
            raise ConfigError(f"cannot read {body[pos:]!r} in {text!r}: expected key=value")
        value = item["quoted"]
        fields[item["key"]] = re.sub(r'\\(.)', r"\1", value) if value is not None else item["bare"].strip()
        pos = item.end()
    mechanism = MECHANISMS[match["mechanism"]]
    if not fields.get("name") or not fields.get("password"):
        raise ConfigError(f"{text!r} needs name= and password=")
    try:
        iterations = int(fields.get("iterations", mechanism.min_iterations))
    except ValueError:
        raise ConfigError(f"iterations in {text!r} is not a number") from None
    if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
        raise ConfigError(f"iterations must be between {mechanism.min_iterations} and {mechanism.max_iterations}")
    return mechanism.name, fields["name"], fields["password"], iterations


class SecurityManager:
    def __init__(self, config, journal) -> None:
        self.config = config
        self.settings = settings = SecurityConfig.from_config(config)
        self._journal = journal
        self.credentials = ScramCredentialStore()
        self.tokens = DelegationTokenManager(
            secret_key=settings.delegation_token_secret_key,
            max_lifetime_ms=settings.delegation_token_max_lifetime_ms,
            renew_ms=settings.delegation_token_expiry_time_ms, now_ms=lambda: int(time.time() * 1000))
        self.enforcing = bool(settings.authorizer_class_name)
        self.acls = Authorizer(super_users=parse_super_users(settings.super_users),
                               allow_everyone_if_no_acl_found=settings.allow_everyone_if_no_acl_found)
        self._plain_users: dict[str, dict[str, str]] = {}
        # held from computing records against the current credentials/ACLs until they are applied, so two
        # changes waiting for their journal fsync never decide from the same stale state
        self.changes = asyncio.Lock()
        for listener in config.listeners:
            if config.security_protocol(listener.name).startswith("SASL_") and \
                    "PLAIN" in self.sasl_mechanisms(listener.name):
                try:
                    self._plain_users[listener.name] = plain_users(
                        config.listener_value(listener.name, "sasl.jaas.config", "PLAIN"))
                except JaasError as err:
                    raise ConfigError(f"listener {listener.name}: PLAIN sasl.jaas.config: {err}") from None

    # --- state -----------------------------------------------------------------------------------------------
    def load(self) -> None:
        for record_type, value in self._journal.replay():
            self._apply(record_type, value)
        self.tokens.prepare_credentials()  # PBKDF2 per token: load runs in a worker thread
        log.info("security state loaded", scram_credentials=len(self.credentials), acls=len(self.acls),
                 delegation_tokens=len(self.tokens), authorizer=self.enforcing)

    async def commit(self, records: list[tuple[int, dict]]) -> None:
        """Journal `records` (fsynced in a worker thread), then apply them. Callers that compute records from the
        current state hold `changes` from the computation to here."""
        if not records:
            return

        def apply() -> None:
            for record_type, value in records:
                self._apply(record_type, value)

        await self._journal.commit(records, apply)

    def _apply(self, record_type: int, value: Any) -> None:
        if record_type in _CREDENTIAL_RECORDS:
            self.credentials.apply(record_type, value)
        elif record_type in _ACL_RECORDS:
            self.acls.apply(record_type, value)
        elif record_type in _TOKEN_RECORDS:
            self.tokens.apply(record_type, value)

    async def expire_tokens(self) -> None:
        """Remove the delegation tokens past their expiry (every delegation.token.expiry.check.interval.ms)."""
        async with self.changes:
            await self.commit(self.tokens.sweep())

    async def add_missing_scram(self, entries: list[tuple[str, str, str, int]]) -> None:
        """Start-up credentials (--add-scram): created only for a user without one for that mechanism, so a
        password changed later with AlterUserScramCredentials is not reset by the next start."""
        records: list[tuple[int, dict]] = []
        for mechanism, user, password, iterations in entries:
            scram = MECHANISMS[mechanism]
            if self.credentials.lookup(scram, user) is not None:
                continue
            credential = ScramCredential.from_password(scram, password, iterations)
            records.append((USER_SCRAM_CREDENTIAL_RECORD, {
                "name": user, "mechanism": scram.type, "salt": credential.salt, "stored_key": credential.stored_key,
                "server_key": credential.server_key, "iterations": iterations}))
            log.info("SCRAM credential created", user=user, mechanism=mechanism)
        await self.commit(records)

    # --- authorization ---------------------------------------------------------------------------------------
    def authorize(self, connection, operation: AclOperation, resource_type: ResourceType, name: str,
                  audit: bool = True) -> bool:
        """`audit=False` for questions that grant nothing (authorized-operations fields): denials are not logged."""
        if not self.enforcing:
            return True
        allowed = self.acls.authorize(connection.principal, connection.host, operation, resource_type, name)
        if not allowed and audit:
            log.info("authorization denied", principal=connection.principal, host=connection.host,
                     operation=operation.name, resource_type=resource_type.name, resource=name)
        return allowed

    @property
    def acl_version(self) -> int:
        """Moves on whenever a decision may have changed (an ACL added or removed while an authorizer runs)."""
        return self.acls.version if self.enforcing else 0

    def may_describe_topic(self, principal: str, host: str, topic: str) -> bool:
        """DESCRIBE on a topic for a client identity that is not a connection (a regex subscription's members);
        a denial is not logged, as Kafka's filter of regex matches (logIfDenied=false)."""
        return not self.enforcing or self.acls.authorize(principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                         topic)

    def authorize_by_resource_type(self, connection, operation: AclOperation, resource_type: ResourceType) -> bool:
        if not self.enforcing:
            return True
        return self.acls.authorize_by_resource_type(connection.principal, connection.host, operation, resource_type)

    # --- listeners -------------------------------------------------------------------------------------------
    def listener_security(self, version_range) -> dict[str, ListenerSecurity]:
        """TLS contexts and SASL authenticators per listener (ConfigError when TLS material cannot be loaded).
        `version_range(api_key)` is the router's: the authenticator checks handshake versions against it."""
        config = self.config
        out: dict[str, ListenerSecurity] = {}
        delay_s = self.settings.failed_authentication_delay_ms / 1000
        max_receive = self.settings.sasl_server_max_receive_size
        for listener in config.listeners:
            name = listener.name
            protocol = config.security_protocol(name)
            context = None
            if protocol in ("SSL", "SASL_SSL"):
                context = tls.server_context(self.listener_settings(name), name)
            authenticator = None
            if protocol.startswith("SASL_"):
                authenticator = functools.partial(
                    self._new_authenticator, name, self.sasl_mechanisms(name), version_range,
                    self.listener_settings(name).connections_max_reauth_ms)
            principal = tls.certificate_principal if protocol == "SSL" else None
            out[name] = ListenerSecurity(protocol, context, authenticator, principal, delay_s, max_receive)
        return out

    def _new_authenticator(self, listener: str, mechanisms: list[str], version_range, reauth_ms: int,
                           connection) -> SaslAuthenticator:
        return SaslAuthenticator(listener=listener, mechanisms=mechanisms,
                                 new_server=functools.partial(self.sasl_server, listener),
                                 version_range=version_range, reauth_ms=reauth_ms, connection=connection)

    # --- SASL ------------------------------------------------------------------------------------------------
    def listener_settings(self, listener: str) -> ListenerConfig:
        """The listener's SASL and TLS settings (`listener.name.<listener>.*` values over the broker's)."""
        return ListenerConfig.read(lambda key: self.config.listener_value(listener, key))

    def sasl_mechanisms(self, listener: str) -> list[str]:
        return list(self.listener_settings(listener).sasl_enabled_mechanisms)

    def sasl_server(self, listener: str, mechanism: str):
        """A fresh server-side exchange for one authentication."""
        if mechanism == "PLAIN":
            return PlainServer(self._plain_users.get(listener, {}))
        scram = MECHANISMS[mechanism]
        return ScramServer(scram, lambda user: self.credentials.lookup(scram, user),
                           token_lookup=lambda token_id: self.tokens.lookup(scram, token_id))
