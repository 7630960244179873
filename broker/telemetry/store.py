"""What clients push, kept for the Prometheus endpoint (the broker's telemetry receiver).

Per client instance: its labels (instance id as Kafka prints a Uuid, client id, software name and version), the time of its last push
and one value per (metric name, data-point attributes). Gauges keep the last value; monotonic sums pushed as
deltas (the broker asks for delta temporality, as Kafka) are added up so they export as counters. Cardinality is
bounded: at most MAX_SERIES_PER_CLIENT series per instance and MAX_SERIES in all (new ones beyond are dropped and
counted), an instance's
series go when it terminates, expires or disconnects (the manager calls `forget`) and when its last push is older
than EXPIRY_INTERVALS push intervals.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.telemetry import otlp
from broker.telemetry.manager import EXPIRY_INTERVALS, ClientInstance, kafka_uuid_text
from broker.telemetry.subscriptions import CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION

MAX_SERIES_PER_CLIENT = 2000
MAX_SERIES = 200_000  # all clients together: a scrape stays around a hundred megabytes of text at most


class ClientLabels(NamedTuple):
    client_instance_id: str
    client_id: str
    client_software_name: str
    client_software_version: str


@dataclass(slots=True)
class ClientSeries:
    labels: ClientLabels
    interval_ms: int
    last_push_ms: int
    pushes: int = 0
    dropped: int = 0  # data points refused by the per-client series bound
    gauges: dict[tuple[str, str], float] = field(default_factory=dict)
    counters: dict[tuple[str, str], float] = field(default_factory=dict)


class ClientMetricsStore:
    def __init__(self, clock: Callable[[], int], *, max_series: int = MAX_SERIES_PER_CLIENT,
                 max_total: int = MAX_SERIES) -> None:
        self._clock = clock  # milliseconds
        self._max_series = max_series
        self._max_total = max_total
        self.total = 0  # series kept, all clients together
        self.clients: dict[uuid.UUID, ClientSeries] = {}

    def record(self, instance: ClientInstance, points: list[otlp.Point], now_ms: int) -> None:
        """Keep the decoded points of an accepted push."""
        attrs = instance.attributes
        series = self.clients.get(instance.instance_id)
        if series is None:
            labels = ClientLabels(kafka_uuid_text(instance.instance_id), attrs.get(CLIENT_ID) or "",
                                  attrs.get(CLIENT_SOFTWARE_NAME) or "", attrs.get(CLIENT_SOFTWARE_VERSION) or "")
            series = self.clients[instance.instance_id] = ClientSeries(labels, instance.push_interval_ms, now_ms)
        series.interval_ms = instance.push_interval_ms
        series.last_push_ms = now_ms
        series.pushes += 1
        for point in points:
            key = (point.name, point.attributes)
            table = series.gauges if point.kind == otlp.GAUGE else series.counters
            if key not in table:
                if len(series.gauges) + len(series.counters) >= self._max_series or self.total >= self._max_total:
                    series.dropped += 1
                    continue
                self.total += 1
            table[key] = table.get(key, 0.0) + point.value if point.delta else point.value

    # --- TelemetryReceiver ---------------------------------------------------------------------------------
    def forget(self, instance_id: uuid.UUID) -> None:
        series = self.clients.pop(instance_id, None)
        if series is not None:
            self.total -= len(series.gauges) + len(series.counters)

    # --- expiry and reading --------------------------------------------------------------------------------
    def expire(self, now_ms: int | None = None) -> None:
        now = self._clock() if now_ms is None else now_ms
        stale = [i for i, s in self.clients.items() if now - s.last_push_ms > EXPIRY_INTERVALS * s.interval_ms]
        for instance_id in stale:
            self.forget(instance_id)
