"""Component `metrics`: the broker's Prometheus registry, its scrape-time collectors (with prometheus-client's
process and platform collectors), the event-loop lag watchdog and, when `metrics.prometheus.listener` is set, the HTTP endpoint. Off by default: no port is opened.

One registry per broker (never prometheus-client's global default), so brokers in one process and tests do not
collide.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector

from broker.config import parse_host_port
from broker.metrics.collectors import GroupCollector, LogCollector, ServerCollector, SharePartitionCollector
from broker.metrics.http import MetricsEndpoint
from broker.metrics.loop_lag import LoopLagWatchdog


class MetricsService:
    def __init__(self, broker: Any, registry: CollectorRegistry) -> None:
        self._broker = broker
        self.registry = registry
        self.collectors = (LogCollector(broker), SharePartitionCollector(broker), GroupCollector(broker),
                           ServerCollector(broker))
        for collector in self.collectors:
            registry.register(collector)
        # process_*: RSS, CPU seconds, open file descriptors (read from /proc at scrape time); python_info.
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        self.watchdog = LoopLagWatchdog(registry, warn_s=broker.config.get("shoal.loop.lag.warn.ms") / 1000)
        address = parse_host_port(broker.config.get("metrics.prometheus.listener"))
        self.endpoint = MetricsEndpoint(registry, *address, loop_collectors=self.collectors) \
            if address is not None else None

    @property
    def port(self) -> int | None:
        """The endpoint's bound port, or None when it is off."""
        return self.endpoint.port if self.endpoint is not None else None

    async def start(self) -> None:
        self._broker.spawn(self.watchdog.run(), "loop-lag-watchdog")
        if self.endpoint is not None:
            await self.endpoint.start()

    async def close(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.close()


def build(broker: Any) -> MetricsService:
    """Create component `metrics` on the registry the router already counts requests in."""
    return broker.add_component("metrics", MetricsService(broker, broker.router.request_metrics.registry))
