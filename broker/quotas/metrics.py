"""Prometheus export of quota throttling, read at scrape time (broker/metrics/collectors.py's contract): the
throttle time given per quota type and (user, client-id), Kafka's per-sensor `throttle-time` metric as counters
(for ConnectionCreation the `user` label holds the address, as Kafka's ip tag)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, Metric

from broker.metrics.collectors import LoopStateCollector

if TYPE_CHECKING:
    from broker.quotas.service import QuotaService

LABELS = ["quota_type", "user", "client_id"]


class QuotaCollector(LoopStateCollector):
    def __init__(self, quotas: QuotaService | None) -> None:
        self._quotas = quotas

    def read(self) -> list[tuple]:
        quotas = self._quotas
        if quotas is None:
            return []
        rows = []
        for quota_type, manager in (("Produce", quotas.produce), ("Fetch", quotas.fetch),
                                    ("Request", quotas.request), ("ControllerMutation", quotas.controller_mutation),
                                    ("ConnectionCreation", quotas.connection_creation)):
            stats = manager.throttles
            for (user, client_id), total in stats.total_ms.items():
                rows.append((quota_type, user, client_id, total, stats.count[(user, client_id)]))
        return rows

    def build(self, rows: list[tuple]) -> Iterator[Metric]:
        total = CounterMetricFamily("shoal_quota_throttle_time_ms", "Throttle time given to clients over a quota, "
                                    "in milliseconds, per quota type and (user, client-id).", labels=LABELS)
        count = CounterMetricFamily("shoal_quota_throttled_responses", "Responses throttled for a quota, per quota "
                                    "type and (user, client-id).", labels=LABELS)
        for quota_type, user, client_id, ms, n in rows:
            total.add_metric([quota_type, user, client_id], ms)
            count.add_metric([quota_type, user, client_id], n)
        yield total
        yield count
