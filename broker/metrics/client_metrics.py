"""Metrics pushed by clients (KIP-714 PushTelemetry), exported at scrape time, labelled by client instance.

Families (every sample labelled client_instance_id, client_id, client_software_name, client_software_version):
- `shoal_client_metric{name, attributes}`: gauges and non-monotonic sums as last pushed;
- `shoal_client_counter_total{name, attributes}`: monotonic sums, the pushed deltas added up (the
  broker asks clients for delta temporality, as Kafka); histograms as `<name>.count` and `<name>.sum`;
- per instance: `shoal_client_telemetry_pushes_total`, `shoal_client_telemetry_last_push_age_seconds` and
  `shoal_client_telemetry_dropped_points_total`.
`name` is the OTLP metric name as the client sends it (org.apache.kafka.producer...), `attributes` its data
point's attributes as sorted `key=value` pairs joined by commas. Instances that expire or terminate vanish at the
next scrape (see broker/telemetry/store.py for the bounds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.metrics.collectors import LoopStateCollector

if TYPE_CHECKING:
    from broker.telemetry.manager import ClientMetricsManager
    from broker.telemetry.store import ClientMetricsStore

CLIENT = ["client_instance_id", "client_id", "client_software_name", "client_software_version"]


class ClientTelemetryCollector(LoopStateCollector):
    def __init__(self, manager: ClientMetricsManager | None, store: ClientMetricsStore | None,
                 clock: Callable[[], int]) -> None:
        self._manager = manager
        self._store = store
        self._clock = clock  # milliseconds, the clock the store stamps pushes with

    def read(self) -> list[tuple]:
        if self._manager is None or self._store is None:
            return []
        now = self._clock()
        self._manager.expire(now)
        self._store.expire(now)
        return [(tuple(s.labels), s.pushes, (now - s.last_push_ms) / 1000, s.dropped, list(s.gauges.items()),
                 list(s.counters.items())) for s in self._store.clients.values()]

    def build(self, rows: list[tuple]) -> Iterator[Metric]:
        gauge = GaugeMetricFamily("shoal_client_metric", "A metric a client pushed (KIP-714), last value",
                                  labels=[*CLIENT, "name", "attributes"])
        counter = CounterMetricFamily("shoal_client_counter", "A monotonic metric a client pushed (KIP-714), "
                                      "its deltas added up", labels=[*CLIENT, "name", "attributes"])
        pushes = CounterMetricFamily("shoal_client_telemetry_pushes", "Accepted telemetry pushes", labels=CLIENT)
        age = GaugeMetricFamily("shoal_client_telemetry_last_push_age_seconds", "Seconds since the last push",
                                labels=CLIENT)
        dropped = CounterMetricFamily("shoal_client_telemetry_dropped_points",
                                      "Data points dropped by the per-client series bound", labels=CLIENT)
        for labels, count, seconds, lost, gauges, counters in rows:
            for (name, attrs), value in gauges:
                gauge.add_metric([*labels, name, attrs], value)
            for (name, attrs), value in counters:
                counter.add_metric([*labels, name, attrs], value)
            pushes.add_metric(list(labels), count)
            age.add_metric(list(labels), seconds)
            dropped.add_metric(list(labels), lost)
        yield from (gauge, counter, pushes, age, dropped)
