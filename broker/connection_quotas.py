"""Kafka's connection quotas: `max.connections`, `max.connections.per.ip` (+ `.overrides`) and
`max.connection.creation.rate`.

As in Kafka's acceptor: a new connection from an address already holding its limit is closed at once, and
when the broker holds `max.connections` the accept loop waits until a connection closes (new clients queue in
the listen backlog meanwhile). Over the broker's connection creation rate, the accept loop waits the throttle
time before taking the new connection on (Kafka's ConnectionQuotas.waitForConnectionSlot). Limits are read from
the config at each accept, so dynamic changes apply to new connections. Host names in the overrides are resolved
when the setting changes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from broker.config import INT_MAX, parse_ip_overrides
from broker.config.components import ComponentConfig, setting
from broker.quotas.stats import MetricConfig, Rate, throttle_time_ms

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ConnectionQuotaConfig(ComponentConfig):
    max_connections: int = setting("max.connections")
    max_connections_per_ip: int = setting("max.connections.per.ip")
    max_connections_per_ip_overrides: str = setting("max.connections.per.ip.overrides")
    max_connection_creation_rate: int = setting("max.connection.creation.rate")
    # the window the creation rate is measured over (Kafka's QuotaConfig)
    num_quota_samples: int = setting("quota.window.num")
    quota_window_size_ms: int = setting("quota.window.size.seconds", scale=1000)


def normalize_ip(address: str) -> str:
    """One spelling per address (`::1`, `127.0.0.1`), so overrides and peers compare equal."""
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).compressed
    except ValueError:
        return address


class ConnectionQuotas:
    def __init__(self, config: Callable[[], ConnectionQuotaConfig] = ConnectionQuotaConfig) -> None:
        """`config()` the current limits (read at each use: dynamic changes apply to new connections)."""
        self._config = config
        self.total = 0
        self.per_ip: Counter[str] = Counter()
        self._overrides_text: str | None = None
        self._overrides: dict[str, int] = {}
        self._slot_freed: asyncio.Event | None = None
        self._creation_rate = Rate()  # the broker's new connections (max.connection.creation.rate)

    # --- limits --------------------------------------------------------------------------------------------
    def max_connections(self) -> int:
        return self._config().max_connections

    def limit_for(self, ip: str) -> int:
        return self._overrides.get(ip, self._config().max_connections_per_ip)

    async def refresh(self) -> None:
        """Re-read the overrides when their text changed, resolving host names off the event loop."""
        text = self._config().max_connections_per_ip_overrides
        if text == self._overrides_text:
            return
        self._overrides_text = text
        resolved: dict[str, int] = {}
        loop = asyncio.get_running_loop()
        for host, limit in parse_ip_overrides(text).items():
            try:
                resolved[ipaddress.ip_address(host).compressed] = limit
                continue
            except ValueError:
                pass
            try:
                infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            except OSError as err:
                log.warning("cannot resolve a max.connections.per.ip.overrides host", host=host, error=str(err))
                continue
            for info in infos:
                resolved[normalize_ip(str(info[4][0]))] = limit  # an IP address's text for SOCK_STREAM
        self._overrides = resolved

    # --- accounting ----------------------------------------------------------------------------------------
    def try_acquire(self, ip: str) -> bool:
        """Count a new connection from `ip`, or False when its address is at its limit (close it)."""
        if self.per_ip[ip] >= self.limit_for(ip):
            return False
        self.per_ip[ip] += 1
        self.total += 1
        return True

    def release(self, ip: str) -> None:
        count = self.per_ip[ip] - 1
        if count > 0:
            self.per_ip[ip] = count
        else:
            del self.per_ip[ip]
        self.total -= 1
        if self._slot_freed is not None:
            self._slot_freed.set()

    def creation_throttle_ms(self, now_ms: int) -> int:
        """Record a new connection against max.connection.creation.rate (Kafka's broker connection rate sensor:
        recorded even when over); the ms to wait before taking it on, at most one quota window (0: at once)."""
        settings = self._config()
        limit = settings.max_connection_creation_rate
        if limit >= INT_MAX:
            return 0
        config = MetricConfig(settings.num_quota_samples, settings.quota_window_size_ms)
        rate = self._creation_rate
        rate.record(config, 1.0, now_ms)
        observed = rate.measure(config, now_ms)
        if observed <= limit:
            return 0
        if limit == 0:
            return config.window_ms
        return max(0, min(throttle_time_ms(observed, limit, rate.window_size_ms(config, now_ms)), config.window_ms))

    def at_capacity(self) -> bool:
        return self.total >= self.max_connections()

    async def wait_for_slot(self) -> None:
        """Return when the broker holds fewer than max.connections connections."""
        while self.at_capacity():
            if self._slot_freed is None:
                self._slot_freed = asyncio.Event()
            self._slot_freed.clear()
            await self._slot_freed.wait()
