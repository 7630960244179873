"""ClientTelemetry: the I/O side of the ClientMetricsManager. A push is checked by the sans-IO manager on the
event loop; its payload is decompressed and parsed in a worker thread (up to `telemetry.max.bytes` compressed,
it may inflate to megabytes), then its points are kept in the store, unless the instance went meanwhile."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from broker.telemetry import otlp
from broker.telemetry.manager import Answer, ClientMetricsManager, PayloadError
from broker.telemetry.store import ClientMetricsStore
from protocol.errors import ErrorCode


class ClientTelemetry:
    def __init__(self, manager: ClientMetricsManager, store: ClientMetricsStore, clock: Callable[[], int]) -> None:
        self.manager = manager
        self.store = store
        self._clock = clock  # milliseconds

    async def push(self, instance_id: uuid.UUID, subscription: int, terminating: bool, compression_type: int,
                   payload: bytes, attributes: dict[str, str | None], connection_id: int) -> Answer:
        answer = self.manager.push(instance_id, subscription, terminating, compression_type, payload, attributes,
                                   connection_id)
        instance = answer.instance
        if answer.error != ErrorCode.NONE or terminating or not payload or instance is None:
            return answer
        try:
            points = await asyncio.to_thread(otlp.decode, compression_type, payload)
        except PayloadError as err:
            return self.manager.payload_refused(instance, str(err))
        if self.manager.instance(instance_id) is instance:  # not terminated, expired or disconnected meanwhile
            self.store.record(instance, points, self._clock())
        return answer
