"""Decode a PushTelemetry payload: OTLP MetricsData (opentelemetry-proto's generated classes), possibly compressed
with the codec the push names (the record-batch codecs of protocol/compression.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from broker.telemetry.manager import PayloadError
from protocol.compression import NONE, CompressionError, decompress

MAX_DECOMPRESSED = 32 << 20  # a payload inflating past this is refused (telemetry.max.bytes bounds the input)

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

GAUGE, COUNTER = "gauge", "counter"


class Point(NamedTuple):
    kind: str  # GAUGE: the last value wins; COUNTER: monotonic, `delta` values are added up
    name: str
    attributes: str  # the data point's attributes, "k=v" sorted and comma-joined (one label)
    value: float
    delta: bool


def _text(value: AnyValue) -> str:
    which = value.WhichOneof("value")
    if which is None:
        return ""
    if which in ("array_value", "kvlist_value", "bytes_value"):
        return str(getattr(value, which)).replace("\n", " ").strip()
    got = getattr(value, which)
    return str(got).lower() if which == "bool_value" else str(got)


def _attributes(attrs) -> str:
    return ",".join(sorted(f"{kv.key}={_text(kv.value)}" for kv in attrs))


def _number(point) -> float:
    return float(point.as_double if point.WhichOneof("value") == "as_double" else point.as_int)


def decode(compression_type: int, payload: bytes) -> list[Point]:
    """The gauges and sums of the payload as points; histograms and summaries are exported as their count and sum.
    Raises PayloadError for what cannot be decompressed or parsed."""
    # imported on the first push: protobuf and the generated classes cost ~9 ms of every broker's start-up
    from google.protobuf.message import DecodeError  # noqa: PLC0415
    from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, MetricsData  # noqa: PLC0415

    try:
        raw = bytes(payload) if compression_type == NONE else bytes(
            decompress(compression_type, payload, MAX_DECOMPRESSED))
        data = MetricsData.FromString(raw)
    except (CompressionError, DecodeError, ValueError) as err:
        raise PayloadError(f"undecodable metrics payload: {err}") from None
    points: list[Point] = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    points += [Point(GAUGE, metric.name, _attributes(p.attributes), _number(p), False)
                               for p in metric.gauge.data_points]
                elif kind == "sum":
                    delta = metric.sum.aggregation_temporality == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
                    monotonic = metric.sum.is_monotonic
                    points += [Point(COUNTER if monotonic else GAUGE, metric.name, _attributes(p.attributes),
                                     _number(p), delta and monotonic) for p in metric.sum.data_points]
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    delta = kind != "summary" and getattr(metric, kind).aggregation_temporality == \
                        AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
                    for p in getattr(metric, kind).data_points:
                        attrs = _attributes(p.attributes)
                        points.append(Point(COUNTER, metric.name + ".count", attrs, float(p.count), delta))
                        points.append(Point(COUNTER, metric.name + ".sum", attrs, float(p.sum), delta))
    return points
