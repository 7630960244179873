"""SCRAM credentials as metadata records (UserScramCredentialRecord / RemoveUserScramCredentialRecord).

Pure state, changed only through `apply()`, both when AlterUserScramCredentials commits and on journal replay.
`alter()` validates a request as Kafka's ScramControlManager does and returns the records to commit with the
per-user results; `describe()` answers DescribeUserScramCredentials as Kafka's ScramImage.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from broker.security.scram import BY_TYPE, ScramCredential, ScramMechanism
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

USER_SCRAM_CREDENTIAL_RECORD = 11
REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism type, iterations), for describe


class ScramCredentialStore:
    def __init__(self) -> None:
        self._credentials: dict[tuple[str, int], ScramCredential] = {}

    def __len__(self) -> int:
        return len(self._credentials)

    def lookup(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism.type))

    def users(self) -> list[str]:
        return sorted({user for user, _ in self._credentials})

    # --- records ---------------------------------------------------------------------------------------------
    def apply(self, record_type: int, value) -> None:
        if record_type == USER_SCRAM_CREDENTIAL_RECORD:
            self._credentials[(value["name"], value["mechanism"])] = ScramCredential(
                bytes(value["salt"]), bytes(value["stored_key"]), bytes(value["server_key"]), value["iterations"])
        elif record_type == REMOVE_USER_SCRAM_CREDENTIAL_RECORD and \
                self._credentials.pop((value["name"], value["mechanism"]), None) is None:
                log.warning("metadata journal removes an unknown SCRAM credential", user=value["name"],
                            mechanism=value["mechanism"])

    # --- DescribeUserScramCredentials --------------------------------------------------------------------------
    def describe(self, users: Iterable[str] | None) -> list[UserResult]:
        """`users` None or empty: every user with a credential."""
        wanted: dict[str, bool] = {}  # user -> named more than once
        for user in (users or self.users()):
            wanted[user] = user in wanted
        results = []
        for user, duplicate in wanted.items():
            if duplicate:
                results.append(UserResult(user, ErrorCode.DUPLICATE_RESOURCE,
                                          f"Cannot describe SCRAM credentials for the same user twice in a single "
                                          f"request: {user}"))
                continue
            infos = tuple((mtype, cred.iterations) for (name, mtype), cred in sorted(self._credentials.items())
                          if name == user)
            if infos:
                results.append(UserResult(user, credentials=infos))
            else:
                results.append(UserResult(user, ErrorCode.RESOURCE_NOT_FOUND,
                                          f"Attempt to describe a user credential that does not exist: {user}"))
        return results

    # --- AlterUserScramCredentials -----------------------------------------------------------------------------
    def alter(self, deletions: list, upsertions: list) -> tuple[list[tuple[int, dict]], list[UserResult]]:
        """`deletions` items have name/mechanism; `upsertions` name/mechanism/iterations/salt/salted_password.
        A user named twice in one request fails (DUPLICATE_RESOURCE) and none of its changes apply."""
        errors: dict[str, tuple[ErrorCode, str]] = {}
        to_delete: dict[str, Any] = {}  # decoded request items
        to_upsert: dict[str, Any] = {}
        duplicate = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        for item in deletions:
            if item.name in errors:
                continue
            if to_delete.pop(item.name, None) is not None:
                errors[item.name] = duplicate
                continue
            error = self._check_deletion(item)
            if error is not None:
                errors[item.name] = error
            else:
                to_delete[item.name] = item
        for item in upsertions:
            if item.name in errors:
                continue
            if to_delete.pop(item.name, None) is not None or to_upsert.pop(item.name, None) is not None:
                errors[item.name] = duplicate
                continue
            error = _check_upsertion(item)
            if error is not None:
                errors[item.name] = error
            else:
                to_upsert[item.name] = item
        records: list[tuple[int, dict]] = []
        results: list[UserResult] = []
        for item in to_delete.values():
            records.append((REMOVE_USER_SCRAM_CREDENTIAL_RECORD, {"name": item.name, "mechanism": item.mechanism}))
            results.append(UserResult(item.name))
        for item in to_upsert.values():
            mechanism = BY_TYPE[item.mechanism]
            credential = ScramCredential.from_salted_password(mechanism, bytes(item.salt), bytes(item.salted_password),
                                                              item.iterations)
            records.append((USER_SCRAM_CREDENTIAL_RECORD, {
                "name": item.name, "mechanism": item.mechanism, "salt": credential.salt,
                "stored_key": credential.stored_key, "server_key": credential.server_key,
                "iterations": credential.iterations}))
            results.append(UserResult(item.name))
        for user, (code, message) in errors.items():
            results.append(UserResult(user, code, message))
        return records, results

    def _check_deletion(self, item) -> tuple[ErrorCode, str] | None:
        error = _check_name_and_mechanism(item.name, item.mechanism)
        if error is None and (item.name, item.mechanism) not in self._credentials:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return error


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _check_upsertion(item) -> tuple[ErrorCode, str] | None:
    error = _check_name_and_mechanism(item.name, item.mechanism)
    if error is not None:
        return error
    mechanism = BY_TYPE[item.mechanism]
    if item.iterations < mechanism.min_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if item.iterations > mechanism.max_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None
