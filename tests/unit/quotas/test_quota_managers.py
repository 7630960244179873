"""Kafka's quota precedence (DefaultQuotaCallback), throttling by ClientQuotaManager, the request quota's cap, the
fetch bound, and the controller mutation quota (strict and permissive)."""

from __future__ import annotations

import math

import pytest

from broker.quotas.managers import (
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    IpConnectionRateManager,
    quota_limit,
    quota_tags,
)
from broker.quotas.stats import MetricConfig
from broker.quotas.store import ClientQuotaStore, entity_of

CONFIG = MetricConfig(samples=11, window_ms=1000)
U, C = "user", "client-id"

LEVELS = [  # most specific first, as /config/users/<user>/clients/<client-id> ... /config/clients/<default>
    (entity_of([(U, "alice"), (C, "app")]), ("alice", "app")),
    (entity_of([(U, "alice"), (C, None)]), ("alice", "app")),
    (entity_of([(U, "alice")]), ("alice", "")),
    (entity_of([(U, None), (C, "app")]), ("alice", "app")),
    (entity_of([(U, None), (C, None)]), ("alice", "app")),
    (entity_of([(U, None)]), ("alice", "")),
    (entity_of([(C, "app")]), ("", "app")),
    (entity_of([(C, None)]), ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_quota_applies(level):
    """With every level from `level` down configured (value = its rank), alice/app gets the value of `level`."""
    quotas = {entity: float(rank) for rank, (entity, _tags) in enumerate(LEVELS) if rank >= level}
    tags = quota_tags(quotas, "alice", "app")
    assert tags == LEVELS[level][1]
    assert quota_limit(quotas, tags) == float(level)


def test_no_quota_no_limit():
    assert quota_limit({}, quota_tags({}, "bob", "x")) is None
    quotas = {entity_of([(U, "alice")]): 5.0}
    assert quota_limit(quotas, quota_tags(quotas, "bob", "x")) is None


def manager(store, key="producer_byte_rate", **kw) -> ClientQuotaManager:
    return ClientQuotaManager(key, store, lambda: CONFIG, **kw)


def set_quota(store: ClientQuotaStore, entity, key: str, value: float) -> None:
    store.apply({"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "key": key, "value": value,
                 "remove": False})


def test_over_the_byte_rate_is_throttled_as_kafka_computes():
    store = ClientQuotaStore()
    produce = manager(store)
    assert not produce.enabled
    assert produce.record("alice", "app", 1e9, 0) == 0  # no quota anywhere: nothing recorded
    set_quota(store, entity_of([(C, "app")]), "producer_byte_rate", 1000)
    assert produce.record("alice", "app", 5000, 0) == 0  # 5000 B over the 10 s minimum window: 500 B/s
    # 20000 B more: 25000 B / 10 s = 2500 B/s; X = (2500 - 1000) / 1000 * 10 000 ms
    assert produce.record("alice", "app", 20_000, 0) == 15_000
    assert produce.record("bob", "other", 20_000, 0) == 0  # another client, no quota
    assert produce.throttles.total_ms == {("", "app"): 15_000}


def test_clients_sharing_a_client_id_quota_share_its_sensor():
    store = ClientQuotaStore()
    set_quota(store, entity_of([(C, "app")]), "producer_byte_rate", 1000)
    produce = manager(store)
    produce.record("alice", "app", 9000, 0)
    assert produce.record("bob", "app", 9000, 0) > 0  # Kafka's metric tags ("", app): one sensor


def test_request_quota_is_capped_at_one_window():
    store = ClientQuotaStore()
    set_quota(store, entity_of([(U, None)]), "request_percentage", 1)
    request = manager(store, "request_percentage", cap_at_window=True)
    assert request.record("alice", "", 500.0, 0) == CONFIG.window_ms


def test_fetch_bound_and_unrecord():
    store = ClientQuotaStore()
    fetch = manager(store, "consumer_byte_rate")
    assert fetch.max_value_in_window("alice", "app") == math.inf
    set_quota(store, entity_of([(U, "alice")]), "consumer_byte_rate", 1000)
    assert fetch.max_value_in_window("alice", "app") == 1000 * 10  # quota * (samples - 1) * window seconds
    assert fetch.record("alice", "app", 50_000, 0) > 0
    fetch.unrecord("alice", "app", 50_000, 0)
    assert fetch.record("alice", "app", 1000, 0) == 0


def test_a_changed_quota_applies_to_existing_sensors():
    store = ClientQuotaStore()
    set_quota(store, entity_of([(C, "app")]), "producer_byte_rate", 100_000)
    produce = manager(store)
    assert produce.record("a", "app", 20_000, 0) == 0
    set_quota(store, entity_of([(C, "app")]), "producer_byte_rate", 1000)
    assert produce.record("a", "app", 1, 0) > 0


def test_controller_mutation_strict_and_permissive():
    store = ClientQuotaStore()
    now = [0]
    mutations = ControllerMutationQuotaManager(store, lambda: CONFIG, lambda: now[0])
    assert mutations.quota_for("alice", "app", strict=True).record(1e6)  # no quota: unbounded
    set_quota(store, entity_of([(U, "alice")]), "controller_mutation_rate", 10)
    now[0] = 11_000  # the bucket refills to its burst: 11 windows * 1 s * 10 = 110 partitions
    strict = mutations.quota_for("alice", "app", strict=True)
    assert strict.record(100)
    assert strict.record(30)  # 10 tokens left: still accepted, the bucket goes to -20
    assert not strict.record(1)  # below zero: refused (THROTTLING_QUOTA_EXCEEDED)
    assert strict.throttle_time_ms() == 2000  # 20 tokens at 10 per second
    now[0] += 500
    assert strict.throttle_time_ms() == 1500
    permissive = mutations.quota_for("alice", "app", strict=False)
    assert permissive.record(10)  # never refused, only throttled
    assert permissive.throttle_time_ms() == 2500


def test_connection_creation_rate_per_address_then_default():
    store = ClientQuotaStore()
    connections = IpConnectionRateManager(store, lambda: CONFIG)
    assert connections.record("10.0.0.1", 0) == 0  # no ip quota
    set_quota(store, entity_of([("ip", None)]), "connection_creation_rate", 100)
    set_quota(store, entity_of([("ip", "10.0.0.1")]), "connection_creation_rate", 1)
    assert connections.limit_for("10.0.0.1") == 1 and connections.limit_for("10.0.0.2") == 100
    # 1 per second over the 10 s a young sensor is measured on: 10 accepted, the 11th throttled (and not counted)
    assert [connections.record("10.0.0.1", 0) for _ in range(10)] == [0] * 10
    # (1.1 - 1) / 1 * 10 000 ms = 1 000 ms, which is also the cap (one window); not counted, so again the same
    assert connections.record("10.0.0.1", 0) == 1000
    assert connections.record("10.0.0.1", 0) == 1000
    assert connections.record("10.0.0.2", 0) == 0
