"""KIP-714 client telemetry against a real broker: a confluent-kafka producer with enable.metrics.push pushes the
metrics a CLIENT_METRICS subscription asks for, they appear on /metrics labelled by its client instance, a change
of the subscription at run time takes effect, and a closing client's series go. Raw requests for the errors,
the configs' validation, ListConfigResources and the subscriptions surviving a restart."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from protocol import compression
from protocol.errors import ErrorCode as E
from tests.helpers.broker_process import BrokerProcess, start_broker, venv_python
from tests.helpers.raw_client import RawClient
from tests.helpers.telemetry import LAG, SENT, alter_subscription, client_samples, metrics_payload
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

GET, PUSH, LIST, DESCRIBE = 71, 72, 74, 32
MAX_BYTES = 4096
ZERO = uuid.UUID(int=0)
OVERRIDES = {"metrics.prometheus.listener": "127.0.0.1:0", "telemetry.max.bytes": str(MAX_BYTES)}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    proc = start_broker(tmp_path_factory.mktemp("telemetry"), OVERRIDES)
    try:
        yield proc
    finally:
        proc.stop()


def pushed_names(broker: BrokerProcess, client_id: str) -> dict[str, str]:
    """Metric name -> client instance id of the gauges and counters pushed by clients with this client id."""
    return {labels["name"]: labels["client_instance_id"] for name, labels, _ in client_samples(broker.ports["prometheus"])
            if name in ("shoal_client_metric", "shoal_client_counter_total") and labels["client_id"] == client_id}


def test_confluent_producer_pushes_subscribed_metrics_and_a_change_takes_effect(broker):
    with RawClient(broker.port) as admin:
        assert alter_subscription(admin, "tel-latency", {
            "metrics": "org.apache.kafka.producer.node.request.latency", "interval.ms": "200",
            "match": "client_id=tel-producer,client_software_name=confluent-kafka-python"}) == (0, None)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "tel-producer",
                         "enable.metrics.push": True, "linger.ms": 5})

    def names() -> dict[str, str]:
        producer.produce("telemetry-topic", b"v")
        producer.poll(0.05)
        return pushed_names(broker, "tel-producer")

    first = wait_until(names, 60, "the producer's pushed latency metrics on /metrics")
    assert set(first) <= {"org.apache.kafka.producer.node.request.latency.avg",
                          "org.apache.kafka.producer.node.request.latency.max"}, first
    instance = next(iter(first.values()))
    assert len(instance) == 22  # Kafka's Uuid text: URL-safe base64 without padding

    # At run time: the subscription now also asks for the record queue times (the client's next push is refused
    # with UNKNOWN_SUBSCRIPTION_ID, it asks again and pushes what the new subscription names). The whole list is
    # SET: Kafka 4.4 refuses to APPEND to a client-metrics config.
    with RawClient(broker.port) as admin:
        assert alter_subscription(admin, "tel-latency", {"metrics": "org.apache.kafka.producer.node.request.latency,"
                                                                    "org.apache.kafka.producer.record.queue.time"},
                                  op=2)[0] == E.INVALID_CONFIG
        assert alter_subscription(admin, "tel-latency", {"metrics": "org.apache.kafka.producer.node.request.latency,"
                                                                    "org.apache.kafka.producer.record.queue.time"}
                                  ) == (0, None)
    later = wait_until(lambda: (n := names()).get("org.apache.kafka.producer.record.queue.time.avg") and n, 60,
                       "the newly subscribed metric on /metrics")
    assert later["org.apache.kafka.producer.record.queue.time.avg"] == instance  # the same client instance

    # Closing the producer sends a terminating push: its series go.
    producer.flush(10)
    producer.close()
    wait_until(lambda: not pushed_names(broker, "tel-producer"), 30, "the closed producer's series to go")


def get(client: RawClient, instance: uuid.UUID = ZERO):
    return client.call(GET, 0, {"client_instance_id": instance})


def push(client: RawClient, instance: uuid.UUID, subscription: int, metrics: bytes = b"", *,
         compression_type: int = 0, terminating: bool = False) -> int:
    return client.call(PUSH, 0, {"client_instance_id": instance, "subscription_id": subscription,
                                 "terminating": terminating, "compression_type": compression_type,
                                 "metrics": metrics}).error_code


def test_raw_get_and_push_with_kafkas_errors(broker):
    with RawClient(broker.port, client_id="raw-telemetry") as client:
        assert alter_subscription(client, "raw", {"metrics": "*", "interval.ms": "300",
                                                  "match": "client_id=raw-.*"}) == (0, None)
        answer = get(client)
        assert answer.error_code == 0
        instance, sid = answer.client_instance_id, answer.subscription_id
        assert instance != ZERO
        assert list(answer.accepted_compression_types) == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
        assert (answer.push_interval_ms, answer.telemetry_max_bytes, answer.delta_temporality) == (300, MAX_BYTES,
                                                                                                   True)
        assert list(answer.requested_metrics) == ["*"]
        assert get(client, instance).error_code == E.THROTTLING_QUOTA_EXCEEDED  # within the interval

        payload = compression.compress(compression.GZIP, metrics_payload(lag=7, sent=2))
        assert push(client, instance, sid, payload, compression_type=compression.GZIP) == 0
        assert push(client, instance, sid) == E.THROTTLING_QUOTA_EXCEEDED  # sooner than the interval
        samples = wait_until(lambda: [s for s in client_samples(broker.ports["prometheus"])
                                      if s[1].get("client_id") == "raw-telemetry" and "name" in s[1]], 30,
                             "the raw push's samples")
        assert ("shoal_client_metric", LAG, "partition=0,topic=t", 7.0) in {
            (n, labels["name"], labels["attributes"], v) for n, labels, v in samples}
        assert ("shoal_client_counter_total", SENT, 2.0) in {(n, labels["name"], v) for n, labels, v in samples}

        assert push(client, ZERO, sid) == E.INVALID_REQUEST
        assert wait_until(lambda: (code := push(client, instance, sid + 1)) != E.THROTTLING_QUOTA_EXCEEDED and code, 30,
                   "a push after the interval") == E.UNKNOWN_SUBSCRIPTION_ID
        assert wait_until(lambda: (r := push(client, instance, sid, b"x", compression_type=7))
                          != E.THROTTLING_QUOTA_EXCEEDED and r, 30, "a push after the interval") == \
            E.UNSUPPORTED_COMPRESSION_TYPE
        for metrics, codec, expected in ((b"x" * (MAX_BYTES + 1), 0, E.TELEMETRY_TOO_LARGE),
                                         (b"\xff\xfe not protobuf", 0, E.INVALID_RECORD),
                                         (b"not zstd", compression.ZSTD, E.INVALID_RECORD)):
            code = wait_until(lambda m=metrics, c=codec: (r := push(client, instance, sid, m, compression_type=c))
                              != E.THROTTLING_QUOTA_EXCEEDED and r, 30, "a push after the interval")
            assert code == expected
        # a terminating push is accepted at once; nothing is accepted after it
        assert push(client, instance, sid, terminating=True) == 0
        assert push(client, instance, sid) == E.INVALID_REQUEST
        wait_until(lambda: not [s for s in client_samples(broker.ports["prometheus"])
                                if s[1].get("client_id") == "raw-telemetry"], 30, "the terminated client's series")


def test_unsupported_compression_type(broker):
    with RawClient(broker.port, client_id="raw-codec") as client:
        answer = get(client)
        assert push(client, answer.client_instance_id, answer.subscription_id, b"x", compression_type=9) == \
            E.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("configs, code", [
    ({"interval.ms": "99"}, E.INVALID_REQUEST),
    ({"interval.ms": "ten"}, E.INVALID_CONFIG),
    ({"color": "blue"}, E.INVALID_REQUEST),
    ({"match": "client_id"}, E.INVALID_CONFIG),
    ({"match": "rack=a"}, E.INVALID_CONFIG),
    ({"match": "client_id=[x"}, E.INVALID_CONFIG),
])
def test_subscription_configs_validated_as_kafka(broker, configs, code):
    with RawClient(broker.port) as client:
        assert alter_subscription(client, "bad", configs)[0] == code
        assert "bad" not in {r.resource_name for r in client.call(LIST, 1, {"resource_types": [16]}).config_resources}


def test_subscriptions_listed_described_and_kept_across_a_restart(tmp_path):
    broker = start_broker(tmp_path, OVERRIDES)
    try:
        with RawClient(broker.port) as client:
            assert alter_subscription(client, "kept", {"metrics": "a,b", "interval.ms": "1000"}) == (0, None)
            assert alter_subscription(client, "gone", {"metrics": "x"}) == (0, None)
            assert alter_subscription(client, "gone", {"metrics": None}) == (0, None)  # no configs left: removed
            assert alter_subscription(client, "dry", {"metrics": "x"}, validate_only=True) == (0, None)
        broker.stop()
        broker.start()
        with RawClient(broker.port) as client:
            v0 = client.call(LIST, 0, {})
            assert (v0.error_code, [r.resource_name for r in v0.config_resources]) == (0, ["kept"])
            v1 = client.call(LIST, 1, {"resource_types": []})
            assert {(r.resource_type, r.resource_name) for r in v1.config_resources} >= {(16, "kept"), (4, "1"),
                                                                                      (2, "__consumer_offsets")}
            assert client.call(LIST, 1, {"resource_types": [3]}).error_code == E.UNSUPPORTED_VERSION
            described = client.call(DESCRIBE, 4, {"resources": [{"resource_type": 16, "resource_name": "kept",
                                                                 "configuration_keys": None}],
                                                  "include_synonyms": False, "include_documentation": False})
            result = described.results[0]
            assert result.error_code == 0
            # Kafka 4.4 shows every client-metrics config, with its type: unset ones at their defaults (source 5)
            assert {(c.name, c.value, c.config_source, c.config_type) for c in result.configs} == {
                ("metrics", "a,b", 7, 7), ("interval.ms", "1000", 7, 3), ("match", "", 5, 7)}
            # the kept subscription is served: a client gets its interval
            assert get(client).push_interval_ms == 1000
    finally:
        broker.stop()


def test_telemetry_needs_no_acl_client_metrics_configs_need_the_cluster(tmp_path):
    """With the authorizer on and no ACLs: Get/PushTelemetry are served (Kafka checks nothing), describing or
    altering a CLIENT_METRICS resource is CLUSTER_AUTHORIZATION_FAILED (DESCRIBE_CONFIGS / ALTER_CONFIGS on the
    cluster), as is ListConfigResources."""
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", python=venv_python(), overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}).start()
    try:
        with RawClient(broker.port) as client:
            answer = get(client)
            assert answer.error_code == 0 and answer.client_instance_id != ZERO
            assert push(client, answer.client_instance_id, answer.subscription_id) == 0
            assert alter_subscription(client, "s", {"metrics": "*"})[0] == E.CLUSTER_AUTHORIZATION_FAILED
            described = client.call(DESCRIBE, 4, {"resources": [{"resource_type": 16, "resource_name": "s",
                                                                 "configuration_keys": None}]})
            assert described.results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
            assert client.call(LIST, 1, {}).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    finally:
        broker.stop()
