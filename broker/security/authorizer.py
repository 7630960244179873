"""The ACL authorizer: ACLs as metadata records, and Kafka's StandardAuthorizer decision rules.

State changes only through `apply(record_type, value)` (AccessControlEntryRecord / RemoveAccessControlEntryRecord),
both when a CreateAcls/DeleteAcls commits and when the metadata journal is replayed, so the two cannot drift.
`create()` and `delete()` validate and return the records to commit plus the per-item results.

A decision (`authorize`) follows Kafka:
- a principal listed in `super.users` may do anything;
- the ACLs that apply to a resource are the LITERAL ones on its name, the LITERAL wildcard `*` and the PREFIXED ones
  whose prefix starts the name; of those, an ACL counts when its principal is the caller's or `User:*` and its host
  is `*`, the caller's address or a CIDR range holding it;
- a DENY for the operation (or ALL) wins; else an ALLOW for the operation, ALL, or one that implies it (READ, WRITE,
  DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; only for ALLOW) allows;
- when no ACL at all names the resource, `allow.everyone.if.no.acl.found` decides; otherwise the answer is deny.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from broker.security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    host_matches,
)
from broker.security.config import SecurityConfig
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)
audit = structlog.get_logger("broker.authorizer")

ACCESS_CONTROL_ENTRY_RECORD = 18
REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: one CreateAcls/DeleteAcls may not write more records.
MAX_RECORDS_PER_USER_OP = 10_000

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                               AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


@dataclass(frozen=True, slots=True)
class Result:
    """One CreateAcls creation result or DeleteAcls filter result."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    deleted: tuple[AclBinding, ...] = ()


_SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def supported_operations(resource_type: ResourceType) -> tuple[AclOperation, ...]:
    """The operations that mean something for a resource type (Kafka's AclEntry.supportedOperations)."""
    return _SUPPORTED_OPERATIONS[resource_type]


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:ops`)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


def binding_from_record(value) -> AclBinding:
    return AclBinding(ResourceType.of(value["resource_type"]), value["resource_name"],
                      PatternType.of(value["pattern_type"]), value["principal"], value["host"],
                      AclOperation.of(value["operation"]), PermissionType.of(value["permission_type"]))


def record_from_binding(acl_id: uuid.UUID, acl: AclBinding) -> dict:
    return {"id": acl_id, "resource_type": int(acl.resource_type), "resource_name": acl.name,
            "pattern_type": int(acl.pattern_type), "principal": acl.principal, "host": acl.host,
            "operation": int(acl.operation), "permission_type": int(acl.permission)}


class Authorizer:
    def __init__(self, *, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = SecurityConfig().allow_everyone_if_no_acl_found,
                 new_id: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._new_id = new_id
        self._by_id: dict[uuid.UUID, AclBinding] = {}
        self._ids: dict[AclBinding, uuid.UUID] = {}
        # Indexes for decisions: LITERAL by (type, name) (the wildcard is name "*"), PREFIXED by type then prefix.
        self._literal: dict[tuple[ResourceType, str], set[AclBinding]] = {}
        self._prefixed: dict[ResourceType, dict[str, set[AclBinding]]] = {}
        # Moves on with every ACL added or removed: decisions cached elsewhere (regex subscriptions) are redone.
        self.version = 0

    # --- state ---------------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._by_id)

    def apply(self, record_type: int, value) -> None:
        self.version += 1
        acl: AclBinding | None
        if record_type == ACCESS_CONTROL_ENTRY_RECORD:
            acl = binding_from_record(value)
            acl_id = value["id"]
            self._by_id[acl_id] = acl
            self._ids[acl] = acl_id
            self._index(acl).add(acl)
        elif record_type == REMOVE_ACCESS_CONTROL_ENTRY_RECORD:
            acl = self._by_id.pop(value["id"], None)
            if acl is None:
                log.warning("metadata journal removes an unknown ACL id", acl_id=str(value["id"]))
                return
            self._ids.pop(acl, None)
            bucket = self._index(acl)
            bucket.discard(acl)
            if not bucket:
                self._drop_index(acl)

    def _index(self, acl: AclBinding) -> set[AclBinding]:
        if acl.pattern_type == PatternType.PREFIXED:
            return self._prefixed.setdefault(acl.resource_type, {}).setdefault(acl.name, set())
        return self._literal.setdefault((acl.resource_type, acl.name), set())

    def _drop_index(self, acl: AclBinding) -> None:
        if acl.pattern_type == PatternType.PREFIXED:
            by_prefix = self._prefixed[acl.resource_type]
            del by_prefix[acl.name]
            if not by_prefix:
                del self._prefixed[acl.resource_type]
        else:
            del self._literal[(acl.resource_type, acl.name)]

    # --- admin ---------------------------------------------------------------------------------------------------
    def acls(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        return [acl for acl in self._by_id.values() if flt is None or flt.matches(acl)]

    def create(self, bindings: list[AclBinding]) -> tuple[list[tuple[int, dict]], list[Result]]:
        """Validate each binding; an ACL that exists already (or twice in the request) succeeds without a record."""
        records: list[tuple[int, dict]] = []
        results: list[Result] = []
        added: set[AclBinding] = set()
        for acl in bindings:
            try:
                acl.validate()
            except AclError as err:
                results.append(Result(ErrorCode.INVALID_REQUEST, str(err)))
                continue
            if acl not in self._ids and acl not in added:
                if len(records) >= MAX_RECORDS_PER_USER_OP:
                    raise AclError(f"Cannot create more than {MAX_RECORDS_PER_USER_OP} acls in a single request.")
                added.add(acl)
                acl_id = self._new_id()
                while acl_id in self._by_id:
                    acl_id = self._new_id()
                records.append((ACCESS_CONTROL_ENTRY_RECORD, record_from_binding(acl_id, acl)))
            results.append(Result())
        return records, results

    def delete(self, filters: list[AclBindingFilter]) -> tuple[list[tuple[int, dict]], list[Result]]:
        """Each filter removes the ACLs it matches. More than MAX_RECORDS_PER_USER_OP removals fail the whole request
        (AclError, INVALID_REQUEST), as Kafka refuses partial results."""
        removed: dict[uuid.UUID, None] = {}
        results: list[Result] = []
        for flt in filters:
            if flt.resource_type == ResourceType.UNKNOWN or flt.pattern_type == PatternType.UNKNOWN:
                results.append(Result(ErrorCode.INVALID_REQUEST, "Unknown patternFilter."))
                continue
            if flt.operation == AclOperation.UNKNOWN or flt.permission == PermissionType.UNKNOWN:
                results.append(Result(ErrorCode.INVALID_REQUEST, "Unknown entryFilter."))
                continue
            matched = []
            for acl_id, acl in self._by_id.items():
                if flt.matches(acl):
                    if acl_id not in removed and len(removed) >= MAX_RECORDS_PER_USER_OP:
                        raise AclError(f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete "
                                       "operation.")
                    removed[acl_id] = None
                    matched.append(acl)
            results.append(Result(deleted=tuple(matched)))
        return [(REMOVE_ACCESS_CONTROL_ENTRY_RECORD, {"id": acl_id}) for acl_id in removed], results

    # --- decisions -----------------------------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        found_any = False
        allowed = False
        for acl in self._applicable(resource_type, name):
            found_any = True
            if acl.principal not in principals or not host_matches(acl.host, host):
                continue
            if acl.permission == PermissionType.DENY:
                if acl.operation in (AclOperation.ALL, operation):
                    return False
            elif not allowed and _allow_covers(acl.operation, operation):
                allowed = True
        if allowed:
            return True
        return not found_any and self.allow_everyone_if_no_acl_found

    def _applicable(self, resource_type: ResourceType, name: str) -> Iterable[AclBinding]:
        literal = self._literal
        yield from literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from literal.get((resource_type, WILDCARD), ())
        by_prefix = self._prefixed.get(resource_type)
        if by_prefix:
            if len(by_prefix) < len(name):
                for prefix, acls in by_prefix.items():
                    if name.startswith(prefix):
                        yield from acls
            else:
                for end in range(1, len(name) + 1):
                    yield from by_prefix.get(name[:end], ())

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Could the principal do `operation` on some resource of this type? Kafka's default
        Authorizer.authorizeByResourceType: an ALLOW (LITERAL or PREFIXED) not dominated by a DENY."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for acl in self._by_id.values():
            if acl.resource_type != resource_type:
                continue
            if acl.host not in (host, WILDCARD) or acl.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.permission == PermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                    return False
                deny[acl.pattern_type].add(acl.name)
            elif acl.permission == PermissionType.ALLOW:
                if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                    return True
                allow[acl.pattern_type].add(acl.name)
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:end] in deny[PatternType.PREFIXED] for end in range(1, len(name) + 1)):
                    return True
        return False


def _allow_covers(acl_operation: AclOperation, operation: AclOperation) -> bool:
    if acl_operation in (AclOperation.ALL, operation):
        return True
    if operation == AclOperation.DESCRIBE:
        return acl_operation in _IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return acl_operation in _IMPLIES_DESCRIBE_CONFIGS
    return False
