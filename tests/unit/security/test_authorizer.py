"""The ACL model and authorizer: Kafka's matching rules, records and replay, against a brute-force reference."""

from __future__ import annotations

import itertools
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from broker.security.authorizer import Authorizer, parse_super_users
from protocol.errors import ErrorCode

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
R, W, D, A, ALL = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.ALL
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
HOST = "127.0.0.1"


def acl(name, op, perm=ALLOW, *, rtype=T, pattern=LIT, principal="User:alice", host="*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer_with(*acls: AclBinding, **kw) -> Authorizer:
    auth = Authorizer(**kw)
    records, results = auth.create(list(acls))
    assert all(r.error == ErrorCode.NONE for r in results), results
    for record in records:
        auth.apply(*record)
    return auth


def allowed(auth, op, name, rtype=T, principal="User:alice", host=HOST) -> bool:
    return auth.authorize(principal, host, op, rtype, name)


def test_no_acls_uses_allow_everyone() -> None:
    assert not allowed(Authorizer(), R, "t")
    assert allowed(Authorizer(allow_everyone_if_no_acl_found=True), R, "t")


def test_an_acl_for_someone_else_removes_the_default() -> None:
    auth = authorizer_with(acl("t", R, principal="User:bob"), allow_everyone_if_no_acl_found=True)
    assert not allowed(auth, R, "t")
    assert allowed(auth, R, "t", principal="User:bob")
    assert allowed(auth, R, "other")  # no ACL names "other"


def test_literal_wildcard_and_prefixed_patterns() -> None:
    auth = authorizer_with(acl("orders", R), acl("*", W), acl("logs-", AclOperation.CREATE, pattern=PRE))
    assert allowed(auth, R, "orders") and not allowed(auth, R, "orders2")
    assert allowed(auth, W, "anything") and allowed(auth, W, "orders")
    cr = AclOperation.CREATE
    assert allowed(auth, cr, "logs-app") and allowed(auth, cr, "logs-") and not allowed(auth, cr, "logs")
    assert not allowed(auth, R, "orders", rtype=G)  # resource types are separate


def test_deny_wins_and_all_matches_every_operation() -> None:
    auth = authorizer_with(acl("*", ALL), acl("secret", R, DENY))
    assert allowed(auth, W, "secret") and not allowed(auth, R, "secret") and allowed(auth, R, "open")
    auth = authorizer_with(acl("t", R), acl("t", ALL, DENY, principal="User:*"))
    assert not allowed(auth, R, "t") and not allowed(auth, D, "t")
    auth = authorizer_with(acl("t", R), acl("t-", R, DENY, pattern=PRE))
    assert allowed(auth, R, "t") and not allowed(auth, R, "t-x")


def test_implied_operations_only_for_allow() -> None:
    for op in (R, W, AclOperation.DELETE, A):
        assert allowed(authorizer_with(acl("t", op)), D, "t"), op
    assert not allowed(authorizer_with(acl("t", AclOperation.CREATE)), D, "t")
    auth = authorizer_with(acl("t", AclOperation.ALTER_CONFIGS))
    assert allowed(auth, AclOperation.DESCRIBE_CONFIGS, "t") and not allowed(auth, AclOperation.ALTER, "t")
    # A DENY on READ does not deny DESCRIBE (implication is for ALLOW only).
    auth = authorizer_with(acl("t", D), acl("t", R, DENY))
    assert allowed(auth, D, "t") and not allowed(auth, R, "t")
    assert not allowed(authorizer_with(acl("t", D)), R, "t")  # DESCRIBE does not imply READ


def test_principals_and_hosts() -> None:
    auth = authorizer_with(acl("t", R, principal="User:*", host="10.0.0.1"), acl("u", R, host="10.1.0.0/16"))
    assert allowed(auth, R, "t", principal="User:anyone", host="10.0.0.1")
    assert not allowed(auth, R, "t", host="10.0.0.2")
    assert allowed(auth, R, "u", host="10.1.2.3") and not allowed(auth, R, "u", host="10.2.0.1")
    assert not allowed(auth, R, "u", principal="User:bob", host="10.1.2.3")


def test_super_users() -> None:
    supers = parse_super_users("User:admin; User:ops ;")
    assert supers == {"User:admin", "User:ops"}
    auth = authorizer_with(acl("t", ALL, DENY, principal="User:*"), super_users=supers)
    assert allowed(auth, R, "t", principal="User:admin") and not allowed(auth, R, "t")


def test_create_validates_like_kafka() -> None:
    auth = Authorizer()
    bad = [
        (acl("other", A, rtype=C), "The only valid name for the CLUSTER resource is kafka-cluster"),
        (acl("", R), "Invalid empty resource name"),
        (acl("t", R, rtype=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl("t", R, pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl("t", AclOperation.ANY), "Invalid operation ANY"),
        (acl("t", R, PermissionType.ANY), "Invalid permissionType ANY"),
        (acl("t", R, principal="alice"), "Could not parse principal from `alice` (no colon is present separating "
                                         "the principal type from the principal name)"),
        (acl("t", R, host=""), "Host pattern cannot be null or empty"),
        (acl("t", R, host="10.0.0.0/99"), "Invalid CIDR notation '10.0.0.0/99': "),
    ]
    records, results = auth.create([b for b, _ in bad] + [acl("kafka-cluster", A, rtype=C)])
    for (_, message), result in zip(bad, results, strict=False):
        assert result.error == ErrorCode.INVALID_REQUEST and result.message.startswith(message), result
    assert results[-1].error == ErrorCode.NONE and len(records) == 1


def test_create_is_idempotent_and_delete_returns_matches() -> None:
    ids = (uuid.UUID(int=i) for i in itertools.count(1))
    auth = Authorizer(new_id=lambda: next(ids))
    a1, a2 = acl("t", R), acl("t-", W, pattern=PRE)
    records, _ = auth.create([a1, a1, a2])
    assert len(records) == 2
    for r in records:
        auth.apply(*r)
    records, results = auth.create([a1])
    assert records == [] and results[0].error == ErrorCode.NONE
    assert sorted(auth.acls(), key=str) == sorted([a1, a2], key=str)
    # Two filters matching the same ACL remove it once.
    records, results = auth.delete([AclBindingFilter(name="t"), AclBindingFilter(resource_type=T, operation=R)])
    assert [r.deleted for r in results] == [(a1,), (a1,)] and len(records) == 1
    for r in records:
        auth.apply(*r)
    assert auth.acls() == [a2] and not allowed(auth, R, "t")
    # Replaying the same records in a fresh authorizer gives the same state.
    replay = Authorizer()
    ids2 = (uuid.UUID(int=i) for i in itertools.count(1))
    fresh = Authorizer(new_id=lambda: next(ids2))
    recs, _ = fresh.create([a1, a2])
    for r in recs:
        fresh.apply(*r)
    recs += fresh.delete([AclBindingFilter(name="t")])[0]
    for r in recs:
        replay.apply(*r)
    assert replay.acls() == [a2]


def test_filters() -> None:
    lit, wild, pre = acl("orders", R), acl("*", R), acl("ord", R, pattern=PRE)
    every = [lit, wild, pre, acl("orders", R, rtype=G)]

    def matched(**kw):
        return [a for a in every if AclBindingFilter(**kw).matches(a)]

    assert matched(resource_type=T, name="orders", pattern_type=PatternType.MATCH) == [lit, wild, pre]
    assert matched(resource_type=T, name="orders", pattern_type=PatternType.ANY) == [lit]
    assert matched(resource_type=T, name="ord", pattern_type=PRE) == [pre]
    assert matched(pattern_type=LIT) == [lit, wild, every[3]]
    assert matched(resource_type=T, principal="User:bob") == []
    assert matched(resource_type=T, operation=W) == [] and len(matched(permission=ALLOW)) == 4


def test_authorize_by_resource_type() -> None:
    def by_type(*acls, **kw):
        return authorizer_with(*acls, **kw).authorize_by_resource_type("User:alice", HOST, W, T)

    assert not by_type()
    assert by_type(allow_everyone_if_no_acl_found=True)
    assert by_type(acl("t", W))
    assert not by_type(acl("t", W), acl("t", W, DENY))
    assert not by_type(acl("pre-x", W), acl("pre", W, DENY, pattern=PRE))
    assert by_type(acl("*", W))
    assert not by_type(acl("t", W), acl("*", W, DENY))
    assert not by_type(acl("t", R))


# --- property: the indexed decision equals a scan over every ACL ---------------------------------------------------
NAMES = ["a", "ab", "abc", "b", "*"]
OPS = [R, W, D, A, ALL, AclOperation.CREATE, AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS]
acls_strategy = st.lists(st.builds(
    AclBinding, st.sampled_from([T, G]), st.sampled_from(NAMES), st.sampled_from([LIT, PRE]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]), st.sampled_from(["*", HOST, "10.0.0.1"]),
    st.sampled_from(OPS), st.sampled_from([ALLOW, DENY])), max_size=12)


def reference(acls, principal, host, op, rtype, name, default) -> bool:
    implied = {D: {D, R, W, AclOperation.DELETE, A}, AclOperation.DESCRIBE_CONFIGS: {
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}}
    on_resource = [a for a in acls if a.resource_type == rtype and (
        (a.pattern_type == LIT and a.name in (name, "*")) or (a.pattern_type == PRE and name.startswith(a.name)))]
    mine = [a for a in on_resource if a.principal in (principal, "User:*") and a.host in ("*", host)]
    if any(a.permission == DENY and a.operation in (ALL, op) for a in mine):
        return False
    if any(a.permission == ALLOW and (a.operation in (ALL, op) or a.operation in implied.get(op, ())) for a in mine):
        return True
    return not on_resource and default


@settings(max_examples=300, deadline=None)
@given(acls_strategy, st.booleans())
def test_decisions_match_the_reference(acls, default) -> None:
    auth = authorizer_with(*acls, allow_everyone_if_no_acl_found=default)
    for rtype, name, op, principal in itertools.product([T, G], ["a", "ab", "abc", "b", "c"], OPS[:4] + OPS[5:],
                                                        ["User:alice", "User:carol"]):
        expected = reference(acls, principal, HOST, op, rtype, name, default)
        assert auth.authorize(principal, HOST, op, rtype, name) == expected, (rtype, name, op, principal)
