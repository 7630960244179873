"""ClientMetricsManager (sans-IO, injected clock): instance ids, subscription ids, intervals and Kafka's errors."""

from __future__ import annotations

import uuid

import pytest

from broker.telemetry import subscriptions as sub
from broker.telemetry.manager import (
    ZERO_UUID,
    ClientMetricsManager,
    kafka_uuid_text,
    subscription_id,
)
from protocol.errors import ErrorCode as E

ATTRS = {sub.CLIENT_ID: "app-1", sub.CLIENT_SOFTWARE_NAME: "librdkafka", sub.CLIENT_SOFTWARE_VERSION: "2.16.0",
         sub.CLIENT_SOURCE_ADDRESS: "127.0.0.1", sub.CLIENT_SOURCE_PORT: "50000"}


class Receiver:
    def __init__(self) -> None:
        self.forgotten: list[uuid.UUID] = []

    def forget(self, instance_id: uuid.UUID) -> None:
        self.forgotten.append(instance_id)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def env():
    clock, receiver = Clock(), Receiver()
    manager = ClientMetricsManager(max_bytes=1000, clock=clock, receiver=receiver)
    manager.update_subscription("s1", {"metrics": "org.apache.kafka.producer", "interval.ms": "1000"})
    return manager, clock, receiver


def get(manager, instance_id=ZERO_UUID, attrs=ATTRS, conn=1):
    return manager.get_subscriptions(instance_id, attrs, conn)


def test_get_assigns_an_instance_id_and_the_matching_subscription(env):
    manager, _, _ = env
    answer = get(manager)
    assert answer.error == E.NONE
    instance = answer.instance
    assert instance.instance_id != ZERO_UUID
    assert instance.metrics == ("org.apache.kafka.producer",)
    assert instance.push_interval_ms == 1000
    assert instance.subscription_id == subscription_id(instance.metrics, 1000, instance.instance_id)
    # a known id is kept
    assert manager.instance(instance.instance_id) is instance


def test_subscription_id_is_kafkas_crc32c_formula():
    # "[a, b]100" -> CRC-32C, XOR the Uuid's Java hashCode (msb ^ lsb folded to 32 bits), as a signed int
    from crc32c import crc32c

    instance = uuid.UUID(int=(5 << 64) | 3)
    expected = crc32c(b"[a, b]100") ^ (5 ^ 3)
    expected = expected - 2**32 if expected >= 2**31 else expected
    assert subscription_id(("a", "b"), 100, instance) == expected


def test_union_of_matching_subscriptions_smallest_interval_and_star(env):
    manager, _, _ = env
    manager.update_subscription("s2", {"metrics": "org.apache.kafka.consumer", "interval.ms": "200",
                                       "match": "client_id=app-.*"})
    manager.update_subscription("other", {"metrics": "x", "interval.ms": "100", "match": "client_id=nope"})
    instance = get(manager).instance
    assert instance.metrics == ("org.apache.kafka.consumer", "org.apache.kafka.producer")
    assert instance.push_interval_ms == 200
    manager.update_subscription("all", {"metrics": "*", "match": "client_software_name=librdkafka"})
    assert get(manager, conn=2).instance.metrics == ("*",)


def test_no_matching_subscription_defaults(env):
    manager, _, _ = env
    manager.update_subscription("s1", {})  # removed
    instance = get(manager).instance
    assert instance.metrics == ()
    assert instance.push_interval_ms == sub.DEFAULT_INTERVAL_MS


def test_match_on_instance_id_uses_kafkas_uuid_text(env):
    manager, _, _ = env
    wanted = uuid.UUID(int=12345678901234567890)
    manager.update_subscription("one", {"metrics": "only.me", "match": f"client_instance_id={kafka_uuid_text(wanted)}"})
    assert get(manager, wanted).instance.metrics == ("only.me", "org.apache.kafka.producer")
    assert get(manager, uuid.UUID(int=99), conn=2).instance.metrics == ("org.apache.kafka.producer",)


def test_push_accepted_then_throttled_until_the_interval(env):
    manager, clock, _ = env
    instance = get(manager).instance
    push = lambda terminating=False, sid=None: manager.push(  # noqa: E731
        instance.instance_id, instance.subscription_id if sid is None else sid, terminating, 0, b"m", ATTRS, 1)
    assert push().error == E.NONE  # right after the Get: accepted
    clock.now += 500
    assert push().error == E.THROTTLING_QUOTA_EXCEEDED
    clock.now += 500
    assert push().error == E.NONE


def test_get_throttled_within_the_interval(env):
    manager, clock, _ = env
    instance = get(manager).instance
    assert get(manager, instance.instance_id).error == E.THROTTLING_QUOTA_EXCEEDED
    clock.now += 1000
    assert get(manager, instance.instance_id).error == E.NONE


def test_push_errors_in_kafkas_order(env):
    manager, clock, _ = env
    instance = get(manager).instance
    iid, sid = instance.instance_id, instance.subscription_id
    assert manager.push(ZERO_UUID, sid, False, 0, b"", ATTRS, 1).error == E.INVALID_REQUEST
    assert manager.push(uuid.UUID(int=1), sid, False, 0, b"", ATTRS, 1).error == E.INVALID_REQUEST
    assert manager.push(iid, sid + 1, False, 0, b"", ATTRS, 1).error == E.UNKNOWN_SUBSCRIPTION_ID
    # after an UNKNOWN_SUBSCRIPTION_ID the client may ask again at once, and push right after
    clock.now += 1
    assert get(manager, iid).error == E.NONE
    clock.now += 1
    assert manager.push(iid, sid, False, 9, b"", ATTRS, 1).error == E.UNSUPPORTED_COMPRESSION_TYPE
    clock.now += 1
    assert get(manager, iid).error == E.NONE
    clock.now += 1
    assert manager.push(iid, sid, False, 0, b"x" * 1001, ATTRS, 1).error == E.TELEMETRY_TOO_LARGE
    clock.now += 1000
    accepted = manager.push(iid, sid, False, 0, b"x", ATTRS, 1)
    assert accepted.error == E.NONE
    assert manager.payload_refused(accepted.instance, "bad").error == E.INVALID_RECORD
    assert manager.instance(iid).last_error == E.INVALID_RECORD


def test_terminating_push_is_accepted_early_forgets_series_and_ends_the_instance(env):
    manager, _, receiver = env
    instance = get(manager).instance
    iid, sid = instance.instance_id, instance.subscription_id
    assert manager.push(iid, sid, False, 0, b"m", ATTRS, 1).error == E.NONE
    assert manager.push(iid, sid, True, 0, b"m", ATTRS, 1).error == E.NONE  # within the interval: allowed
    assert receiver.forgotten == [iid]
    assert manager.push(iid, sid, False, 0, b"m", ATTRS, 1).error == E.INVALID_REQUEST
    assert manager.push(iid, sid, False, 0, b"m", ATTRS, 1).error == E.INVALID_REQUEST  # and stays so


def test_changed_subscription_gives_unknown_subscription_id_then_the_new_id(env):
    manager, clock, _ = env
    instance = get(manager).instance
    iid, old = instance.instance_id, instance.subscription_id
    manager.update_subscription("s1", {"metrics": "org.apache.kafka.consumer", "interval.ms": "300"})
    clock.now += 1
    assert manager.push(iid, old, False, 0, b"m", ATTRS, 1).error == E.UNKNOWN_SUBSCRIPTION_ID
    clock.now += 1
    fresh = get(manager, iid)
    assert fresh.error == E.NONE
    assert fresh.instance.subscription_id != old
    assert fresh.instance.metrics == ("org.apache.kafka.consumer",)
    assert fresh.instance.push_interval_ms == 300
    clock.now += 1
    assert manager.push(iid, fresh.instance.subscription_id, False, 0, b"m", ATTRS, 1).error == E.NONE


def test_instances_expire_and_go_with_their_connection(env):
    manager, clock, receiver = env
    a = get(manager, conn=1).instance.instance_id
    b = get(manager, conn=2).instance.instance_id
    manager.connection_closed(1)
    assert manager.instance(a) is None and receiver.forgotten == [a]
    clock.now += 60_000  # max(60 s, 3 intervals of 1 s)
    assert manager.expire() == 1
    assert manager.instance(b) is None and receiver.forgotten == [a, b]


def test_instance_cache_is_bounded_least_recently_used_first():
    receiver = Receiver()
    manager = ClientMetricsManager(max_bytes=10, clock=Clock(), receiver=receiver, max_instances=2)
    ids = [get(manager, conn=n).instance.instance_id for n in range(3)]
    assert len(manager) == 2
    assert receiver.forgotten == [ids[0]]
