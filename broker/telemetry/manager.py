"""ClientMetricsManager: Kafka's broker side of KIP-714, sans-IO (method calls and an injected clock in, answers
out; no sockets, no awaits).

- GetTelemetrySubscriptions assigns a client instance id (a random Uuid) to a client sending the zero Uuid and
  answers the instance's subscription: the union of the metrics of every subscription matching the client (`*`
  alone when one of them asks for everything), the smallest of their push intervals (5 minutes when none matches)
  and a subscription id, a CRC-32C of those metrics and that interval XORed with the instance id's hash, so the id
  changes when the matching subscriptions do.
- A subscription change bumps a version; an instance older than it is re-evaluated on its next request (fresh
  timestamps, as Kafka re-creates it), so the client's next push gets UNKNOWN_SUBSCRIPTION_ID and its next
  GetTelemetrySubscriptions the new id.
- PushTelemetry is checked as Kafka does, in this order: after a terminating push -> INVALID_REQUEST; sooner than
  the push interval after the previous push (unless a GetTelemetrySubscriptions came in between, or this push
  terminates) -> THROTTLING_QUOTA_EXCEEDED; another subscription id -> UNKNOWN_SUBSCRIPTION_ID; a compression type
  Kafka does not know -> UNSUPPORTED_COMPRESSION_TYPE; a payload over `telemetry.max.bytes` ->
  TELEMETRY_TOO_LARGE. The caller decodes an accepted payload (off the event loop) and reports one it cannot
  decode with `payload_refused` (INVALID_RECORD).
- An instance is forgotten (with what it pushed) max(60 s, 3 push intervals) after its last request, when the
  connection it was created on closes, or beyond 16384 instances (least recently used first), as Kafka's cache.
"""

from __future__ import annotations

import base64
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import structlog
from crc32c import crc32c

from broker.config.components import ComponentConfig, setting
from broker.telemetry import subscriptions as sub
from protocol.compression import NAMES as COMPRESSION_NAMES
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

# zstd, lz4, gzip, snappy: the order Kafka's broker offers them (the client picks the first it supports).
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
CACHE_MAX_SIZE = 16384  # Kafka's: 16k client instances per broker
CACHE_EXPIRY_MS = 60_000
EXPIRY_INTERVALS = 3  # an instance lives at least this many push intervals after its last request
ZERO_UUID = uuid.UUID(int=0)
RESERVED_UUIDS = frozenset({ZERO_UUID, uuid.UUID(int=1)})  # Kafka's Uuid.RESERVED (zero, the metadata topic id)
_SWEEP_EVERY_MS = 1000


def kafka_uuid_text(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding (what `client_instance_id` patterns match)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


class PayloadError(Exception):
    """The pushed metrics could not be decoded."""


class TelemetryReceiver(Protocol):
    """Where pushed metrics are kept (Kafka's ClientTelemetryReceiver plugin): told when an instance goes."""

    def forget(self, instance_id: uuid.UUID) -> None:
        """The instance is gone (terminated, expired, disconnected): drop what it pushed."""


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str | None]  # ClientMetricsInstanceMetadata: what `match` patterns are applied to
    subscription_id: int
    subscription_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    connection_id: int
    last_get_ms: int | None = None
    last_push_ms: int | None = None
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE
    expires_ms: int = field(default=0)

    def may_get(self, now: int) -> bool:
        """A GetTelemetrySubscriptions a push interval after the last request of either kind (stamped if so)."""
        last = max((t for t in (self.last_get_ms, self.last_push_ms) if t is not None), default=None)
        if last is None or now - last >= self.push_interval_ms:
            self.last_get_ms = now
            return True
        return False

    def may_push(self, now: int) -> bool:
        """A push right after a GetTelemetrySubscriptions is accepted at once (clients add jitter to the interval),
        otherwise a push interval after the previous push (stamped if accepted)."""
        ok = (self.last_get_ms is not None and (self.last_push_ms is None or self.last_get_ms > self.last_push_ms)) \
            or self.last_push_ms is None or now - self.last_push_ms >= self.push_interval_ms
        if ok:
            self.last_push_ms = now
        return ok


class Answer(NamedTuple):
    error: ErrorCode
    message: str | None
    instance: ClientInstance | None


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: CRC-32C of "[m1, m2]<interval>" XOR the instance id's Java hashCode (as a
    signed int32). The metrics are sorted here, so the id does not depend on set iteration order."""
    crc = crc32c(("[" + ", ".join(metrics) + "]" + str(interval_ms)).encode())
    msb, lsb = instance_id.int >> 64, instance_id.int & (2**64 - 1)
    h = msb ^ lsb
    value = (crc ^ ((h >> 32) ^ h)) & 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


@dataclass(frozen=True)
class ClientTelemetryConfig(ComponentConfig):
    max_bytes: int = setting("telemetry.max.bytes")  # the largest (compressed) payload a client pushes


class ClientMetricsManager:
    def __init__(self, *, max_bytes: int, clock: Callable[[], int], receiver: TelemetryReceiver,
                 cache_expiry_ms: int = CACHE_EXPIRY_MS, max_instances: int = CACHE_MAX_SIZE,
                 new_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self.max_bytes = max_bytes
        self._clock = clock  # milliseconds
        self._receiver = receiver
        self._cache_expiry_ms = cache_expiry_ms
        self._max_instances = max_instances
        self._new_uuid = new_uuid
        self._subscriptions: dict[str, sub.Subscription] = {}
        self._version = 0
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()  # least recently used first
        self._by_connection: dict[int, uuid.UUID] = {}
        self._next_sweep = 0

    # --- subscriptions (CLIENT_METRICS config resources) ---------------------------------------------------
    def update_subscription(self, name: str, props: dict[str, str]) -> None:
        """A subscription's configs changed (validated); empty configs remove it."""
        if not props:
            if self._subscriptions.pop(name, None) is None:
                return
        else:
            try:
                self._subscriptions[name] = sub.Subscription.from_configs(name, props)
            except sub.SubscriptionError as err:
                # Journaled before its patterns had to be RE2's: it applies to no client rather than stop a start.
                log.warning("client metrics subscription ignored", subscription=name, reason=err.message)
                if self._subscriptions.pop(name, None) is None:
                    return
        self._version += 1

    # --- requests ------------------------------------------------------------------------------------------
    def get_subscriptions(self, instance_id: uuid.UUID, attributes: dict[str, str | None],
                          connection_id: int) -> Answer:
        now = self._clock()
        self._maybe_sweep(now)
        if instance_id == ZERO_UUID:
            instance_id = self._fresh_id()
        instance = self._instance(instance_id, attributes, connection_id, now)
        if not instance.may_get(now):
            # Within the interval a client may ask again only after its push was refused for a stale subscription
            # id or an unsupported codec (what Kafka's check means to allow; as written it never does): the push
            # that follows is then accepted at once.
            if instance.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
                return Answer(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                              f"Request from the client [{instance_id}] arrived before the next push interval time",
                              None)
            instance.last_get_ms = now
        instance.last_error = ErrorCode.NONE
        return Answer(ErrorCode.NONE, None, instance)

    def push(self, instance_id: uuid.UUID, subscription: int, terminating: bool, compression_type: int,
             payload: bytes, attributes: dict[str, str | None], connection_id: int) -> Answer:
        if instance_id in RESERVED_UUIDS:
            return Answer(ErrorCode.INVALID_REQUEST,
                          f"Invalid request from the client [{instance_id}], invalid client instance id", None)
        now = self._clock()
        self._maybe_sweep(now)
        instance = self._instance(instance_id, attributes, connection_id, now)
        error = self._check_push(instance, subscription, terminating, compression_type, payload, now)
        # Kafka sets the flag from every push whatever the answer, so a second push after the terminating one
        # would clear it; here it sticks: nothing is accepted after a terminating push, as Kafka's message says
        instance.terminating = instance.terminating or terminating
        if error is not None:
            instance.last_error = error[0]
            return Answer(error[0], error[1], instance)
        if terminating:
            # the client is going away: its series go with it (bounded cardinality), the instance stays to
            # refuse further pushes until it expires
            self._receiver.forget(instance_id)
        instance.last_error = ErrorCode.NONE
        return Answer(ErrorCode.NONE, None, instance)

    def payload_refused(self, instance: ClientInstance, message: str) -> Answer:
        """The accepted push's payload could not be decoded (Kafka: the receiver failed): INVALID_RECORD."""
        instance.last_error = ErrorCode.INVALID_RECORD
        return Answer(ErrorCode.INVALID_RECORD, message, instance)

    def _check_push(self, instance: ClientInstance, subscription: int, terminating: bool, compression_type: int,
                    payload: bytes, now: int) -> tuple[ErrorCode, str] | None:
        who = instance.instance_id
        if instance.terminating:
            return (ErrorCode.INVALID_REQUEST, f"Client [{who}] sent the previous request with state terminating "
                                               "to TRUE, can not accept any requests after that")
        if not instance.may_push(now) and not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, \
                f"Request from the client [{who}] arrived before the next push interval time"
        if subscription != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID, f"Unknown client subscription id for the client [{who}]"
        if compression_type not in COMPRESSION_NAMES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, \
                f"Unknown compression type [{compression_type}] is received in telemetry request from [{who}]"
        if len(payload) > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE, \
                f"Telemetry request from [{who}] is larger than the maximum allowed size [{self.max_bytes}]"
        return None

    # --- instances -----------------------------------------------------------------------------------------
    def instance(self, instance_id: uuid.UUID) -> ClientInstance | None:
        return self._instances.get(instance_id)

    def __len__(self) -> int:
        return len(self._instances)

    def _fresh_id(self) -> uuid.UUID:
        # Kafka's Uuid.randomUuid: never a reserved id, never one whose base64 text starts with '-'
        while True:
            candidate = self._new_uuid()
            if candidate not in RESERVED_UUIDS and candidate not in self._instances and candidate.int >> 122 != 62:
                return candidate

    def _instance(self, instance_id: uuid.UUID, attributes: dict[str, str | None], connection_id: int,
                  now: int) -> ClientInstance:
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = self._create(instance_id, {**attributes, sub.CLIENT_INSTANCE_ID: kafka_uuid_text(instance_id)},
                                    connection_id)
        elif instance.subscription_version < self._version:
            # the subscriptions changed since it was evaluated: evaluated afresh, its timestamps reset
            instance = self._create(instance_id, instance.attributes, connection_id)
        self._instances.move_to_end(instance_id)
        instance.expires_ms = now + max(self._cache_expiry_ms, EXPIRY_INTERVALS * instance.push_interval_ms)
        while len(self._instances) > self._max_instances:
            oldest, _ = self._instances.popitem(last=False)
            self._receiver.forget(oldest)
        return instance

    def _create(self, instance_id: uuid.UUID, attributes: dict[str, str | None],
                connection_id: int) -> ClientInstance:
        interval = sub.DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        for subscription in self._subscriptions.values():
            if subscription.matches(attributes):
                metrics.update(subscription.metrics)
                interval = min(interval, subscription.interval_ms)
        if sub.ALL_METRICS in metrics:
            metrics = {sub.ALL_METRICS}
        chosen = tuple(sorted(metrics))
        instance = ClientInstance(instance_id, attributes, subscription_id(chosen, interval, instance_id),
                                  self._version, chosen, interval, connection_id)
        self._instances[instance_id] = instance
        self._by_connection[connection_id] = instance_id
        return instance

    def connection_closed(self, connection_id: int) -> None:
        """Kafka forgets the instance created on a connection when that connection closes."""
        instance_id = self._by_connection.pop(connection_id, None)
        if instance_id is not None:
            self._forget(instance_id)

    def expire(self, now: int | None = None) -> int:
        """Forget the instances idle past their expiry; returns how many."""
        now = self._clock() if now is None else now
        gone = [i for i, instance in self._instances.items() if instance.expires_ms <= now]
        for instance_id in gone:
            self._forget(instance_id)
        return len(gone)

    def _maybe_sweep(self, now: int) -> None:
        if now >= self._next_sweep:
            self._next_sweep = now + _SWEEP_EVERY_MS
            self.expire(now)

    def _forget(self, instance_id: uuid.UUID) -> None:
        instance = self._instances.pop(instance_id, None)
        if instance is not None and self._by_connection.get(instance.connection_id) == instance_id:
            del self._by_connection[instance.connection_id]
        self._receiver.forget(instance_id)
