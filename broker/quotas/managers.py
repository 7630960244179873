"""Kafka's quota managers, sans-IO (times in milliseconds are passed in).

`ClientQuotaManager` is one quota type (produce, fetch or request): one sensor (a `Rate`) per set of metric tags,
the tags and the limit chosen as Kafka's DefaultQuotaCallback does, over the entities holding a value for the
type's key, most specific first:
    /config/users/<user>/clients/<client-id>, /config/users/<user>/clients/<default>, /config/users/<user>,
    /config/users/<default>/clients/<client-id>, /config/users/<default>/clients/<default>, /config/users/<default>,
    /config/clients/<client-id>, /config/clients/<default>
Recording checks the quota after adding the value (Kafka's Sensor.record with checkQuotas) and returns the throttle
time of QuotaUtils.throttleTime; the request quota caps it at one window (ClientRequestQuotaManager).
`ControllerMutationQuotaManager` is Kafka's: a TokenBucket per tags, strict (v6+ of the topic APIs: a mutation is
refused while the bucket is below zero) or permissive (recorded, only throttled).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.quotas.stats import MetricConfig, Rate, TokenBucket, throttle_time_ms
from broker.quotas.store import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    USER,
    ClientQuotaStore,
    Entity,
    normalize_ip,
)

Tags = tuple[str, str]  # (user, client-id) as Kafka's metric tags; "" for a tag not used
INACTIVE_SENSOR_MS = 3_600_000  # Kafka's InactiveSensorExpirationTimeSeconds
_SWEEP_MS = 60_000


def _u(user: str | None) -> Entity:
    return ((USER, user),)


def _c(client_id: str | None) -> Entity:
    return ((CLIENT_ID, client_id),)


def _uc(user: str | None, client_id: str | None) -> Entity:
    return ((CLIENT_ID, client_id), (USER, user))  # sorted by type, as store.entity_of


def quota_tags(quotas: dict[Entity, float], user: str, client_id: str) -> Tags:
    """DefaultQuotaCallback.quotaMetricTags: which sensor a (user, client-id) records to."""
    if _uc(user, client_id) in quotas or _uc(user, None) in quotas:
        return user, client_id
    if _u(user) in quotas:
        return user, ""
    if _uc(None, client_id) in quotas or _uc(None, None) in quotas:
        return user, client_id
    if _u(None) in quotas:
        return user, ""
    return "", client_id


def quota_limit(quotas: dict[Entity, float], tags: Tags) -> float | None:
    """DefaultQuotaCallback.quotaLimit for a sensor's tags (None: no quota)."""
    user, client_id = tags
    if user and client_id:
        order = [_uc(user, client_id), _uc(user, None), _uc(None, client_id), _uc(None, None)]
    elif user:
        order = [_u(user), _u(None)]
    elif client_id:
        order = [_c(client_id), _c(None)]
    else:
        return None
    for entity in order:
        if entity in quotas:
            return quotas[entity]
    return None


@dataclass(slots=True)
class Sensor:
    tags: Tags
    rate: Rate | TokenBucket
    last_ms: int = 0


@dataclass(slots=True)
class ThrottleStats:
    """Throttle time given per (user, client-id) tags (Kafka's per-sensor throttle-time metric), for Prometheus."""
    total_ms: dict[Tags, float] = field(default_factory=dict)
    count: dict[Tags, int] = field(default_factory=dict)

    def add(self, tags: Tags, ms: int) -> None:
        self.total_ms[tags] = self.total_ms.get(tags, 0.0) + ms
        self.count[tags] = self.count.get(tags, 0) + 1

    def forget(self, tags: Tags) -> None:
        self.total_ms.pop(tags, None)
        self.count.pop(tags, None)


class _Quotas:
    """The entities holding a value for one key, with the sensors of that quota type."""

    def __init__(self, key: str, store: ClientQuotaStore, config: Callable[[], MetricConfig]) -> None:
        self.key = key
        self._store = store
        self._config = config
        self._version = -1
        self._quotas: dict[Entity, float] = {}
        self._tags: dict[tuple[str, str], Tags] = {}
        self.sensors: dict[Tags, Sensor] = {}
        self._swept_ms = 0
        self.throttles = ThrottleStats()

    @property
    def enabled(self) -> bool:
        """Some entity has a quota of this type (Kafka's quotasEnabled): only then is anything recorded."""
        self._refresh()
        return bool(self._quotas)

    def _refresh(self) -> None:
        if self._version != self._store.version:
            self._version = self._store.version
            self._quotas = self._store.entities_with(self.key)
            self._tags.clear()

    def resolve(self, user: str, client_id: str) -> tuple[Tags, float | None]:
        self._refresh()
        tags = self._tags.get((user, client_id))
        if tags is None:
            if len(self._tags) > 100_000:
                self._tags.clear()
            tags = self._tags[(user, client_id)] = quota_tags(self._quotas, user, client_id)
        return tags, quota_limit(self._quotas, tags)

    def sensor(self, tags: Tags, now_ms: int, make: Callable[[], Rate | TokenBucket]) -> Sensor:
        if now_ms - self._swept_ms >= _SWEEP_MS:
            self._swept_ms = now_ms
            for old in [t for t, s in self.sensors.items() if now_ms - s.last_ms >= INACTIVE_SENSOR_MS]:
                del self.sensors[old]
                self.throttles.forget(old)  # its metrics go with it, as Kafka's expired sensors
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = Sensor(tags, make(), now_ms)
        sensor.last_ms = now_ms
        return sensor

    def metric_config(self) -> MetricConfig:
        return self._config()


class ClientQuotaManager(_Quotas):
    def __init__(self, key: str, store: ClientQuotaStore, config: Callable[[], MetricConfig], *,
                 cap_at_window: bool = False) -> None:
        super().__init__(key, store, config)
        self._cap = cap_at_window  # ClientRequestQuotaManager: boundedThrottleTime(e, window size)

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` and return the throttle time in ms (0 within quota): Kafka's recordAndGetThrottleTimeMs."""
        if not self.enabled:
            return 0
        tags, limit = self.resolve(user, client_id)
        if limit is None:
            return 0
        config = self.metric_config()
        rate = self.sensor(tags, now_ms, Rate).rate
        assert isinstance(rate, Rate)
        rate.record(config, value, now_ms)
        observed = rate.measure(config, now_ms)
        if observed <= limit:
            return 0
        throttle = throttle_time_ms(observed, limit, rate.window_size_ms(config, now_ms))
        if self._cap:
            throttle = min(throttle, config.window_ms)
        if throttle > 0:
            self.throttles.add(tags, throttle)
        return max(throttle, 0)

    def applies(self, user: str, client_id: str) -> bool:
        """Is this (user, client-id) under a quota of this type?"""
        return self.enabled and self.resolve(user, client_id)[1] is not None

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled Fetch answers nothing: Kafka's unrecordQuotaSensor)."""
        tags, limit = self.resolve(user, client_id)
        sensor = self.sensors.get(tags)
        if limit is not None and sensor is not None and isinstance(sensor.rate, Rate):
            sensor.rate.record(self.metric_config(), -value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """Kafka's getMaxValueInQuotaWindow: the most one request may carry without certain throttling
        (limit * (samples - 1) * window seconds); infinite without a quota."""
        if not self.enabled:
            return math.inf
        _tags, limit = self.resolve(user, client_id)
        if limit is None:
            return math.inf
        config = self.metric_config()
        return limit * (config.samples - 1) * config.window_ms / 1000


class ControllerMutationQuota:
    """One request's controller mutation quota (Kafka's Strict/PermissiveControllerMutationQuota)."""

    def __init__(self, manager: ControllerMutationQuotaManager | None, tags: Tags, limit: float, strict: bool,
                 clock: Callable[[], int]) -> None:
        self._manager = manager
        self._tags = tags
        self._limit = limit
        self.strict = strict
        self._clock = clock
        self._throttle_ms = 0
        self._recorded_ms = 0

    def record(self, permits: float) -> bool:
        """Take `permits` (partitions created or deleted). False: refused (strict, and the bucket is below zero);
        the caller answers THROTTLING_QUOTA_EXCEEDED for that topic."""
        if self._manager is None:
            return True
        now = self._clock()
        bucket = self._manager.bucket(self._tags, now)
        config = self._manager.metric_config()
        if self.strict:
            tokens = bucket.measure(config, self._limit, now)
            if tokens < 0:
                self._violated(tokens, now)
                return False
            bucket.record(config, self._limit, permits, now)
            return True
        bucket.record(config, self._limit, permits, now)
        tokens = bucket.measure(config, self._limit, now)
        if tokens < 0:
            self._violated(tokens, now)
        return True

    def _violated(self, tokens: float, now: int) -> None:
        # ControllerMutationQuotaManager.throttleTimeMs: the time to refill the missing tokens
        self._throttle_ms = int(math.floor(-tokens / self._limit * 1000 + 0.5))
        self._recorded_ms = now
        if self._manager is not None:
            self._manager.throttles.add(self._tags, self._throttle_ms)

    def throttle_time_ms(self) -> int:
        """The throttle time less what has passed since it was computed (the request may have waited since)."""
        return max(0, self._throttle_ms - (self._clock() - self._recorded_ms))


class ControllerMutationQuotaManager(_Quotas):
    def __init__(self, store: ClientQuotaStore, config: Callable[[], MetricConfig], clock: Callable[[], int]) -> None:
        super().__init__(CONTROLLER_MUTATION_RATE, store, config)
        self._clock = clock

    def bucket(self, tags: Tags, now_ms: int) -> TokenBucket:
        bucket = self.sensor(tags, now_ms, TokenBucket).rate
        assert isinstance(bucket, TokenBucket)
        return bucket

    def quota_for(self, user: str, client_id: str, *, strict: bool) -> ControllerMutationQuota:
        """Kafka's newQuotaFor: strict from the request versions that can answer THROTTLING_QUOTA_EXCEEDED."""
        if self.enabled:
            tags, limit = self.resolve(user, client_id)
            if limit is not None:
                return ControllerMutationQuota(self, tags, limit, strict, self._clock)
        return ControllerMutationQuota(None, ("", ""), math.inf, strict, self._clock)


class IpConnectionRateManager(_Quotas):
    """connection_creation_rate of ip entities (Kafka's ConnectionQuotas.recordIpConnectionMaybeThrottle): the
    address's own quota, else the default ip entity's. A new connection over it is not accepted: it is un-recorded
    and the acceptor closes it after the throttle time (at most one window)."""

    def __init__(self, store: ClientQuotaStore, config: Callable[[], MetricConfig]) -> None:
        super().__init__(CONNECTION_CREATION_RATE, store, config)
        self._by_ip: dict[str | None, float] = {}
        self._ip_version = -1

    def limit_for(self, ip: str) -> float | None:
        self._refresh()
        if self._ip_version != self._version:
            self._ip_version = self._version
            self._by_ip = {None if e[0][1] is None else normalize_ip(e[0][1]): v
                           for e, v in self._quotas.items() if e[0][0] == IP}
        limit = self._by_ip.get(ip)
        return self._by_ip.get(None) if limit is None else limit

    def record(self, ip: str, now_ms: int) -> int:
        """Record a new connection from `ip`; its throttle time in ms (0: accepted)."""
        limit = self.limit_for(ip)
        if limit is None:
            return 0
        config = self.metric_config()
        tags = (ip, "")
        rate = self.sensor(tags, now_ms, Rate).rate
        assert isinstance(rate, Rate)
        rate.record(config, 1.0, now_ms)
        observed = rate.measure(config, now_ms)
        if observed <= limit:
            return 0
        rate.record(config, -1.0, now_ms)  # not accepted: not counted
        throttle = min(throttle_time_ms(observed, limit, rate.window_size_ms(config, now_ms)), config.window_ms)
        if throttle > 0:
            self.throttles.add(tags, throttle)
        return max(throttle, 0)
