"""KIP-714 helpers: OTLP MetricsData payloads as clients push them, client-metrics subscriptions over raw
IncrementalAlterConfigs, and reading the pushed metrics back from the Prometheus endpoint."""

from __future__ import annotations

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from tests.helpers import prometheus_scrape
from tests.helpers.raw_client import RawClient

CLIENT_METRICS = 16
INCREMENTAL_ALTER_CONFIGS = 44
SET, DELETE, APPEND = 0, 1, 2
LAG = "org.apache.kafka.consumer.fetch.manager.records.lag"
SENT = "org.apache.kafka.producer.record.send.total"


def metrics_payload(lag: float = 5, sent: int = 3, *, lag_name: str = LAG) -> bytes:
    """One gauge with (topic, partition) attributes and one monotonic delta sum, serialized MetricsData."""
    attrs = [KeyValue(key="topic", value=AnyValue(string_value="t")),
             KeyValue(key="partition", value=AnyValue(int_value=0))]
    gauge = Metric(name=lag_name, gauge=Gauge(data_points=[NumberDataPoint(as_double=lag, attributes=attrs)]))
    total = Metric(name=SENT, sum=Sum(
        aggregation_temporality=AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA, is_monotonic=True,
        data_points=[NumberDataPoint(as_int=sent)]))
    data = MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[gauge, total])])])
    return data.SerializeToString()


def alter_subscription(client: RawClient, name: str, configs: dict[str, str | None], *, op: int = SET,
                       validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on a CLIENT_METRICS resource (None values are DELETEs): (error code, message)."""
    body = {"resources": [{"resource_type": CLIENT_METRICS, "resource_name": name, "configs": [
        {"name": k, "config_operation": DELETE if v is None else op, "value": v} for k, v in configs.items()]}],
        "validate_only": validate_only}
    answer = client.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]
    return answer.error_code, answer.error_message


def client_samples(port: int) -> list[tuple[str, dict[str, str], float]]:
    """The pushed-metrics samples (shoal_client_*) on the broker's /metrics: (sample name, labels, value)."""
    return [(s.name, dict(s.labels), s.value) for family in prometheus_scrape.families(port)
            for s in family.samples if s.name.startswith("shoal_client_")]
