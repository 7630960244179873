"""SCRAM credential store: Kafka's AlterUserScramCredentials validation and DescribeUserScramCredentials answers."""

from __future__ import annotations

from broker.security.credentials import ScramCredentialStore
from broker.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramClient, ScramServer
from protocol.codec import request_codec
from protocol.errors import ErrorCode

ALTER_USER_SCRAM_CREDENTIALS = 51


def upsert(name, mechanism=1, iterations=4096, password="pw", salt=b"0123456789abcdef"):
    mech = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}.get(mechanism, SCRAM_SHA_256)
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": mech.salted_password(password, salt, max(iterations, 1))}


def delete(name, mechanism=1):
    return {"name": name, "mechanism": mechanism}


def commit(store, deletions=(), upsertions=()):
    """Alter through the store with the entries as the handler gets them: decoded from a request."""
    codec = request_codec(ALTER_USER_SCRAM_CREDENTIALS, 0)
    req = codec.decode(codec.encode({"deletions": list(deletions), "upsertions": list(upsertions)}))
    records, results = store.alter(list(req.deletions), list(req.upsertions))
    for record in records:
        store.apply(*record)
    return {r.user: (r.error, r.message) for r in results}


def test_upsert_then_authenticate_then_delete() -> None:
    store = ScramCredentialStore()
    assert commit(store, upsertions=[upsert("alice", password="a-pw"), upsert("alice2", 2)]) == {
        "alice": (ErrorCode.NONE, None), "alice2": (ErrorCode.NONE, None)}
    credential = store.lookup(SCRAM_SHA_256, "alice")
    assert credential is not None and credential.iterations == 4096
    assert store.lookup(SCRAM_SHA_512, "alice") is None
    client = ScramClient(SCRAM_SHA_256, "alice", "a-pw")
    server = ScramServer(SCRAM_SHA_256, lambda user: store.lookup(SCRAM_SHA_256, user))
    assert client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert commit(store, deletions=[delete("alice")]) == {"alice": (ErrorCode.NONE, None)}
    assert store.lookup(SCRAM_SHA_256, "alice") is None and store.users() == ["alice2"]


def test_alter_errors() -> None:
    store = ScramCredentialStore()
    commit(store, upsertions=[upsert("carol")])
    results = commit(store, deletions=[delete("nobody"), delete("dup"), delete("carol", 9)],
                     upsertions=[upsert(""), upsert("few", iterations=4095), upsert("many", iterations=16385),
                                 upsert("dup"), upsert("twice"), upsert("twice", 2), upsert("bad", 3)])
    assert results == {
        "nobody": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "dup": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "carol": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "twice": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "bad": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    }
    assert store.users() == ["carol"]  # nothing else was written
    # Deleting and upserting the same user in one request is a duplicate too; neither applies.
    assert commit(store, deletions=[delete("carol")], upsertions=[upsert("carol", password="new")])["carol"][0] == \
        ErrorCode.DUPLICATE_RESOURCE
    assert store.lookup(SCRAM_SHA_256, "carol") is not None


def test_describe() -> None:
    store = ScramCredentialStore()
    commit(store, upsertions=[upsert("a"), upsert("b", 2, iterations=8192)])
    commit(store, upsertions=[upsert("a", 2, iterations=5000)])
    everyone = {r.user: r for r in store.describe(None)}
    assert everyone["a"].credentials == ((1, 4096), (2, 5000)) and everyone["b"].credentials == ((2, 8192),)
    assert [r.user for r in store.describe([])] == ["a", "b"]
    named = store.describe(["b", "zed", "b"])
    assert [(r.user, r.error) for r in named] == [("b", ErrorCode.DUPLICATE_RESOURCE),
                                                  ("zed", ErrorCode.RESOURCE_NOT_FOUND)]
    assert named[1].message == "Attempt to describe a user credential that does not exist: zed"
