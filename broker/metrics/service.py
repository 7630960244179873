"""Component `metrics`: the broker's Prometheus registry, its scrape-time collectors (with prometheus-client's
process and platform collectors), the event-loop lag watchdog and, when `metrics.prometheus.listener` is set, the HTTP
listener (`/metrics`, and the share-group console at `/` when one is given). Off by default: no port is opened.

One registry per broker (never prometheus-client's global default), so brokers in one process and tests do not
collide.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector

from broker.config import BrokerConfig, parse_host_port
from broker.config.components import ComponentConfig, setting
from broker.metrics.client_metrics import ClientTelemetryCollector
from broker.metrics.collectors import (
    FlushCollector,
    GroupCollector,
    LogCollector,
    ServerCollector,
    SharePartitionCollector,
    TransactionCollector,
)
from broker.metrics.loop_lag import LoopLagWatchdog
from broker.quotas.metrics import QuotaCollector

if TYPE_CHECKING:
    from broker.console.service import Console
    from broker.groups.runtime import GroupCoordinatorRuntime
    from broker.log import GroupCommitFlusher, LogManager
    from broker.metrics.http import MetricsEndpoint
    from broker.quotas.service import QuotaService
    from broker.replica_manager import ReplicaManager
    from broker.server import Server
    from broker.share_partition.manager import SharePartitionManager
    from broker.telemetry.manager import ClientMetricsManager
    from broker.telemetry.store import ClientMetricsStore
    from broker.txn.runtime import TransactionCoordinatorRuntime

Spawn = Callable[[Coroutine[Any, Any, Any], str], asyncio.Task]


@dataclass(frozen=True)
class MetricsConfig(ComponentConfig):
    prometheus_listener: str = setting("metrics.prometheus.listener")  # host:port, empty: no endpoint
    loop_lag_warn_ms: int = setting("shoal.loop.lag.warn.ms")


class MetricsService:
    """`registry` is the one the router already counts requests in; `spawn` runs the watchdog for the life of the
    broker. The components read at scrape time may be None (nothing exported for them); `console`, when given,
    is served on the same listener."""

    def __init__(self, config: BrokerConfig, registry: CollectorRegistry, spawn: Spawn, *,
                 logs: LogManager | None, share_partitions: SharePartitionManager | None,
                 group_coordinator: GroupCoordinatorRuntime | None, server: Server | None,
                 transaction_coordinator: TransactionCoordinatorRuntime | None,
                 replicas: ReplicaManager | None, console: Console | None = None,
                 client_metrics: ClientMetricsManager | None = None,
                 client_metrics_store: ClientMetricsStore | None = None,
                 clock_ms: Callable[[], int] | None = None,
                 quotas: QuotaService | None = None, flusher: GroupCommitFlusher | None = None) -> None:
        self._spawn = spawn
        self.registry = registry
        self.collectors = (LogCollector(logs), SharePartitionCollector(share_partitions, logs),
                           GroupCollector(group_coordinator), ServerCollector(server, share_partitions),
                           TransactionCollector(transaction_coordinator, replicas),
                           ClientTelemetryCollector(client_metrics, client_metrics_store, clock_ms or (lambda: 0)),
                           QuotaCollector(quotas), FlushCollector(flusher))
        for collector in self.collectors:
            registry.register(collector)
        # process_*: RSS, CPU seconds, open file descriptors (read from /proc at scrape time); python_info.
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        settings = MetricsConfig.from_config(config)
        self.watchdog = LoopLagWatchdog(registry, warn_s=settings.loop_lag_warn_ms / 1000)
        address = parse_host_port(settings.prometheus_listener)
        self.endpoint: MetricsEndpoint | None = None
        if address is not None:
            # imported only when the listener is on: aiohttp (and the TLS contexts its client builds at import)
            # cost a broker without it a tenth of its start-up
            from broker.metrics.http import MetricsEndpoint  # noqa: PLC0415

            self.endpoint = MetricsEndpoint(registry, *address, loop_collectors=self.collectors, console=console)

    @property
    def port(self) -> int | None:
        """The endpoint's bound port, or None when it is off."""
        return self.endpoint.port if self.endpoint is not None else None

    async def start(self) -> None:
        self._spawn(self.watchdog.run(), "loop-lag-watchdog")
        if self.endpoint is not None:
            await self.endpoint.start()

    async def close(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.close()
