"""The client quota store: Kafka's AlterClientQuotas validation, ClientQuotaRecords replayed, describe filters."""

from __future__ import annotations

import pytest

from broker.quotas.store import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    ClientQuotaStore,
    QuotaRequestError,
    entity_of,
)
from protocol.errors import ErrorCode

ALICE = entity_of([("user", "alice")])
ALICE_DEFAULT_CLIENT = entity_of([("user", "alice"), ("client-id", None)])
ALICE_APP = entity_of([("user", "alice"), ("client-id", "app")])
DEFAULT_USER = entity_of([("user", None)])
APP = entity_of([("client-id", "app")])
DEFAULT_CLIENT = entity_of([("client-id", None)])
IP = entity_of([("ip", "10.0.0.1")])


def altered(store: ClientQuotaStore, entity, ops) -> list:
    records, results = store.alter([(entity, list(ops.items()))])
    for _type, value in records:
        store.apply(value)
    return results


def populated() -> ClientQuotaStore:
    store = ClientQuotaStore()
    for entity in (ALICE, ALICE_DEFAULT_CLIENT, ALICE_APP, DEFAULT_USER, APP, DEFAULT_CLIENT):
        assert altered(store, entity, {"producer_byte_rate": 1000.0})[0].error == ErrorCode.NONE
    assert altered(store, IP, {"connection_creation_rate": 5.0})[0].error == ErrorCode.NONE
    return store


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ((), {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
    (entity_of([("group", "g")]), {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
    (entity_of([("user", "")]), {"producer_byte_rate": 1.0}, "Empty user not supported"),
    (entity_of([("ip", "1.2.3.4"), ("user", "u")]), {"connection_creation_rate": 1.0}, "IP entity"),
    (entity_of([("ip", "not an address")]), {"connection_creation_rate": 1.0}, "is not a valid IP"),
    (ALICE, {"bogus": 1.0}, "Invalid configuration key bogus"),
    (ALICE, {"connection_creation_rate": 1.0}, "Invalid configuration key"),
    (IP, {"producer_byte_rate": 1.0}, "Invalid configuration key"),
    (ALICE, {"producer_byte_rate": 0.0}, "must be greater than 0"),
    (ALICE, {"producer_byte_rate": 1.5}, "cannot be a fractional value"),
    (IP, {"connection_creation_rate": 2.0 ** 31}, "too large for an INT"),
])
def test_invalid_alterations_are_invalid_request(entity, ops, message):
    store = ClientQuotaStore()
    records, results = store.alter([(entity, list(ops.items()))])
    assert records == []
    assert results[0].error == ErrorCode.INVALID_REQUEST
    assert message in results[0].message


def test_doubles_keep_fractions_and_removal_drops_the_entity():
    store = ClientQuotaStore()
    assert altered(store, ALICE, {"request_percentage": 12.5, "controller_mutation_rate": 0.5})[0].error == 0
    assert store.get(ALICE) == {"request_percentage": 12.5, "controller_mutation_rate": 0.5}
    records, _ = store.alter([(ALICE, [("request_percentage", 12.5)])])
    assert records == []  # an unchanged value is not recorded
    altered(store, ALICE, {"request_percentage": None, "controller_mutation_rate": None})
    assert len(store) == 0
    records, results = store.alter([(ALICE, [("producer_byte_rate", None)])])
    assert records == [] and results[0].error == ErrorCode.NONE  # removing an absent key: fine, nothing written


def test_duplicate_keys_and_entities_are_refused_as_kafka():
    store = ClientQuotaStore()
    records, results = store.alter([(ALICE, [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)]),
                                    (APP, [("producer_byte_rate", 1.0)]), (APP, [("consumer_byte_rate", 1.0)])])
    assert [(r.entity, r.error) for r in results] == [(ALICE, ErrorCode.INVALID_REQUEST), (APP, ErrorCode.INVALID_REQUEST)]
    assert "Ignoring duplicate entity" in results[1].message
    assert len(records) == 1  # the first APP alteration still stands, as in Kafka's controller


def describe(store, components, strict=False) -> set:
    return {entity for entity, _values in store.describe(components, strict)}


def test_describe_filters():
    store = populated()
    everything = {ALICE, ALICE_DEFAULT_CLIENT, ALICE_APP, DEFAULT_USER, APP, DEFAULT_CLIENT, IP}
    assert describe(store, []) == everything
    assert describe(store, [], strict=True) == set()
    assert describe(store, [("user", MATCH_EXACT, "alice")]) == {ALICE, ALICE_DEFAULT_CLIENT, ALICE_APP}
    assert describe(store, [("user", MATCH_EXACT, "alice")], strict=True) == {ALICE}
    assert describe(store, [("user", MATCH_DEFAULT, None)]) == {DEFAULT_USER}
    assert describe(store, [("client-id", MATCH_DEFAULT, None)]) == {DEFAULT_CLIENT, ALICE_DEFAULT_CLIENT}
    assert describe(store, [("client-id", MATCH_SPECIFIED, None)], strict=True) == {APP, DEFAULT_CLIENT}
    assert describe(store, [("user", MATCH_SPECIFIED, None), ("client-id", MATCH_SPECIFIED, None)]) == {
        ALICE_DEFAULT_CLIENT, ALICE_APP}
    assert describe(store, [("ip", MATCH_SPECIFIED, None)]) == {IP}


@pytest.mark.parametrize(("components", "code"), [
    ([("", MATCH_EXACT, "x")], ErrorCode.INVALID_REQUEST),
    ([("user", MATCH_EXACT, "a"), ("user", MATCH_DEFAULT, None)], ErrorCode.INVALID_REQUEST),
    ([("group", MATCH_SPECIFIED, None)], ErrorCode.UNSUPPORTED_VERSION),
    ([("user", MATCH_EXACT, None)], ErrorCode.INVALID_REQUEST),
    ([("user", MATCH_DEFAULT, "a")], ErrorCode.INVALID_REQUEST),
    ([("user", MATCH_SPECIFIED, "a")], ErrorCode.INVALID_REQUEST),
    ([("user", 7, None)], ErrorCode.INVALID_REQUEST),
    ([("ip", MATCH_SPECIFIED, None), ("user", MATCH_SPECIFIED, None)], ErrorCode.INVALID_REQUEST),
])
def test_bad_filters(components, code):
    with pytest.raises(QuotaRequestError) as err:
        populated().describe(components, False)
    assert err.value.code == code
