"""Kafka's ACL model: resource types, pattern types, operations, permissions, bindings and binding filters.

Codes are Kafka's (`org.apache.kafka.common.acl` / `common.resource`); a code this broker does not know decodes as
UNKNOWN, as Kafka's `fromCode` does. Filters match bindings as Kafka's ResourcePatternFilter and
AccessControlEntryFilter: a null name/principal/host matches anything, ANY matches any type/operation/permission,
and the MATCH pattern type matches the literal name, the literal wildcard `*` and every PREFIXED pattern that
is a prefix of the name.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import IntEnum

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
ANONYMOUS = "User:ANONYMOUS"


class _Coded(IntEnum):
    @classmethod
    def of(cls, code: int):
        try:
            return cls(code)
        except ValueError:
            return cls(0)  # UNKNOWN


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Kafka's authorization error per resource type, with Errors' default message (sent where Kafka sends it).
AUTHORIZATION_ERRORS = {
    2: (29, "Topic authorization failed."),  # TOPIC: TOPIC_AUTHORIZATION_FAILED
    3: (30, "Group authorization failed."),  # GROUP: GROUP_AUTHORIZATION_FAILED
    4: (31, "Cluster authorization failed."),  # CLUSTER: CLUSTER_AUTHORIZATION_FAILED
    5: (53, "Transactional Id authorization failed."),  # TRANSACTIONAL_ID
}


class AclError(ValueError):
    """An ACL or filter that Kafka refuses with INVALID_REQUEST; str(self) is Kafka's message."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def validate(self) -> None:
        """Kafka's checks for a new ACL (AclApis + AclControlManager.validateNewAcl), first failure wins."""
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if not self.name:
            raise AclError("Invalid empty resource name")
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise AclError(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise AclError(f"Invalid operation {self.operation.name}")
        if self.permission not in (PermissionType.ALLOW, PermissionType.DENY):
            raise AclError(f"Invalid permissionType {self.permission.name}")
        if ":" not in self.principal:
            raise AclError(f"Could not parse principal from `{self.principal}` (no colon is present separating the "
                           "principal type from the principal name)")
        validate_host(self.host)


def validate_host(host: str) -> None:
    if not host:
        raise AclError("Host pattern cannot be null or empty")
    if host != WILDCARD and "/" in host:
        problem = _cidr_problem(host)
        if problem is not None:
            raise AclError(f"Invalid CIDR notation '{host}': {problem}")


_IPV4_CIDR = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})/([0-9]{1,2})")


def _cidr_problem(host: str) -> str | None:
    """What Kafka's CIDR parsing says of a range it refuses (IPv4 as commons-net's SubnetUtils, IPv6 as its
    IPv6 parser), None for a valid one."""
    match = _IPV4_CIDR.fullmatch(host)
    if match is not None:
        for octet in match.groups()[:4]:
            if int(octet) > 255:
                return f"Value [{int(octet)}] not in range [0,255]"
        if int(match.group(5)) > 32:
            return f"Value [{int(match.group(5))}] not in range [0,32]"
        return None
    address, _, prefix = host.partition("/")
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return f"Could not parse [{host}]"
    if not prefix.isdigit():
        return f"Could not parse [{host}]"
    if int(prefix) > 128:
        return f"Could not parse [{host}] - prefix length must be between 0 and 128"
    return None


def host_matches(acl_host: str, client_host: str) -> bool:
    """`*`, the exact address, or (Kafka 4.4+) an address inside a CIDR range."""
    if acl_host in (WILDCARD, client_host):
        return True
    if "/" not in acl_host:
        return False
    try:
        return ipaddress.ip_address(client_host) in ipaddress.ip_network(acl_host, strict=False)
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def has_unknown(self) -> bool:
        return 0 in (self.resource_type, self.pattern_type, self.operation, self.permission)

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.name == acl.name
        # MATCH against a LITERAL or PREFIXED pattern.
        if acl.pattern_type == PatternType.LITERAL:
            return self.name == acl.name or acl.name == WILDCARD
        return self.name.startswith(acl.name)

    def _matches_entry(self, acl: AclBinding) -> bool:
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission == PermissionType.ANY or self.permission == acl.permission
