"""Client-metrics subscription configs validated as Kafka's ClientMetricsConfigs."""

from __future__ import annotations

import pytest

from broker.telemetry import subscriptions as sub
from protocol.errors import ErrorCode as E


@pytest.mark.parametrize("name, props, code", [
    ("", {"metrics": "a"}, E.INVALID_REQUEST),
    ("s", {"unknown": "1"}, E.INVALID_REQUEST),
    ("s", {"interval.ms": "99"}, E.INVALID_REQUEST),
    ("s", {"interval.ms": "3600001"}, E.INVALID_REQUEST),
    ("s", {"interval.ms": "ten"}, E.INVALID_CONFIG),
    ("s", {"match": "client_id"}, E.INVALID_CONFIG),
    ("s", {"match": "client_id="}, E.INVALID_CONFIG),
    ("s", {"match": "a=b=c"}, E.INVALID_CONFIG),
    ("s", {"match": "rack=x"}, E.INVALID_CONFIG),
    ("s", {"match": "client_id=[unclosed"}, E.INVALID_CONFIG),
])
def test_invalid(name, props, code):
    with pytest.raises(sub.SubscriptionError) as err:
        sub.validate(name, props)
    assert err.value.code == code


def test_valid_and_parsed():
    props = {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer", "interval.ms": "100",
             "match": "client_id=app-.*, client_software_name=librdkafka"}
    sub.validate("s", props)
    s = sub.Subscription.from_configs("s", props)
    assert s.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer")
    assert s.interval_ms == 100
    assert s.matches({"client_id": "app-7", "client_software_name": "librdkafka"})
    assert not s.matches({"client_id": "app-7", "client_software_name": "apache-kafka-java"})
    assert not s.matches({"client_id": "xapp-7", "client_software_name": "librdkafka"})  # full match
    assert not s.matches({"client_id": "app-7"})  # an absent attribute matches nothing
    assert sub.Subscription.from_configs("d", {}).interval_ms == sub.DEFAULT_INTERVAL_MS
    assert sub.Subscription.from_configs("d", {}).matches({})
