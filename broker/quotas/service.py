"""The `quotas` component: the client quota store kept in the metadata journal, and the quota managers the router
and the handlers record to (Kafka's QuotaManagers: produce, fetch, request, controller mutation).

`alter` journals ClientQuotaRecords (fsynced) and then applies them; `load` replays them on start. Quotas apply
at once to every connection: the managers re-read the store whenever it changed. Each manager has its own clock
in milliseconds (monotonic), injected for tests.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import structlog

from broker.context import Admission
from broker.log.dir_failure import KafkaStorageError
from broker.quotas.config import QuotaConfig
from broker.quotas.managers import (
    ClientQuotaManager,
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
    IpConnectionRateManager,
)
from broker.quotas.request_time import NANOS_TO_PERCENTAGE
from broker.quotas.stats import MetricConfig
from broker.quotas.store import (
    CLIENT_QUOTA_RECORD,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    AlterResult,
    ClientQuotaStore,
    Entity,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.journal import MetadataJournal
    from broker.config.broker_config import BrokerConfig
    from broker.context import ConnectionInfo, RequestContext

log = structlog.get_logger(__name__)

PRODUCE = 0
_ADMITTED = Admission()  # admitted with nothing to hold back (the common case: one shared instance)
# APIs Kafka answers with sendResponseExemptThrottle: broker-to-broker cluster actions are never throttled.
REQUEST_QUOTA_EXEMPT = frozenset({27})  # WriteTxnMarkers


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def user_of(connection: ConnectionInfo) -> str:
    """The quota user: the principal's name (Kafka's session.principal.getName), `ANONYMOUS` when unauthenticated."""
    return connection.principal.partition(":")[2] or connection.principal


class QuotaService:
    def __init__(self, config: BrokerConfig, journal: MetadataJournal,
                 clock: Callable[[], int] = _monotonic_ms) -> None:
        self._journal = journal
        self.clock = clock
        self.store = ClientQuotaStore()

        def client_window() -> MetricConfig:  # read at use: a config change applies to the next recording
            return QuotaConfig.from_config(config).client_window

        def controller_window() -> MetricConfig:
            return QuotaConfig.from_config(config).controller_window

        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, self.store, client_window)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, self.store, client_window)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, self.store, client_window, cap_at_window=True)
        self.controller_mutation = ControllerMutationQuotaManager(self.store, controller_window, clock)
        self.connection_creation = IpConnectionRateManager(self.store, client_window)
        self._changes = asyncio.Lock()
        self._admitting_version = -1
        self._admitting = False

    def load(self) -> None:
        """Replay the journal's ClientQuotaRecords. Blocking: call it from a worker thread at start-up."""
        for record_type, value in self._journal.replay():
            if record_type == CLIENT_QUOTA_RECORD:
                self.store.apply(value)
        log.info("client quotas loaded", entities=len(self.store))

    async def alter(self, entries: Iterable[tuple[Entity, list[tuple[str, float | None]]]], *,
                    validate_only: bool) -> list[AlterResult]:
        # one change at a time: records are computed against the values they replace
        async with self._changes:
            records, results = self.store.alter(entries)
            if records and not validate_only:
                def apply() -> None:
                    for _type, value in records:
                        self.store.apply(value)

                try:
                    await self._journal.commit(records, apply)
                except (OSError, KafkaStorageError) as err:
                    log.error("metadata journal write failed; client quotas not altered", error=repr(err))
                    message = f"The metadata change could not be written: {err}"
                    return [r if r.error else AlterResult(r.entity, ErrorCode.KAFKA_STORAGE_ERROR, message)
                            for r in results]
        return results

    # --- the request path --------------------------------------------------------------------------------------
    def request_time_counted(self, api_key: int) -> bool:
        """Is the request's loop time measured? Only while some request_percentage quota exists, as Kafka records
        nothing while a quota type has no quota anywhere."""
        return api_key not in REQUEST_QUOTA_EXEMPT and self.request.enabled

    @property
    def admitting(self) -> bool:
        """Must requests be admitted (`admit`) as they are dispatched: some producer_byte_rate or
        request_percentage quota exists. Asked for every request: re-read only when the store changed."""
        version = self.store.version
        if version != self._admitting_version:
            self._admitting_version = version
            self._admitting = self.produce.enabled or self.request.enabled
        return self._admitting

    def admit(self, api_key: int, client_id: str | None, connection: ConnectionInfo, request_bytes: int) -> Admission:
        """A request being dispatched, before its connection's next one. A Produce's size is recorded against the
        producer byte rate now (Kafka records request.sizeInBytes for every Produce); one over the rate is held:
        answered before anything more of its connection is dispatched, which is then muted for the throttle (the
        router mutes when it answers), as Kafka's network layer, reading one request per connection at a time,
        does. A client under a request quota has all its requests held, each charged before the next starts."""
        user, client = user_of(connection), client_id or ""
        throttle = 0
        if api_key == PRODUCE and self.produce.enabled:
            throttle = self.produce.record(user, client, request_bytes, self.clock())
        hold = throttle > 0 or (api_key not in REQUEST_QUOTA_EXEMPT and self.request.applies(user, client))
        return Admission(throttle, hold) if hold else _ADMITTED

    def throttle(self, ctx: RequestContext, request_bytes: int, busy_ns: int | None,
                 admitted: Admission | None = None) -> int:
        """Record a served request and return its throttle time in ms: the largest of what the handler computed
        (`ctx.throttle_ms`), the produce byte rate (Kafka records the request's size, request.sizeInBytes, for
        every Produce: at admission when the request was admitted, else now) and the request quota (the loop time
        measured, as a percentage of one thread)."""
        throttle = ctx.throttle_ms
        if admitted is None:
            produce = ctx.api_key == PRODUCE and self.produce.enabled
        else:
            produce = False
            throttle = max(throttle, admitted.throttle_ms)
        if not produce and busy_ns is None:
            return throttle
        user, client_id, now = user_of(ctx.connection), ctx.client_id or "", self.clock()
        if produce:
            throttle = max(throttle, self.produce.record(user, client_id, request_bytes, now))
        if busy_ns is not None:
            throttle = max(throttle, self.request.record(user, client_id, busy_ns * NANOS_TO_PERCENTAGE, now))
        return throttle

    def fetch_max_bytes(self, ctx: RequestContext) -> float:
        """The most bytes one Fetch may return to this client (Kafka caps MaxBytes by getMaxValueInQuotaWindow)."""
        if not self.fetch.enabled:
            return math.inf
        return self.fetch.max_value_in_window(user_of(ctx.connection), ctx.client_id or "")

    def fetch_throttle(self, ctx: RequestContext, response_bytes: int) -> int:
        """Record a Fetch response's size against consumer_byte_rate; when that throttles, the size is taken back
        (the handler then answers an empty response, as Kafka does) and the throttle time is returned."""
        if not self.fetch.enabled:
            return 0
        user, client_id, now = user_of(ctx.connection), ctx.client_id or "", self.clock()
        throttle = self.fetch.record(user, client_id, response_bytes, now)
        if throttle > 0:
            self.fetch.unrecord(user, client_id, response_bytes, now)
        return throttle

    def connection_throttle(self, ip: str) -> int:
        """The acceptor's question for a new connection from `ip`: 0 to accept it, else the ms after which to close
        it (its address is over connection_creation_rate)."""
        return self.connection_creation.record(ip, self.clock())

    def share_fetch_throttle(self, ctx: RequestContext, response_bytes: int) -> int:
        """Record a ShareFetch response's size against consumer_byte_rate and return its throttle time. Unlike
        Kafka, which then answers empty and leaves the records it acquired locked until their lock times out,
        the answer keeps them: the mute alone holds the member to its rate."""
        if not self.fetch.enabled:
            return 0
        return self.fetch.record(user_of(ctx.connection), ctx.client_id or "", response_bytes, self.clock())

    def controller_mutation_quota(self, connection: ConnectionInfo, client_id: str | None, *,
                                  strict: bool) -> ControllerMutationQuota:
        return self.controller_mutation.quota_for(user_of(connection), client_id or "", strict=strict)
