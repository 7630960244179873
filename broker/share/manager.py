"""Share-partition leader (KIP-932): one ShareInFlight per (group, topic id, partition), on the event loop.

Ties the sans-IO pieces to the broker: share sessions (sessions.py), in-flight state (inflight.py), the logs
(batch headers to acquire whole batches, bytes to serve) and the share coordinator through the Persister
(persister.py: read_state on first use, write_state before an acknowledgement is answered). A background task
expires record locks; parked share fetches (delayed_fetch.py) are woken by appends and transaction markers
(ReplicaManager) and by records becoming available again here (releases, expiries).

`share.isolation.level=read_committed` (a group config, read at each acquisition): new records are acquired only
below the partition's LSO, and the batches of aborted transactions are archived, never delivered (Kafka's
SharePartition.filterAbortedTransactionalAcquiredRecords), from batch headers and the `.txnindex` only (see
broker/log/read_committed.py). Control batches are never delivered under either level.

The group coordinator tells the leader about members that left, deleted groups and reset share state through
the `on_*` hooks, which whoever builds the manager wires (see `follow_events`); the leader asks it back only who is a
member with which partitions (ShareGroupMembership).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.coordinator.periodic import PeriodicTask
from broker.log.dir_failure import KafkaStorageError
from broker.log.partition_log import OffsetOutOfRangeError
from broker.log.read_committed import Fate, classify_batches
from broker.share.dlq import DeadLetterQueue
from broker.share.eager import run_eager
from broker.share.inflight import DeadLetter, ShareInFlight, StateDelta
from broker.share.persister import UNINITIALIZED_START_OFFSET, Persister, StateBatch
from broker.share.sessions import ShareSessionCache
from protocol.errors import ErrorCode
from protocol.primitives import BytesParts
from protocol.records import BatchHeader, iter_batches

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.config import BrokerConfig
    from broker.replica_manager import ReplicaManager

log = structlog.get_logger(__name__)

PartitionKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)
_BOUND_LAST = itemgetter(2)  # a batch bound (position, base offset, last offset, size, attributes) -> last offset
UNINITIALIZED = UNINITIALIZED_START_OFFSET
EXPIRY_RETRY_S = 0.5  # pause after a failed lock-expiry round before the next one
# Acquired ranges closer than this (estimated bytes between them) are served from one log read.
COALESCE_GAP_BYTES = 8192
# Read past the estimated bytes of new records, so that a batch straddling the estimate still comes in one read.
_READ_SLACK_BYTES = 16384


class ShareError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def offline_error(topic: str, partition: int) -> ShareError:
    """Kafka's message for a partition in an offline log directory (ReplicaManager.getPartitionOrException)."""
    return ShareError(ErrorCode.KAFKA_STORAGE_ERROR, f"Partition {topic}-{partition} is in an offline log directory")


# group id -> effective group configs. A change of the group's configs gives a new mapping (the config service
# caches one per group and replaces it on a change), so the leader reads a mapping's settings once and keeps them
# while the same mapping comes back.
GroupConfigs = Callable[[str], Mapping[str, str]]
SETTINGS_CACHE_SIZE = 4096  # groups whose settings are kept (cleared beyond this, then read again on use)
Spawn = Callable[[Coroutine[Any, Any, Any], str], Any]  # run a background task for the broker's life
Assignment = Mapping[uuid.UUID, Collection[int]]  # topic id -> partitions assigned to a member


class ShareGroupMembership(Protocol):
    """What the leader asks the group coordinator: is this a member, and which partitions does it have."""

    @property
    def loaded(self) -> bool: ...

    def member_assignment(self, group_id: str, member_id: str) -> Assignment | None: ...


class ConnectionEvents(Protocol):
    """The server's closed-connection hooks (a closed connection ends its share sessions)."""

    close_listeners: list[Callable[[Any], None]]


class ShareGroupEvents(Protocol):
    """The group coordinator's events the leader follows (see `follow_events`)."""

    def add_member_removed_listener(self, fn: Callable[[str, str], None]) -> None: ...

    def add_group_deleted_listener(self, fn: Callable[[str], None]) -> None: ...

    def add_share_state_reset_listener(self, fn: Callable[..., None]) -> None: ...


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The group configs the leader applies, read from one mapping of the group's effective configs (`source`)."""

    source: Mapping[str, str]
    lock_duration_ms: int
    delivery_count_limit: int
    max_in_flight_records: int
    renew_enabled: bool
    read_committed: bool


@dataclass
class SharePartition:
    key: PartitionKey
    topic: str
    inflight: ShareInFlight
    # Writes of one partition go out in order: each waits for the previous (a later delta never lands first).
    last_write: asyncio.Future | None = None
    waiters: set[asyncio.Event] = field(default_factory=set)
    # Dropped from the manager (topic deleted, or memory discarded after a failed state write): a fetch that
    # still holds it acquires nothing from it, and changes to it are answered with `failure`.
    dead: bool = False
    failure: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    settings: GroupSettings | None = None  # the group settings last applied to `inflight`
    # The next fetch offset when a share fetch last looked at this share-partition (None: never): one whose
    # next fetch offset moved since (it was served, or records came back) is acquired from after the others
    # (see DelayedShareFetch._order).
    probed_at: int | None = None


@dataclass(frozen=True, slots=True)
class _Span:
    """A log batch seen while acquiring: base offset, last offset, size in bytes."""

    base: int
    last: int
    size: int


@dataclass(slots=True)
class _Budget:
    """The record and byte budgets of one read_committed acquisition, spent batch by batch (`_new_batches` spends
    the same budgets inline: its loop runs once per batch of every ShareFetch)."""

    room: int  # records the acquisition may take: MaxRecords within the in-flight limit
    max_bytes: int
    min_one: bool  # the first batch is taken even when larger than max_bytes
    strict: bool  # record_limit mode: the last batch is cut to the room left
    records: int = 0
    size: int = 0

    def take(self, first: int, last: int, batch_size: int, first_batch: bool) -> tuple[int, int] | None:
        """Spend on offsets first..last of a batch of `batch_size` bytes: the range to acquire (cut in
        record_limit mode), or None when the batch does not fit the bytes left (the first batch always fits
        with `min_one`; nothing is spent before it, so `size` is 0 then)."""
        if self.size + batch_size > self.max_bytes and not (first_batch and self.min_one):
            return None
        self.records += last - first + 1
        self.size += batch_size
        if self.strict and self.records > self.room:
            last -= self.records - self.room  # the client filters by ranges
            self.records = self.room
        return first, last

    @property
    def spent(self) -> bool:
        return self.records >= self.room


def _spans_bytes(spans: Sequence[_Span], first: int, last: int) -> int | None:
    """Bytes of the batches holding offsets first..last if `spans` (batches just scanned, consecutive in the
    file) cover them, else None."""
    i = next((k for k, sp in enumerate(spans) if sp.base <= first <= sp.last), None)
    if i is None:
        return None
    total = 0
    for span in spans[i:]:
        total += span.size
        if span.last >= last:
            return total
    return None


class _BatchCursor:
    """Walks whole batches of a log forward from the offsets asked for, keeping the unused rest of each read
    so that a following range in the same region needs no second read."""

    def __init__(self, plog: Any) -> None:
        self._plog = plog
        self._pending: deque[tuple[Any, memoryview, int]] = deque()

    def batch_at(self, offset: int, want_bytes: int) -> tuple[Any, memoryview, int] | None:
        """The batch a log read at `offset` would start with (header, the read, its position in the read),
        reading `want_bytes` if the buffered batches do not reach it."""
        pending = self._pending
        while pending and pending[0][0].last_offset < offset:
            pending.popleft()  # a batch between acquired ranges: not served
        if not pending:
            try:
                data = memoryview(self._plog.read(offset, max(1, want_bytes), min_one_batch=True).data)
            except OffsetOutOfRangeError:  # retention moved the log start: nothing left to serve
                return None
            pending.extend((h, data, at) for at, h in iter_batches(data))
            while pending and pending[0][0].last_offset < offset:
                pending.popleft()
        return pending[0] if pending else None

    def take(self) -> tuple[Any, memoryview, int]:
        return self._pending.popleft()


@dataclass(slots=True)
class Acquired:
    ranges: list  # [AcquiredRange]
    # whole batches: a slice of the log read when only new records were acquired, slices of several reads as
    # BytesParts (their concatenation)
    records: bytes | memoryview | BytesParts


class _Slices:
    """Byte ranges of log reads to answer, in order; ranges adjacent in one read are merged, so that serving
    one read's batches gives one view of it; batches from several reads are served as the views' BytesParts
    (the response encodes them back to back: nothing is copied)."""

    __slots__ = ("_runs",)

    def __init__(self) -> None:
        self._runs: list[list] = []  # [read, start, end]

    def add(self, data: memoryview, start: int, end: int) -> None:
        runs = self._runs
        if runs and runs[-1][0] is data and runs[-1][2] == start:
            runs[-1][2] = end
        else:
            runs.append([data, start, end])

    def bytes(self) -> bytes | memoryview | BytesParts:
        views = [data[start:end] for data, start, end in self._runs]
        if not views:
            return b""
        return views[0] if len(views) == 1 else BytesParts(views)


class _NewRecords:
    """The log reads of an acquisition from SPEO, each with the bounds of its batches (see PartitionLog.read): what
    it acquires is served as slices of them."""

    __slots__ = ("reads",)

    def __init__(self) -> None:
        self.reads: list[tuple[memoryview, list[tuple[int, int, int, int, int]]]] = []

    def served(self, first: int, last: int) -> bytes | memoryview | BytesParts:
        """The bytes of the batches holding offsets first..last (those acquired): of each read, the batches from
        the one holding `first` to the one holding `last`, which lie back to back in it (one slice, no copy)."""
        out = _Slices()
        if last >= first:
            for data, bounds in self.reads:
                i = bisect_left(bounds, first, key=_BOUND_LAST)
                j = bisect_left(bounds, last, key=_BOUND_LAST)
                if j == len(bounds) or bounds[j][1] > last:
                    j -= 1  # `last` is past this read, or in a gap before its batch j
                if i <= j:
                    out.add(data, bounds[i][0], bounds[j][0] + bounds[j][3])
        return out.bytes()


class SharePartitionManager:
    def __init__(self, *, config: BrokerConfig, topics: TopicManager, replicas: ReplicaManager,
                 persister: Persister, groups: ShareGroupMembership, dlq: DeadLetterQueue,
                 group_configs: GroupConfigs, spawn: Spawn, clock: Callable[[], float] = time.time) -> None:
        self._config = config
        self._topics = topics
        self._replicas = replicas
        self._persister = persister
        self._groups = groups
        self._spawn = spawn
        self._clock = clock
        self.sessions = ShareSessionCache(config.get("group.share.max.share.sessions"))
        self._partitions: dict[PartitionKey, SharePartition] = {}
        self._loading: dict[PartitionKey, asyncio.Future] = {}
        self._lock_expiry = PeriodicTask("share-lock-expiry", self._expire_locks, next_due_s=self._next_expiry_s,
                                         failure_event="share lock expiry round failed",
                                         retry_after_s=EXPIRY_RETRY_S)
        self._settings: dict[str, GroupSettings] = {}  # group id -> its settings (see `settings`)
        # Share sessions live on the connection that opened them (as in Kafka): (group, member) -> connection id.
        self._session_conn: dict[tuple[str, str], int] = {}
        self._releases: set[asyncio.Task] = set()
        self._closed = False
        # group id -> effective group configs (share.auto.offset.reset, share.record.lock.duration.ms, ...).
        self.group_configs = group_configs
        self.dlq = dlq

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # --- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._spawn(self._lock_expiry.run(), "share-lock-expiry")

    # --- configuration -----------------------------------------------------------------------------------------
    def settings(self, group: str) -> GroupSettings:
        """The group's settings, read again only when its configs changed (a new mapping, see GroupConfigs): a
        change (IncrementalAlterConfigs on the GROUP resource) applies to the next request, and a request parses
        no config."""
        configs = self.group_configs(group)
        cached = self._settings.get(group)
        if cached is not None and cached.source is configs:
            return cached

        def number(name: str, broker_key: str) -> int:
            value = configs.get(name)
            return int(value) if value else self._config.get(broker_key)

        settings = GroupSettings(
            configs,
            lock_duration_ms=number("share.record.lock.duration.ms", "group.share.record.lock.duration.ms"),
            delivery_count_limit=number("share.delivery.count.limit", "group.share.delivery.count.limit"),
            max_in_flight_records=number("share.partition.max.record.locks",
                                         "group.share.partition.max.record.locks"),
            renew_enabled=(configs.get("share.renew.acknowledge.enable") or "true").lower() == "true",
            read_committed=configs.get("share.isolation.level") == "read_committed")
        if len(self._settings) >= SETTINGS_CACHE_SIZE:
            self._settings.clear()
        self._settings[group] = settings
        return settings

    def lock_duration_ms(self, group: str) -> int:
        return self.settings(group).lock_duration_ms

    def renew_enabled(self, group: str) -> bool:
        return self.settings(group).renew_enabled

    def read_committed(self, group: str) -> bool:
        return self.settings(group).read_committed

    async def ensure_txn_state(self, partitions: Sequence[SharePartition]) -> None:
        """Load the transaction state of the read_committed groups' partitions in worker threads (their LSO is
        read at each acquisition; loading it there would block the loop)."""
        keys = [(sp.topic, sp.key[2]) for sp in partitions if self.read_committed(sp.key[0])]
        if keys:
            await self._replicas.ensure_loaded(keys)

    def _configure(self, sp: SharePartition) -> GroupSettings:
        """Apply the group's current settings to the share-partition (once per change of them); returns them."""
        settings = self.settings(sp.key[0])
        if sp.settings is not settings:
            inflight = sp.inflight
            inflight.lock_duration_ms = settings.lock_duration_ms
            inflight.delivery_count_limit = settings.delivery_count_limit
            inflight.max_in_flight_records = settings.max_in_flight_records
            sp.settings = settings
        return settings

    def _start_offset(self, group: str, plog: Any) -> int:
        reset = self.group_configs(group).get("share.auto.offset.reset") or "latest"
        if reset == "earliest":
            return plog.log_start_offset
        if reset.startswith("by_duration:"):
            from broker.config.group_config import duration_ms

            found = plog.offset_for_timestamp(self.now_ms() - duration_ms(reset.removeprefix("by_duration:")))
            return found[0] if found is not None else plog.log_end_offset
        return plog.log_end_offset

    # --- partitions --------------------------------------------------------------------------------------------
    def resolve(self, topic_id: uuid.UUID, partition: int) -> tuple[Any, Any]:
        """(TopicInfo, PartitionLog) or ShareError UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION, or
        KAFKA_STORAGE_ERROR for a log whose directory is offline (Kafka's share fetch looks the partition up
        with ReplicaManager.getPartitionOrException)."""
        topics = self._topics
        info = topics.registry.by_id(topic_id)
        if info is None:
            raise ShareError(ErrorCode.UNKNOWN_TOPIC_ID)
        if not 0 <= partition < info.num_partitions:
            raise ShareError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        plog = topics.log(info.name, partition)
        if plog.failures.offline:
            raise offline_error(info.name, partition)
        return info, plog

    def loaded_partitions(self) -> list[SharePartition]:
        """The share-partitions in memory now (metrics)."""
        return list(self._partitions.values())

    def loaded(self, group: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The share-partition if it is in memory already (`partition` loads it otherwise)."""
        return self._partitions.get((group, topic_id, partition))

    def load_later(self, group: str, tps: Sequence[tuple[uuid.UUID, int]]) -> None:
        """Load these share-partitions in the background (a share fetch answered before it got to them: Kafka
        goes on initializing them, so that the session's next fetch finds them ready)."""
        for topic_id, partition in tps:
            if (group, topic_id, partition) not in self._partitions:
                self._spawn(self._load_quietly(group, topic_id, partition), "share-partition-load")

    async def _load_quietly(self, group: str, topic_id: uuid.UUID, partition: int) -> None:
        try:
            await self.partition(group, topic_id, partition)
        except ShareError as err:  # the next fetch that needs it answers the error
            log.debug("share-partition not loaded", group=group, topic_id=str(topic_id), partition=partition,
                      error=err.code.name)

    async def partition(self, group: str, topic_id: uuid.UUID, partition: int) -> SharePartition:
        key = (group, topic_id, partition)
        sp = self._partitions.get(key)
        if sp is not None:
            return sp
        info, plog = self.resolve(topic_id, partition)
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            sp = await self._load(key, info.name, plog)
            self._partitions[key] = sp
            fut.set_result(sp)
            return sp
        except BaseException as err:
            fut.set_exception(err)
            fut.exception()  # retrieved: a failed load must not log "never retrieved"
            raise
        finally:
            del self._loading[key]

    async def _load(self, key: PartitionKey, topic: str, plog: Any) -> SharePartition:
        group, topic_id, partition = key
        settings = self.settings(group)
        params = dict(max_in_flight_records=settings.max_in_flight_records,
                      delivery_count_limit=settings.delivery_count_limit,
                      lock_duration_ms=settings.lock_duration_ms)
        state_epoch, start, batches = await self._read_state(key)
        # Any negative start offset is "not initialized" (-1 is the only one a well-behaved writer stores, but the
        # inter-broker InitializeShareGroupState/WriteShareGroupState APIs accept others): resolve it as such.
        if start >= 0:
            try:
                inflight = ShareInFlight.load(start, batches, state_epoch=state_epoch, **params)
            except ValueError as err:
                # The share coordinator refuses malformed batches now, but a state written before it did (or
                # by a future version) may still hold some: it fails this partition, not the request.
                log.warning("share-partition state unreadable", group=group, topic=topic, partition=partition,
                            error=str(err))
                raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, f"The share-partition state is invalid: {err}") \
                    from None
            # The log may have moved on (retention) while nobody was fetching.
            inflight.advance_log_start(plog.log_start_offset)
            sp = SharePartition(key, topic, inflight)
        else:
            inflight = ShareInFlight(0, state_epoch=state_epoch, **params)
            inflight.reset_start(self._start_offset(group, plog))
            sp = SharePartition(key, topic, inflight)
        # Persist the resolved SPSO at once: a restart must not resolve share.auto.offset.reset again.
        code = await self.persist(sp)
        if code != ErrorCode.NONE:
            raise ShareError(code, "The share-partition state could not be written.")
        log.info("share-partition loaded", group=group, topic=topic, partition=partition,
                 start_offset=inflight.start_offset, end_offset=inflight.end_offset)
        return sp

    async def _read_state(self, key: PartitionKey) -> tuple[int, int, Sequence[StateBatch]]:
        """(state epoch, start offset or -1, batches) from the share coordinator."""
        result = await self._persister.read_state(*key)
        state = result.state
        if result.error_code != ErrorCode.NONE or state is None:
            # Not initialized yet (the group coordinator normally does it before assigning): do it here.
            init = await self._persister.initialize(*key, 0, UNINITIALIZED)
            if init.error_code != ErrorCode.NONE:
                raise ShareError(ErrorCode(init.error_code), f"share state: {init.error_message}")
            return 0, UNINITIALIZED, []
        return state.state_epoch, state.start_offset, state.state_batches

    # --- persistence -------------------------------------------------------------------------------------------
    async def persist(self, sp: SharePartition) -> ErrorCode:
        """Write what changed in `sp` (if anything) through the share coordinator; durable on return.

        A failed write discards `sp` (see `_discard`): its memory is ahead of the durable state, and so is every
        change queued behind it, so those are not written either and answer the same error."""
        if sp.dead:
            sp.inflight.take_dirty()
            sp.inflight.take_dead_letters()
            return sp.failure
        dead = sp.inflight.take_dead_letters()
        delta = sp.inflight.take_dirty()
        if delta is None and not dead:
            if sp.last_write is not None:
                return await asyncio.shield(sp.last_write)  # an earlier change may still be in flight
            return ErrorCode.NONE
        prev = sp.last_write
        if prev is not None and prev.done():
            prev = None  # landed already: waiting for it (asyncio.wait) would still cost event-loop turns
        # Eager: a write that does not suspend (the common case) answers without a task, future or loop turn, and
        # leaves nothing in flight for the next write to wait on.
        finished, outcome = run_eager(self._write_after(prev, sp, delta, dead))
        if finished:
            sp.last_write = None
            return outcome
        sp.last_write = outcome
        return await asyncio.shield(outcome)

    async def _write_after(self, prev: asyncio.Future | None, sp: SharePartition, delta: StateDelta | None,
                           dead: list[DeadLetter]) -> ErrorCode:
        if prev is not None:
            await asyncio.wait([prev])
        if sp.dead:
            return sp.failure  # an earlier write failed: this delta builds on state that was never durable
        group, topic_id, partition = sp.key
        if dead:
            # KIP-1191: the dead letters are durable in the group's DLQ before their archived state is written.
            try:
                plog = self.resolve(topic_id, partition)[1]
            except ShareError:
                plog = None
            try:
                await self.dlq.write(group, sp.topic, partition, dead, plog)
            except Exception:  # noqa: BLE001 - DlqWriteError or worse: the change is not answered as done
                log.exception("share group DLQ write failed", group=group, topic=sp.topic, partition=partition)
                self._discard(sp, ErrorCode.KAFKA_STORAGE_ERROR)
                return ErrorCode.KAFKA_STORAGE_ERROR
        if delta is None:
            return ErrorCode.NONE
        try:
            result = await self._persister.write_state(group, topic_id, partition, delta.state_epoch, -1,
                                                       delta.start_offset, delta.state_batches,
                                                       delivery_complete_count=delta.delivery_complete_count)
            code = ErrorCode.NONE if result.error_code == 0 else ErrorCode(result.error_code)
        except Exception:  # noqa: BLE001 - the client gets an error code, the broker carries on
            log.exception("share state write failed", group=group, topic=sp.topic, partition=partition)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        if code != ErrorCode.NONE:
            log.warning("share state write refused", group=group, topic=sp.topic, partition=partition, code=code.name)
            self._discard(sp, code)
        return code

    def _discard(self, sp: SharePartition, code: ErrorCode) -> None:
        """Roll the share-partition back to its durable state: drop the in-memory copy, which the next use
        reloads from the share coordinator (as Kafka drops a fenced SharePartition). Acknowledgements that were
        not written are answered with the error and their records are delivered again; acquisitions in
        flight are lost with the memory, so those records come back too (at-least-once holds)."""
        sp.dead = True
        sp.failure = code
        if self._partitions.get(sp.key) is sp:
            del self._partitions[sp.key]
        self._wake(sp)
        log.warning("share-partition state rolled back to the durable state after a failed write",
                    group=sp.key[0], topic=sp.topic, partition=sp.key[2], error=code.name)

    # --- acquire -----------------------------------------------------------------------------------------------
    def acquire(self, sp: SharePartition, member: str, max_records: int, max_bytes: int, *, min_one: bool,
                strict: bool = False) -> Acquired | None:
        """Acquire records for `member` and read the bytes of the whole batches holding them. Raises
        ShareError(KAFKA_STORAGE_ERROR) when the partition's log directory is (or goes) offline."""
        try:
            return self._acquire(sp, member, max_records, max_bytes, min_one=min_one, strict=strict)
        except KafkaStorageError:
            raise offline_error(sp.topic, sp.key[2]) from None

    def _acquire(self, sp: SharePartition, member: str, max_records: int, max_bytes: int, *, min_one: bool,
                 strict: bool) -> Acquired | None:
        _, topic_id, partition = sp.key
        try:
            _, plog = self.resolve(topic_id, partition)
        except ShareError as err:
            if err.code == ErrorCode.KAFKA_STORAGE_ERROR:
                raise
            return None
        inflight = sp.inflight
        if sp.dead:
            return None
        settings = self._configure(sp)
        if inflight.start_offset < plog.log_start_offset:
            inflight.advance_log_start(plog.log_start_offset)
        now = self.now_ms()
        spans: list[_Span] = []
        if settings.read_committed:
            # KIP-932 share.isolation.level=read_committed (Kafka's SharePartition with the fetch isolation
            # READ_COMMITTED): new records only below the LSO; aborted transactions' batches and control batches
            # are archived as they are passed, never delivered.
            end = self._replicas.last_stable_offset(sp.topic, partition)
            batches, archived = self._committed_batches(inflight, plog, max_records, max_bytes, min_one, strict,
                                                        spans, end)
            ranges = inflight.acquire(member, batches, max_records, now, archived)
        else:
            batches, new = self._new_batches(inflight, plog, max_records, max_bytes, min_one, strict,
                                             plog.log_end_offset)
            speo = inflight.end_offset
            ranges = inflight.acquire(member, batches, max_records, now)
            if not ranges:
                return None
            self._locked(now + inflight.lock_duration_ms)
            if ranges[0].first_offset < speo:
                # Re-delivered records (below the old SPEO) are read again, with the new ones: a batch may hold
                # both (record_limit mode cuts batches), and each batch is served once.
                return Acquired(ranges, self._read_ranges(plog, ranges))
            # Only new records: a slice of the read above, not a byte copied.
            return Acquired(ranges, new.served(speo, inflight.end_offset - 1))
        if not ranges:
            return None
        self._locked(now + inflight.lock_duration_ms)
        return Acquired(ranges, self._read_ranges(plog, ranges, spans))

    def _locked(self, deadline_ms: int) -> None:
        """New locks expire at `deadline_ms`: wake the expiry task only if it would sleep past that (one wake
        per acquisition would cost every ShareFetch a round over all share-partitions)."""
        self._lock_expiry.wake_if_due_before((deadline_ms - self.now_ms()) / 1000)

    def available_bytes(self, sp: SharePartition, enough: int) -> int:
        """Bytes acquirable now, counted up to `enough` (MinBytes); released records count as enough."""
        try:
            _, plog = self.resolve(sp.key[1], sp.key[2])
        except ShareError as err:
            # an offline partition is answered at once (KAFKA_STORAGE_ERROR), as Kafka completes a delayed
            # share fetch whose partition is in an offline log directory
            return enough if err.code == ErrorCode.KAFKA_STORAGE_ERROR else 0
        inflight = sp.inflight
        if inflight.available_count:
            return enough
        if inflight.in_flight_count >= inflight.max_in_flight_records:
            return 0
        total = 0
        if self.read_committed(sp.key[0]):
            end = self._replicas.last_stable_offset(sp.topic, sp.key[2])
            if inflight.end_offset < end:
                for header, fate in self._classified(plog, inflight.end_offset, end):
                    if header.last_offset >= inflight.end_offset and fate is not Fate.ABORTED:
                        total += header.size
                        if total >= enough:
                            break
        elif inflight.end_offset < plog.log_end_offset:
            for header in plog.iter_batch_headers(inflight.end_offset):
                if header.last_offset >= inflight.end_offset:
                    total += header.size
                    if total >= enough:
                        break
        return total

    @staticmethod
    def _classified(plog: Any, start: int, end: int) -> Iterator[tuple[BatchHeader, Fate]]:
        """The batches holding offsets [start, end) (`end` the LSO: a batch boundary), with their read_committed
        fate: headers only, as a read_committed Fetch (the aborted transactions come from the `.txnindex`)."""
        headers = takewhile(lambda h: h.base_offset < end, plog.iter_batch_headers(start))
        return classify_batches(headers, plog.collect_aborted_txns(start, end))

    def _committed_batches(self, inflight: ShareInFlight, plog: Any, max_records: int, max_bytes: int,
                           min_one: bool, strict: bool, spans: list[_Span], end: int
                           ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """read_committed `_new_batches`: (batches to acquire, ranges to archive) from SPEO up to `end` (the LSO).
        Batches of aborted transactions are archived wherever they are (one range per run of batches, never per
        offset) and count against neither budget; control batches (transaction markers) are acquired with the
        data around them, as Kafka acquires them (the consumer skips their records and acknowledges their
        offsets). Every batch passed is appended to `spans` (they are consecutive in the file)."""
        budget = _Budget(min(max_records, inflight.max_in_flight_records - inflight.in_flight_count), max_bytes,
                         min_one, strict)
        start = inflight.end_offset
        if budget.room <= 0 or start >= end:
            return [], []
        out: list[tuple[int, int]] = []
        archive: list[tuple[int, int]] = []
        for header, fate in self._classified(plog, start, end):
            first, last = max(header.base_offset, start), header.last_offset
            if last < start:
                continue
            if last >= end:
                break  # defensive: the LSO is the first offset of an open transaction's batch
            if fate is Fate.ABORTED:
                spans.append(_Span(header.base_offset, last, header.size))
                if archive and archive[-1][1] + 1 == first:
                    archive[-1] = (archive[-1][0], last)
                else:
                    archive.append((first, last))
                continue
            taken = budget.take(first, last, header.size, not out)
            if taken is None:
                break
            spans.append(_Span(header.base_offset, last, header.size))
            out.append(taken)
            if budget.spent:
                break
        return out, archive

    def _new_batches(self, inflight: ShareInFlight, plog: Any, max_records: int, max_bytes: int,
                     min_one: bool, strict: bool, end: int) -> tuple[list[tuple[int, int]], _NewRecords]:
        """Batch boundaries from SPEO: whole data batches up to the record and byte budgets, read once as a
        plain Fetch reads them (whole batches up to a byte limit); the acquired ones are served as slices of
        that read (see `_NewRecords`). Control batches (transaction markers) are acquired like the others, as
        Kafka acquires them: the consumer skips their records and acknowledges their offsets."""
        # The budgets (as `_Budget`'s) are spent inline: this loop runs once per batch of every ShareFetch.
        room = min(max_records, inflight.max_in_flight_records - inflight.in_flight_count)
        new = _NewRecords()
        if room <= 0 or inflight.end_offset >= end:
            return [], new
        taken = spent_bytes = 0  # records and bytes acquired so far
        out: list[tuple[int, int]] = []
        # Each read asks for about what the records left to take need, not for the bytes left (MaxBytes is often
        # 50 MiB: a read of all of it to take one more batch cost a 1 MiB-batch topic 20 ms per ShareFetch): the
        # log's average bytes per offset, with slack. A read returns at least its first batch (the budget decides
        # whether that fits), so a short guess costs one more read, never an empty one.
        offsets = plog.log_end_offset - plog.log_start_offset
        per_offset = plog.size_bytes / offsets if offsets > 0 else 1024.0
        # rounded up to whole batches of the average size, and half a batch more for batches above the average,
        # when it is known (a read cut inside a batch it needs takes one more read), else a quarter more; reads
        # of large batches stop at the last whole one (Segment.read), so asking more costs them nothing
        batch = plog.active.average_batch_size
        offset = speo = inflight.end_offset
        while True:
            left = max_bytes - spent_bytes
            if left <= 0:
                break
            need = (room - taken) * per_offset
            need = -(-need // batch) * batch + batch // 2 if batch else need * 1.25
            want = min(left, int(need) + _READ_SLACK_BYTES)
            bounds: list[tuple[int, int, int, int, int]] = []
            try:
                # the batches as one bound when they hold no control batch and fit the records left
                found = plog.read(offset, max(1, want), min_one_batch=True, bounds=bounds, run_records=room - taken)
            except OffsetOutOfRangeError:  # retention moved the log start: nothing left to read
                break
            data = memoryview(found.data)
            if bounds:
                new.reads.append((data, bounds))
            read_end = offset
            stop = not data
            for _pos, first, last, size, _attributes in bounds:
                read_end = last + 1
                if last < speo:
                    continue
                if last >= end:
                    stop = True
                    break
                if spent_bytes + size > max_bytes and (out or not min_one):
                    stop = True  # the first batch always fits with min_one
                    break
                if not out:
                    first = max(first, speo)  # only the first batch taken may start below SPEO
                taken += last - first + 1
                spent_bytes += size
                if taken >= room:
                    if strict:
                        last -= taken - room  # record_limit: cut to the room left (the client filters by ranges)
                    out.append((first, last))
                    stop = True
                    break
                out.append((first, last))
            # want == left: the read held every batch that fits the bytes left
            if stop or want >= left or read_end <= offset or read_end >= end:
                break
            offset = read_end
        return out, new

    @classmethod
    def _read_ranges(cls, plog: Any, ranges: Sequence, spans: Sequence[_Span] = ()
                     ) -> bytes | memoryview | BytesParts:
        """The whole batches overlapping the acquired ranges, each once, in offset order, and nothing else.

        Reads ask for about the bytes served, not for MaxBytes per range (that read megabytes to serve
        kilobytes): exactly the batches' bytes when this acquisition scanned them (new records), else the log's
        average bytes per offset times the offsets wanted (re-delivered records). Ranges separated by small gaps
        share one read, since every log read costs an index interval of look-ahead anyway.
        """
        ordered = sorted(ranges, key=lambda r: r.first_offset)
        if not ordered:
            return b""
        offsets = plog.log_end_offset - plog.log_start_offset
        per_offset = max(1.0, plog.size_bytes / offsets) if offsets > 0 else 1024.0
        # window_end[i]: last offset of the run of ranges from i whose gaps are cheaper to read through.
        window_end = [r.last_offset for r in ordered]
        for i in range(len(ordered) - 2, -1, -1):
            gap = ordered[i + 1].first_offset - ordered[i].last_offset - 1
            if gap * per_offset <= COALESCE_GAP_BYTES:
                window_end[i] = window_end[i + 1]
        cursor = _BatchCursor(plog)
        chunks = _Slices()
        covered = -1  # last offset already served
        for i, r in enumerate(ordered):
            pos = max(r.first_offset, covered + 1)
            while pos <= r.last_offset:
                want = _spans_bytes(spans, pos, window_end[i])
                if want is None:
                    want = int(per_offset * (window_end[i] - pos + 1))
                got = cursor.batch_at(pos, want)
                if got is None or got[0].base_offset > r.last_offset:
                    break  # nothing more in the log, or pos..last is a gap (compaction): the client acks a gap
                header, data, at = cursor.take()
                chunks.add(data, at, at + header.size)
                covered = header.last_offset
                pos = covered + 1
        return chunks.bytes()

    # --- acknowledge / release ---------------------------------------------------------------------------------
    async def acknowledge(self, sp: SharePartition, member: str, batches: Sequence[tuple[int, int, Sequence[int]]]
                          ) -> ErrorCode:
        self._configure(sp)
        error = ErrorCode.NONE
        for code in sp.inflight.acknowledge(member, batches, self.now_ms()):
            if code:
                error = ErrorCode(code)  # the first refusal is the partition's answer
                break
        written = await self.persist(sp)  # also when refused: nothing changed, but earlier writes must land
        if error:
            return error
        # Released records, or room under the in-flight limit for new ones: a share fetch parked on this
        # share-partition may acquire now (Kafka completes the delayed share fetches of the partition after
        # every acknowledgement; before, a fetch parked at the limit waited out its MaxWaitMs).
        if sp.inflight.can_acquire():
            self._wake(sp)
        return written

    async def release_member(self, group: str, member: str, keys: Sequence[PartitionKey] | None = None) -> int:
        """Release what `member` holds (session closed, member left or expired); records are available at once."""
        released = 0
        targets = [self._partitions[k] for k in keys if k in self._partitions] if keys is not None else [
            sp for k, sp in self._partitions.items() if k[0] == group]
        for sp in targets:
            n = sp.inflight.release_member(member, self.now_ms())
            if n:
                released += n
                await self.persist(sp)
                self._wake(sp)
        return released

    def membership(self, group: str, member: str) -> tuple[bool, Assignment | None]:
        """(is a member, its assignment) from the group coordinator; (True, None) while it cannot tell (not
        loaded), so that a fetch is served rather than refused."""
        if not self._groups.loaded:
            return True, None
        assignment = self._groups.member_assignment(group, member)
        return assignment is not None, assignment

    def session_opened(self, group: str, member: str, connection_id: int) -> None:
        self._session_conn[(group, member)] = connection_id

    def session_closed(self, group: str, member: str) -> None:
        self._session_conn.pop((group, member), None)

    def on_connection_closed(self, info: Any) -> None:
        """A client connection went away (crash, network): its share sessions end and their records are
        released at once rather than when the locks expire."""
        gone = [key for key, conn in self._session_conn.items() if conn == info.id]
        for group, member in gone:
            del self._session_conn[(group, member)]
            self.sessions.remove_member(group, member)
            self._release_soon(group, member)

    def on_member_removed(self, group_id: str, member_id: str) -> None:
        """Hook for the group coordinator: the member left or its session timed out."""
        self.sessions.remove_member(group_id, member_id)
        self.session_closed(group_id, member_id)
        self._release_soon(group_id, member_id)

    def on_group_deleted(self, group_id: str) -> None:
        """The group coordinator deleted the (empty) share group and its share state: forget the loaded
        share-partitions, so a new group of the same name starts from fresh state."""
        for key in [k for k in self._partitions if k[0] == group_id]:
            del self._partitions[key]
        self._settings.pop(group_id, None)

    def on_share_state_reset(self, group_id: str, partitions: dict) -> None:
        """AlterShareGroupOffsets / DeleteShareGroupOffsets replaced or deleted these share-partitions' durable
        state (the group is empty): drop the loaded copies, the next fetch loads the new state."""
        for tid, parts in partitions.items():
            for p in parts:
                sp = self._partitions.pop((group_id, tid, p), None)
                if sp is not None:
                    sp.dead = True
                    sp.failure = ErrorCode.FENCED_STATE_EPOCH
                    self._wake(sp)

    def _release_soon(self, group: str, member: str) -> None:
        if self._closed:
            return
        task = asyncio.get_running_loop().create_task(self.release_member(group, member))
        self._releases.add(task)
        task.add_done_callback(self._release_done)

    def _release_done(self, task: asyncio.Task) -> None:
        self._releases.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("share release failed", exc_info=task.exception())

    async def close(self) -> None:
        self._closed = True
        for task in list(self._releases):
            task.cancel()

    # --- waiting -----------------------------------------------------------------------------------------------
    def _wake(self, sp: SharePartition) -> None:
        for event in sp.waiters:
            event.set()

    async def wait(self, partitions: Sequence[SharePartition], timeout_s: float) -> bool:
        """Park until an append to one of `partitions` or records there become available again."""
        if timeout_s <= 0:
            return False
        event = asyncio.Event()
        for sp in partitions:
            sp.waiters.add(event)
        keys = [(sp.topic, sp.key[2]) for sp in partitions]
        appended = asyncio.ensure_future(self._replicas.wait_for_append(keys, timeout_s))
        released = asyncio.ensure_future(event.wait())
        try:
            done, _ = await asyncio.wait([appended, released], timeout=timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
            return bool(done) and (released in done or appended.result())
        finally:
            for task in (appended, released):
                task.cancel()
            for sp in partitions:
                sp.waiters.discard(event)

    # --- lock expiry -------------------------------------------------------------------------------------------
    def _next_expiry_s(self) -> float | None:
        """Seconds until the earliest lock deadline of any share-partition (None: no lock held)."""
        deadlines = [d for sp in self._partitions.values() if (d := sp.inflight.next_deadline()) is not None]
        return (min(deadlines) - self.now_ms()) / 1000 if deadlines else None

    async def _expire_locks(self) -> None:
        """Release expired locks and persist that; one failed share-partition does not hold up the others (the
        round then fails, is logged, and the task goes on: a dead task would leave every later lock held for
        ever)."""
        now = self.now_ms()
        failed: Exception | None = None
        for sp in list(self._partitions.values()):
            try:
                deadline = sp.inflight.next_deadline()
                if deadline is not None and deadline <= now and sp.inflight.expire_locks(now):
                    self._wake(sp)
                    await self.persist(sp)
            except Exception as err:  # noqa: BLE001 - one partition must not hold up the others
                failed = err
        if failed is not None:
            raise failed

    # --- topic deletion ----------------------------------------------------------------------------------------
    def forget_topic(self, topic_id: uuid.UUID) -> int:
        """A topic was deleted: drop its share-partitions from memory (their durable state is deleted by the
        share coordinator); parked fetches on them wake up and find the topic gone. Returns how many."""
        gone = [key for key in self._partitions if key[1] == topic_id]
        for key in gone:
            sp = self._partitions.pop(key)
            sp.dead = True
            sp.failure = ErrorCode.UNKNOWN_TOPIC_ID
            self._wake(sp)
        if gone:
            log.info("share-partitions of a deleted topic dropped", topic_id=str(topic_id), partitions=len(gone))
        return len(gone)


def follow_events(manager: SharePartitionManager, *, topics: TopicManager, groups: ShareGroupEvents,
                  server: ConnectionEvents) -> None:
    """Subscribe the share-partition leader to what it must follow: topic deletion, the group coordinator's
    member/group/state-reset events, closed connections (their share sessions end)."""
    topics.on_delete(lambda info: manager.forget_topic(info.topic_id))
    groups.add_member_removed_listener(manager.on_member_removed)
    groups.add_group_deleted_listener(manager.on_group_deleted)
    groups.add_share_state_reset_listener(manager.on_share_state_reset)
    server.close_listeners.append(manager.on_connection_closed)
