"""Quotas, ACLs, SCRAM credentials and SASL against Kafka 4.4 and Shoal, both with a SASL_PLAINTEXT listener
(SCRAM-SHA-256/512), the StandardAuthorizer and the super user `admin` (sasl_pair), through raw requests.

Every entity, resource and user a scenario makes is named with `target.unique`, so nothing here depends on what other
tests did to the shared Kafka; no default quota is set (defaults are only validated, or matched together with a
unique client id). Kafka applies these changes to its broker's metadata a moment after it answers: a scenario that
reads what it changed waits with `barrier` on both brokers. Where Kafka orders a list by a hash map (DescribeAcls'
resources and entries, DeleteAcls' matches, AlterClientQuotas' entries, DescribeUserScramCredentials' users,
SaslHandshake's mechanisms), the lists are compared sorted, as docs/kafka-differences.md ("Quotas, ACLs and SASL")
says.
"""

from __future__ import annotations

import pytest

from broker.security.scram import MECHANISMS, ScramClient
from tests.helpers.differential import Target, assert_same, known_difference
from tests.helpers.differential_admin import barrier
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.integration

REASON = "Quotas, ACLs and SASL"
DESCRIBE_QUOTAS, ALTER_QUOTAS = 48, 49
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
HANDSHAKE, AUTHENTICATE, API_VERSIONS, METADATA = 17, 36, 18, 3
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _unique(target: Target, names: dict, text):
    """Text with "U:base" made unique (once per base per scenario)."""
    if isinstance(text, str) and "U:" in text:
        head, base = text.split("U:", 1)
        names.setdefault(base, target.unique(base))
        return head + names[base]
    return text


# --- client quotas ------------------------------------------------------------------------------------------------

def _entity(*parts: tuple[str, str | None]) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in parts]


def _op(key: str, value: float = 0.0, remove: bool = False) -> dict:
    return {"key": key, "value": value, "remove": remove}


def _entries(answer) -> list:
    """AlterClientQuotas' entries, sorted by entity (Kafka answers in its hash map's order)."""
    rows = [[e.error_code, e.error_message, [[p.entity_type, p.entity_name] for p in e.entity]] for e in answer.entries]
    return sorted(rows, key=str)


QUOTA_CASES = {
    "user": [(_entity(("user", "U:u")), [_op("producer_byte_rate", 1000.0)])],
    "client id": [(_entity(("client-id", "U:c")), [_op("request_percentage", 12.5)])],
    "user and client id": [(_entity(("user", "U:u"), ("client-id", "U:c")), [_op("consumer_byte_rate", 1000.0)])],
    "default user": [(_entity(("user", None)), [_op("producer_byte_rate", 1e15)])],
    "default user and client id": [(_entity(("user", None), ("client-id", None)), [_op("request_percentage", 99.0)])],
    "ip": [(_entity(("ip", "10.1.2.3")), [_op("connection_creation_rate", 10.0)])],
    "default ip": [(_entity(("ip", None)), [_op("connection_creation_rate", 1e6)])],
    "ipv6": [(_entity(("ip", "::1")), [_op("connection_creation_rate", 10.0)])],
    "ip not an address": [(_entity(("ip", "not-an-ip.invalid")), [_op("connection_creation_rate", 10.0)])],
    "ip with a user": [(_entity(("ip", "10.1.2.3"), ("user", "U:u")), [_op("connection_creation_rate", 10.0)])],
    "ip with a client id": [(_entity(("ip", "10.1.2.3"), ("client-id", "U:c")),
                             [_op("connection_creation_rate", 10.0)])],
    "user key on an ip": [(_entity(("ip", "10.1.2.3")), [_op("producer_byte_rate", 10.0)])],
    "ip key on a user": [(_entity(("user", "U:u")), [_op("connection_creation_rate", 10.0)])],
    "fractional bytes": [(_entity(("user", "U:u")), [_op("producer_byte_rate", 10.5)])],
    "zero": [(_entity(("user", "U:u")), [_op("producer_byte_rate", 0.0)])],
    "negative": [(_entity(("user", "U:u")), [_op("request_percentage", -1.0)])],
    "above an int": [(_entity(("ip", "10.1.2.3")), [_op("connection_creation_rate", 3e9)])],
    "mutation rate": [(_entity(("client-id", "U:c")), [_op("controller_mutation_rate", 0.5)])],
    "unknown key": [(_entity(("user", "U:u")), [_op("foo", 1.0)])],
    "unknown entity type": [(_entity(("group", "g")), [_op("producer_byte_rate", 1.0)])],
    "empty entity": [([], [_op("producer_byte_rate", 1.0)])],
    "empty name": [(_entity(("user", "")), [_op("producer_byte_rate", 1.0)])],
    "key twice": [(_entity(("user", "U:u")), [_op("producer_byte_rate", 1.0), _op("producer_byte_rate", 2.0)])],
    "entity twice": [(_entity(("user", "U:u")), [_op("producer_byte_rate", 1.0)]),
                     (_entity(("user", "U:u")), [_op("consumer_byte_rate", 2.0)])],
    "type twice": [(_entity(("user", "U:a"), ("user", "U:b")), [_op("producer_byte_rate", 1.0)])],
    "remove what is not set": [(_entity(("user", "U:u")), [_op("producer_byte_rate", remove=True)])],
    "no operations": [(_entity(("user", "U:u")), [])],
    "one entity refused, one not": [(_entity(("user", "U:u")), [_op("producer_byte_rate", 1.0)]),
                                    (_entity(("user", "U:v")), [_op("foo", 2.0)])],
}


# v0 and v1 differ in encoding only: a few cases run at v0
QUOTA_RUNS = [(case, 1) for case in QUOTA_CASES] + [(case, 0) for case in ("user", "default user", "ip with a user")]


@pytest.mark.parametrize(("case", "version"), QUOTA_RUNS)
def test_alter_client_quotas_validate_only(sasl_pair, case, version):
    """Each entity and value checked (validate-only: nothing set, defaults included)."""
    def scenario(target: Target):
        names: dict = {}
        entries = [{"entity": [{**p, "entity_name": _unique(target, names, p["entity_name"])} for p in entity],
                    "ops": ops} for entity, ops in QUOTA_CASES[case]]
        with target.raw() as raw:
            return _entries(raw.call(ALTER_QUOTAS, version, {"entries": entries, "validate_only": True}))

    assert_same(sasl_pair.run(scenario), f"AlterClientQuotas v{version}: {case}")


def test_alter_client_quotas_host_name(sasl_pair):
    """Kafka resolves a host name given as an ip entity; Shoal takes addresses only (resolving would block its
    event loop)."""
    def scenario(target: Target):
        with target.raw() as raw:
            answer = raw.call(ALTER_QUOTAS, 1, {"entries": [{"entity": _entity(("ip", "localhost")), "ops": [
                _op("connection_creation_rate", 10.0)]}], "validate_only": True})
        return [answer.entries[0].error_code, answer.entries[0].error_message]

    known_difference(sasl_pair.run(scenario), kafka=[0, None],
                     shoal=[42, "localhost is not a valid IP or resolvable host."],
                     reason=f"{REASON}: ip quota entities name addresses")


def _describe_quotas(raw: RawClient, components: list[tuple[str, int, str | None]], strict: bool) -> list:
    answer = raw.call(DESCRIBE_QUOTAS, 1, {"components": [
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components], "strict": strict})
    entries = sorted([[[[p.entity_type, p.entity_name] for p in e.entity],
                       sorted([v.key, v.value] for v in e["values"])] for e in answer.entries or []], key=str)
    return [answer.error_code, answer.error_message, entries if answer.entries is not None else None]


def test_client_quotas_set_described_and_removed(sasl_pair):
    """Quotas of a client id alone, with a user, with the default user and of the user alone; described through
    every match type (always with the unique client id or user, so other tests' quotas cannot match), strict and
    not, then one removed."""
    def scenario(target: Target):
        client, user = target.unique("cid"), target.unique("usr")
        out = {}
        with target.raw() as raw:
            set_quotas = raw.call(ALTER_QUOTAS, 1, {"entries": [
                {"entity": _entity(("client-id", client)), "ops": [_op("producer_byte_rate", 1000.0),
                                                                   _op("request_percentage", 55.5)]},
                {"entity": _entity(("user", user), ("client-id", client)), "ops": [_op("consumer_byte_rate", 2e3)]},
                {"entity": _entity(("user", None), ("client-id", client)), "ops": [_op("controller_mutation_rate", 3)]},
                {"entity": _entity(("user", user)), "ops": [_op("producer_byte_rate", 4000.0)]}],
                "validate_only": False})
            out["set"] = _entries(set_quotas)
            barrier(raw, target.unique("barrier"))
            exact = ("client-id", EXACT, client)
            for label, components, strict in (
                    ("client id", [exact], False), ("client id, strict", [exact], True),
                    ("default user, client id", [("user", DEFAULT, None), exact], True),
                    ("any user, client id", [("user", SPECIFIED, None), exact], False),
                    ("any user, client id, strict", [("user", SPECIFIED, None), exact], True),
                    ("user", [("user", EXACT, user)], True), ("user, not strict", [("user", EXACT, user)], False)):
                out[label] = _describe_quotas(raw, components, strict)
            removed = raw.call(ALTER_QUOTAS, 1, {"entries": [{"entity": _entity(("client-id", client)), "ops": [
                _op("producer_byte_rate", remove=True)]}], "validate_only": False})
            out["remove"] = _entries(removed)
            barrier(raw, target.unique("barrier"))
            out["after"] = _describe_quotas(raw, [exact], True)
        return out

    assert_same(sasl_pair.run(scenario), "client quotas set, described and removed")


DESCRIBE_QUOTA_ERRORS = {
    "unknown entity type": ([("group", EXACT, "x")], False),
    "empty entity type": ([("", EXACT, "x")], False),
    "a type twice": ([("user", EXACT, "x"), ("user", EXACT, "y")], False),
    "exact without a name": ([("user", EXACT, None)], False),
    "default with a name": ([("user", DEFAULT, "x")], False),
    "unknown match type": ([("user", 7, "x")], False),
    "ip with a user": ([("ip", EXACT, "1.2.3.4"), ("user", EXACT, "x")], False),
}


@pytest.mark.parametrize("case", DESCRIBE_QUOTA_ERRORS)
def test_describe_client_quotas_errors(sasl_pair, case):
    components, strict = DESCRIBE_QUOTA_ERRORS[case]

    def scenario(target: Target):
        with target.raw() as raw:
            return _describe_quotas(raw, components, strict)

    assert_same(sasl_pair.run(scenario), f"DescribeClientQuotas: {case}")


# --- ACLs ---------------------------------------------------------------------------------------------------------

TOPIC, GROUP, CLUSTER, TXN, TOKEN, USER = 2, 3, 4, 5, 6, 7
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE, DESCRIBE, ALL, CLUSTER_ACTION, IDEMPOTENT_WRITE, CREATE_TOKENS = 3, 4, 8, 2, 9, 12, 13
DENY, ALLOW = 2, 3


def _acl(rt: int, name: str, pattern: int, principal: str, operation: int, permission: int = ALLOW,
         host: str = "*") -> dict:
    return {"resource_type": rt, "resource_name": name, "resource_pattern_type": pattern, "principal": principal,
            "host": host, "operation": operation, "permission_type": permission}


def _filter(rt: int, name: str | None, pattern: int, principal: str | None = None, operation: int = ANY,
            permission: int = ANY, host: str | None = None) -> dict:
    return {"resource_type_filter": rt, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": host, "operation": operation, "permission_type": permission}


def _fill(target: Target, names: dict, body: dict) -> dict:
    return {k: _unique(target, names, v) for k, v in body.items()}


CREATE_ACL_CASES = {
    "literal": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", READ)],
    "prefixed": [_acl(TOPIC, "U:t", PREFIXED, "User:U:p", READ)],
    "deny": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", READ, DENY)],
    "all operations": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", ALL)],
    "wildcard principal": [_acl(TOPIC, "U:t", LITERAL, "User:*", READ)],
    "group principal": [_acl(TOPIC, "U:t", LITERAL, "Group:U:p", READ)],
    "principal without a type": [_acl(TOPIC, "U:t", LITERAL, "U:p", READ)],
    "empty principal": [_acl(TOPIC, "U:t", LITERAL, "", READ)],
    "wildcard prefix": [_acl(TOPIC, "*", PREFIXED, "User:U:p", READ)],
    "idempotent write on a topic": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", IDEMPOTENT_WRITE)],
    "read on the cluster": [_acl(CLUSTER, "kafka-cluster", LITERAL, "User:U:p", READ)],
    "cluster with another name": [_acl(CLUSTER, "U:c", LITERAL, "User:U:p", CLUSTER_ACTION)],
    "prefixed cluster": [_acl(CLUSTER, "kafka-cluster", PREFIXED, "User:U:p", CLUSTER_ACTION)],
    "write on a group": [_acl(GROUP, "U:g", LITERAL, "User:U:p", WRITE)],
    "transactional id": [_acl(TXN, "U:x", LITERAL, "User:U:p", WRITE)],
    "delegation token": [_acl(TOKEN, "U:x", LITERAL, "User:U:p", DESCRIBE)],
    "user": [_acl(USER, "U:x", LITERAL, "User:U:p", CREATE_TOKENS)],
    "empty resource name": [_acl(TOPIC, "", LITERAL, "User:U:p", READ)],
    "host not an address": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", READ, host="not a host")],
    "CIDR host": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", READ, host="10.0.0.0/8")],
    "bad CIDR hosts": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", READ, host=h) for h in (
        "10.0.0.0/99", "10.0.0/8", "::1/200", "10.0.0.300/8", "10.0.0.0/abc", "1.2.3.4/032", "fe80::/10")],
    "empty host": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", READ, host="")],
    "undefined resource type": [_acl(99, "U:t", LITERAL, "User:U:p", READ)],
    "undefined pattern type": [_acl(TOPIC, "U:t", 9, "User:U:p", READ)],
    "undefined operation": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", 99)],
    "undefined permission": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", READ, 9)],
    "the same ACL twice": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", READ)] * 2,
    "several, one refused": [_acl(TOPIC, "U:t", LITERAL, "User:U:p", READ), _acl(TOPIC, "U:t", 9, "User:U:p", READ),
                             _acl(GROUP, "U:g", LITERAL, "User:U:p", DESCRIBE)],
}


@pytest.mark.parametrize("case", CREATE_ACL_CASES)
def test_create_acls(sasl_pair, case):
    def scenario(target: Target):
        names: dict = {}
        with target.raw() as raw:
            return raw.call(CREATE_ACLS, 3, {"creations": [_fill(target, names, c)
                                                           for c in CREATE_ACL_CASES[case]]}).results

    assert_same(sasl_pair.run(scenario), f"CreateAcls: {case}")


ANY_CODES = {"pattern ANY": _acl(TOPIC, "U:t", ANY, "User:U:p", READ),
             "pattern MATCH": _acl(TOPIC, "U:t", MATCH, "User:U:p", READ),
             "resource type ANY": _acl(ANY, "U:t", LITERAL, "User:U:p", READ),
             "operation ANY": _acl(TOPIC, "U:t", LITERAL, "User:U:p", ANY),
             "permission ANY": _acl(TOPIC, "U:t", LITERAL, "User:U:p", READ, ANY)}


@pytest.mark.parametrize("case", ANY_CODES)
def test_create_acls_with_filter_only_codes(sasl_pair, case):
    """Kafka fails (UNKNOWN_SERVER_ERROR, no message) on a code that only a filter may hold; Shoal refuses it with
    INVALID_REQUEST and says which."""
    def scenario(target: Target):
        with target.raw() as raw:
            result = raw.call(CREATE_ACLS, 3, {"creations": [_fill(target, {}, ANY_CODES[case])]}).results[0]
        return [result.error_code, result.error_message]

    field = {"pattern ANY": "patternType ANY", "pattern MATCH": "patternType MATCH",
             "resource type ANY": "resourceType ANY", "operation ANY": "operation ANY",
             "permission ANY": "permissionType ANY"}[case]
    known_difference(sasl_pair.run(scenario), kafka=[-1, None], shoal=[42, f"Invalid {field}"],
                     reason=f"{REASON}: CreateAcls with a filter's code")


def _made_acls(base: str, principal: str) -> list[dict]:
    """ACLs on topics `base` and `base-x` (literal), on the prefix `base` and on the group `base`."""
    return [_acl(TOPIC, base, LITERAL, principal, READ), _acl(TOPIC, base, LITERAL, "User:bob", WRITE),
            _acl(TOPIC, f"{base}-x", LITERAL, principal, READ), _acl(TOPIC, base, PREFIXED, principal, DESCRIBE),
            _acl(GROUP, base, LITERAL, principal, READ),
            _acl(TOPIC, base, LITERAL, principal, READ, DENY, host="10.0.0.1")]


def _resources(answer) -> list:
    """DescribeAcls' resources and their entries, sorted (Kafka: hash order)."""
    return sorted([[r.resource_type, r.resource_name, r.pattern_type,
                    sorted([a.principal, a.host, a.operation, a.permission_type] for a in r.acls)]
                   for r in answer.resources], key=str)


ACL_FILTERS = {
    "literal": lambda b, p: _filter(TOPIC, b, LITERAL),
    "prefixed": lambda b, p: _filter(TOPIC, b, PREFIXED),
    "match": lambda b, p: _filter(TOPIC, b, MATCH),
    "match a longer name": lambda b, p: _filter(TOPIC, f"{b}-x", MATCH),
    "any pattern": lambda b, p: _filter(TOPIC, b, ANY),
    "any resource type": lambda b, p: _filter(ANY, b, LITERAL),
    "principal": lambda b, p: _filter(TOPIC, b, LITERAL, principal="User:bob"),
    "host": lambda b, p: _filter(TOPIC, b, LITERAL, host="10.0.0.1"),
    "operation": lambda b, p: _filter(TOPIC, b, ANY, operation=READ),
    "permission": lambda b, p: _filter(TOPIC, b, ANY, permission=DENY),
    "principal, any resource": lambda b, p: _filter(ANY, None, ANY, principal=p),
    "principal without a type": lambda b, p: _filter(TOPIC, b, LITERAL, principal="bob"),
    "undefined resource type": lambda b, p: _filter(99, b, LITERAL),
    "undefined pattern type": lambda b, p: _filter(TOPIC, b, 9),
    "undefined operation": lambda b, p: _filter(TOPIC, b, LITERAL, operation=99),
    "undefined permission": lambda b, p: _filter(TOPIC, b, LITERAL, permission=9),
}


@pytest.mark.parametrize("case", ACL_FILTERS)
def test_describe_acls(sasl_pair, case):
    def scenario(target: Target):
        base, principal = target.unique("acl"), f"User:{target.unique('p')}"
        with target.raw() as raw:
            made = raw.call(CREATE_ACLS, 3, {"creations": _made_acls(base, principal)}).results
            assert all(r.error_code == 0 for r in made), made
            barrier(raw, target.unique("barrier"))
            answer = raw.call(DESCRIBE_ACLS, 3, ACL_FILTERS[case](base, principal))
        return [answer.error_code, answer.error_message, _resources(answer)]

    assert_same(sasl_pair.run(scenario), f"DescribeAcls: {case}")


@pytest.mark.parametrize("case", ["literal", "match", "any resource type", "principal, any resource", "operation",
                                  "undefined resource type", "undefined operation", "principal without a type"])
def test_delete_acls(sasl_pair, case):
    """The filter twice in one request (the second matches nothing left), then what remains."""
    def scenario(target: Target):
        base, principal = target.unique("acl"), f"User:{target.unique('p')}"
        with target.raw() as raw:
            raw.call(CREATE_ACLS, 3, {"creations": _made_acls(base, principal)})
            barrier(raw, target.unique("barrier"))
            flt = ACL_FILTERS[case](base, principal)
            answer = raw.call(DELETE_ACLS, 3, {"filters": [flt, flt]})
            barrier(raw, target.unique("barrier"))
            left = raw.call(DESCRIBE_ACLS, 3, _filter(ANY, None, ANY, principal=principal))
        deleted = [[r.error_code, r.error_message, sorted(
            [m.error_code, m.error_message, m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
             m.operation, m.permission_type] for m in r.matching_acls)] for r in answer.filter_results]
        return {"deleted": deleted, "left": _resources(left)}

    assert_same(sasl_pair.run(scenario), f"DeleteAcls: {case}")


@pytest.mark.parametrize("api", ["describe", "create", "delete"])
def test_acl_requests_with_the_unknown_code(sasl_pair, api):
    """The UNKNOWN code (0) itself: the request cannot be parsed, the connection is closed."""
    def scenario(target: Target):
        body = {"describe": (DESCRIBE_ACLS, _filter(TOPIC, "x", 0)),
                "create": (CREATE_ACLS, {"creations": [_acl(0, "x", LITERAL, "User:p", READ)]}),
                "delete": (DELETE_ACLS, {"filters": [_filter(TOPIC, "x", LITERAL, operation=0)]})}[api]
        with target.raw() as raw:
            try:
                raw.call(*body[:1], 3, body[1])
            except ConnectionError:
                return "closed"
        return "answered"

    assert_same(sasl_pair.run(scenario), f"{api} ACLs with the UNKNOWN code")


# --- SCRAM credentials --------------------------------------------------------------------------------------------

def _upsert(name: str, mechanism: int = 1, iterations: int = 4096, salt: bytes = b"s" * 16,
            salted: bytes = b"p" * 32) -> dict:
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt, "salted_password": salted}


def _deletion(name: str, mechanism: int = 1) -> dict:
    return {"name": name, "mechanism": mechanism}


SCRAM_CASES = {
    "two mechanisms": ([], [_upsert("U:u"), _upsert("U:u", mechanism=2, iterations=8192)]),
    "too few iterations": ([], [_upsert("U:u", iterations=100)]),
    "too many iterations": ([], [_upsert("U:u", iterations=20000)]),
    "undefined mechanism": ([], [_upsert("U:u", mechanism=9)]),
    "unknown mechanism (0)": ([], [_upsert("U:u", mechanism=0)]),
    "empty user name": ([], [_upsert("")]),
    "a user twice": ([], [_upsert("U:u"), _upsert("U:u")]),
    "empty salt": ([], [_upsert("U:u", salt=b"")]),
    "delete what does not exist": ([_deletion("U:u")], []),
    "delete an undefined mechanism": ([_deletion("U:u", mechanism=7)], []),
    "delete and set the same user": ([_deletion("U:u")], [_upsert("U:u")]),
    "delete one mechanism, set another": ([_deletion("U:u", mechanism=2)], [_upsert("U:u")]),
    "several users": ([], [_upsert("U:u"), _upsert("U:v", mechanism=2), _upsert("U:w", iterations=1)]),
}


@pytest.mark.parametrize("case", SCRAM_CASES)
def test_alter_user_scram_credentials(sasl_pair, case):
    """The answer (sorted by user), then the users it named described."""
    deletions, upsertions = SCRAM_CASES[case]

    def scenario(target: Target):
        names: dict = {}
        dels = [{**d, "name": _unique(target, names, d["name"])} for d in deletions]
        ups = [{**u, "name": _unique(target, names, u["name"])} for u in upsertions]
        with target.raw() as raw:
            answer = raw.call(ALTER_SCRAM, 0, {"deletions": dels, "upsertions": ups})
            barrier(raw, target.unique("barrier"))
            users = sorted({d["name"] for d in dels + ups if d["name"]})
            described = raw.call(DESCRIBE_SCRAM, 0, {"users": [{"name": u} for u in users]}) if users else None
        return {"altered": sorted([[r.user, r.error_code, r.error_message] for r in answer.results]),
                "described": None if described is None else [described.error_code, described.error_message, sorted(
                    [r.user, r.error_code, r.error_message, sorted([c.mechanism, c.iterations]
                                                                   for c in r.credential_infos)]
                    for r in described.results)]}

    assert_same(sasl_pair.run(scenario), f"AlterUserScramCredentials: {case}")


def test_scram_credential_with_an_empty_salted_password(sasl_pair):
    """Kafka fails on it (UNKNOWN_SERVER_ERROR); Shoal stores a credential no password matches."""
    def scenario(target: Target):
        with target.raw() as raw:
            result = raw.call(ALTER_SCRAM, 0, {"deletions": [], "upsertions": [
                _upsert(target.unique("u"), salted=b"")]}).results[0]
        return [result.error_code, result.error_message]

    known_difference(sasl_pair.run(scenario), kafka=[-1, None], shoal=[0, None],
                     reason=f"{REASON}: a SCRAM credential with an empty salted password")


DESCRIBE_SCRAM_CASES = {
    "the test users": ["admin", "alice"],
    "an unknown user": ["U:nobody"],
    "a user twice": ["U:x", "U:x"],
    "an empty name": [""],
    "known and unknown": ["alice", "U:nobody"],
}


@pytest.mark.parametrize("case", DESCRIBE_SCRAM_CASES)
def test_describe_user_scram_credentials(sasl_pair, case):
    def scenario(target: Target):
        names: dict = {}
        with target.raw() as raw:
            answer = raw.call(DESCRIBE_SCRAM, 0, {"users": [{"name": _unique(target, names, u)}
                                                            for u in DESCRIBE_SCRAM_CASES[case]]})
        return [answer.error_code, answer.error_message, sorted(
            [r.user, r.error_code, r.error_message, sorted([c.mechanism, c.iterations] for c in r.credential_infos)]
            for r in answer.results)]

    assert_same(sasl_pair.run(scenario), f"DescribeUserScramCredentials: {case}")


# --- SASL ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("mechanism", "version"), [
    (m, 1) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "GSSAPI", "BOGUS", "scram-sha-256")] + [
    ("SCRAM-SHA-512", 0), ("PLAIN", 0)])
def test_sasl_handshake(sasl_pair, mechanism, version):
    """The mechanism's answer; the enabled mechanisms are compared as a set (Kafka lists them in hash order)."""
    def scenario(target: Target):
        with RawClient(target.port) as raw:
            answer = raw.call(HANDSHAKE, version, {"mechanism": mechanism})
        return [answer.error_code, sorted(answer.mechanisms)]

    assert_same(sasl_pair.run(scenario), f"SaslHandshake v{version} {mechanism}")


def test_sasl_handshake_mechanisms_order(sasl_pair):
    def scenario(target: Target):
        with RawClient(target.port) as raw:
            return raw.call(HANDSHAKE, 1, {"mechanism": "BOGUS"}).mechanisms

    assert_same(sasl_pair.run(scenario), "SaslHandshake's list of enabled mechanisms")


LOGINS = {
    "alice, SHA-256": ("alice", "alice-secret", "SCRAM-SHA-256"),
    "alice, SHA-512": ("alice", "alice-secret", "SCRAM-SHA-512"),
    "wrong password": ("alice", "nope", "SCRAM-SHA-256"),
    "wrong password, SHA-512": ("alice", "nope", "SCRAM-SHA-512"),
    "unknown user": ("mallory", "x", "SCRAM-SHA-256"),
    "empty user": ("", "x", "SCRAM-SHA-256"),
}


@pytest.mark.parametrize("case", LOGINS)
def test_sasl_scram_authentication(sasl_pair, case):
    """Each SaslAuthenticate step's error and message (the server's nonce and signature are not compared), then
    whether the connection still answers."""
    user, password, mechanism = LOGINS[case]

    def scenario(target: Target):
        out = {}
        with RawClient(target.port) as raw:
            out["handshake"] = raw.call(HANDSHAKE, 1, {"mechanism": mechanism}).error_code
            scram = ScramClient(MECHANISMS[mechanism], user, password)
            first = raw.call(AUTHENTICATE, 2, {"auth_bytes": scram.first()})
            out["first"] = [first.error_code, first.error_message, first.session_lifetime_ms]
            if not first.error_code:
                final = raw.call(AUTHENTICATE, 2, {"auth_bytes": scram.final(first.auth_bytes)})
                out["final"] = [final.error_code, final.error_message, final.session_lifetime_ms]
            try:
                raw.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
                out["after"] = "answered"
            except ConnectionError:
                out["after"] = "closed"
        return out

    assert_same(sasl_pair.run(scenario), f"SCRAM authentication: {case}")


BEFORE_AUTHENTICATION = {
    "Metadata": (METADATA, 12, {"topics": None}),
    "SaslAuthenticate without a handshake": (AUTHENTICATE, 2, {"auth_bytes": b"n,,n=alice,r=abc"}),
    "garbage after the handshake": (AUTHENTICATE, 2, {"auth_bytes": b"garbage"}),
}


@pytest.mark.parametrize("case", BEFORE_AUTHENTICATION)
def test_requests_before_authentication(sasl_pair, case):
    api, version, body = BEFORE_AUTHENTICATION[case]

    def scenario(target: Target):
        with RawClient(target.port) as raw:
            if case.startswith("garbage"):
                raw.call(HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
            try:
                answer = raw.call(api, version, body)
            except ConnectionError:
                return "closed"
            return [answer.error_code, answer.error_message]

    assert_same(sasl_pair.run(scenario), f"before authentication: {case}")
