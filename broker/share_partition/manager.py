"""Share-partition leader (KIP-932): one ShareInFlight per (group, topic id, partition), on the event loop.

Its two entries are Kafka's SharePartitionManager.fetchMessages and acknowledge: `fetch_messages` serves a whole
ShareFetch (the share session, its acknowledgements, the release at the final epoch, the long poll of
delayed_fetch.py) and `acknowledge` a ShareAcknowledge; the handlers only decode into the types of requests.py and
encode the answer. It ties the sans-IO pieces to the broker: share sessions (sessions.py), in-flight state
(inflight.py), the partitions' logs, read only through the replica manager (batch bounds to acquire whole batches,
bytes to serve: broker/log/share_reads.py), and the share coordinator through the Persister
(broker/share_coordinator/persister.py: read_state on first use, write_state before an acknowledgement is
answered). A background task expires record locks; parked share fetches are woken by appends and transaction
markers (ReplicaManager) and by records becoming available again here (releases, expiries).

`share.isolation.level=read_committed` (a group config, read at each acquisition): new records are acquired only
below the partition's LSO, and the batches of aborted transactions are archived, never delivered (Kafka's
SharePartition.filterAbortedTransactionalAcquiredRecords), from batch headers and the `.txnindex` only (see
broker/log/read_committed.py). Control batches (transaction markers) are acquired with the records around them
under either level, as Kafka acquires them (the consumer skips their records).

The group coordinator tells the leader about members that left, deleted groups and reset share state through
the `on_*` hooks, which whoever builds the manager wires (see `follow_events`); the leader asks it back only who is a
member with which partitions (ShareGroupMembership).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.aio import wait_event
from broker.config import group_config as gc
from broker.config.group_config import GroupConfig
from broker.coordinator.periodic import PeriodicTask
from broker.log.dir_failure import KafkaStorageError
from broker.share_coordinator.persister import UNINITIALIZED_START_OFFSET, Persister, StateBatch
from broker.share_partition.delayed_fetch import DelayedShareFetch
from broker.share_partition.dlq import DeadLetterQueue
from broker.share_partition.eager import run_eager
from broker.share_partition.inflight import DeadLetter, ShareInFlight, StateDelta
from broker.share_partition.partition import (
    Acquired,
    GroupSettings,
    PartitionKey,
    ShareError,
    SharePartition,
    offline_error,
)
from broker.share_partition.requests import (
    Acknowledgements,
    PartitionAnswer,
    ShareAcknowledge,
    ShareAcknowledgeAnswer,
    ShareFetch,
    ShareFetchAnswer,
    TopicPartition,
)
from broker.share_partition.sessions import FINAL_EPOCH, ShareSession, ShareSessionCache, ShareSessionConfig
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.cluster.topics import TopicInfo
    from broker.config import BrokerConfig
    from broker.replica_manager import ReplicaManager

log = structlog.get_logger(__name__)

UNINITIALIZED = UNINITIALIZED_START_OFFSET
EXPIRY_RETRY_S = 0.5  # pause after a failed lock-expiry round before the next one


# group id -> its effective configs, typed (ConfigService.group_settings). A change of the group's configs gives a
# new object (the config service caches one per group and replaces it on a change), so the leader reads an
# object's settings once and keeps them while the same object comes back.
GroupConfigs = Callable[[str], GroupConfig]
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
        self.sessions = ShareSessionCache(ShareSessionConfig.from_config(config).max_share_sessions)
        self._partitions: dict[PartitionKey, SharePartition] = {}
        self._loading: dict[PartitionKey, asyncio.Future[SharePartition]] = {}
        self._lock_expiry = PeriodicTask("share-lock-expiry", self._expire_locks, next_due_s=self._next_expiry_s,
                                         failure_event="share lock expiry round failed",
                                         retry_after_s=EXPIRY_RETRY_S)
        self._settings: dict[str, GroupSettings] = {}  # group id -> its settings (see `settings`)
        # Share sessions live on the connection that opened them (as in Kafka): (group, member) -> connection id.
        self._session_conn: dict[tuple[str, str], int] = {}
        self._releases: set[asyncio.Task[int]] = set()
        self._closed = False
        # group id -> effective group configs (share.auto.offset.reset, share.record.lock.duration.ms, ...).
        self.group_configs = group_configs
        self.dlq = dlq

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # --- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._spawn(self._lock_expiry.run(), "share-lock-expiry")

    # --- the entries: ShareFetch and ShareAcknowledge (Kafka's fetchMessages and acknowledge) -------------------
    async def fetch_messages(self, fetch: ShareFetch, readable: Callable[[uuid.UUID], bool]) -> ShareFetchAnswer:
        """Serve one ShareFetch: its share-session part (a new session only for a member of the group), its
        acknowledgements (durable before they are answered), the release of what a closing session's member
        holds, then the long poll for records of the session's partitions (DelayedShareFetch). `readable` says
        whether the client may READ a topic (by id)."""
        group, member, epoch = fetch.group, fetch.member, fetch.session_epoch
        if not group:
            # Kafka opens the session, but no share-partition of group "" can be loaded: each requested partition
            # is answered UNKNOWN_SERVER_ERROR.
            return ShareFetchAnswer(lock_duration_ms=self.lock_duration_ms(group), partitions=[
                (tp, PartitionAnswer(ErrorCode.UNKNOWN_SERVER_ERROR)) for tp in fetch.partitions])
        if epoch == 0 and not self.membership(group, member)[0]:
            # Kafka drops the share sessions of members that leave the group or expire; a ShareFetch from one is
            # then answered SHARE_SESSION_NOT_FOUND. A session is opened only for a member of the group, so the
            # same answer goes to a member id the group coordinator does not know (clients re-join and retry).
            return ShareFetchAnswer(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                    f"Member {member} is not a member of share group {group}.")
        # A final request (-1) lists partitions only to acknowledge them: they join no session.
        add = [] if epoch == FINAL_EPOCH else fetch.partitions
        outcome = self.sessions.begin(group, member, epoch, add, fetch.forgotten, bool(fetch.acknowledgements))
        session = outcome.session
        if outcome.error != ErrorCode.NONE or session is None:
            return ShareFetchAnswer(outcome.error, outcome.message)
        if epoch == FINAL_EPOCH:
            self._session_closed(group, member)
        elif epoch == 0:
            self._session_opened(group, member, fetch.connection_id)
        answer = ShareFetchAnswer(lock_duration_ms=self.lock_duration_ms(group))
        results: dict[TopicPartition, PartitionAnswer] = {}

        def entry(tp: TopicPartition) -> PartitionAnswer:
            found = results.get(tp)
            if found is None:
                found = results[tp] = PartitionAnswer()
            return found

        denied = {tid for tid in {tp[0] for tp in chain(fetch.partitions, session.partitions)} if not readable(tid)}
        acks = fetch.acknowledgements
        if denied:
            for tp in acks:
                if tp[0] in denied:
                    entry(tp).ack_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            acks = {tp: a for tp, a in acks.items() if tp[0] not in denied}
        if acks:
            for tp, (code, message) in zip(acks, await self._acknowledge_all(group, member, list(acks.items())),
                                           strict=True):
                e = entry(tp)
                e.ack_error, e.ack_message = code, message
        if epoch == FINAL_EPOCH:
            # Session closed: the member's records go back to the others at once, in every partition of the group
            # (a forgotten partition may still hold locks). A session re-opened with epoch 0 keeps them, as in
            # Kafka (the member may still acknowledge what it holds).
            await self.release_member(group, member)
        elif not fetch.renew_only:
            await self._fetch_records(fetch, session, denied, entry)
            if epoch > 0:
                # Kafka moves the share-partitions that returned records to the end of an incremental session's
                # list, so that the session's next fetches (rotated from there) start with the others.
                for tp, e in results.items():
                    if e.acquired and tp in session.partitions:
                        del session.partitions[tp]
                        session.partitions[tp] = None
        answer.partitions = list(results.items())
        return answer

    async def _fetch_records(self, fetch: ShareFetch, session: ShareSession, denied: Collection[uuid.UUID],
                             entry: Callable[[TopicPartition], PartitionAnswer]) -> None:
        """The long poll of a ShareFetch over the session's readable partitions; answers go to `entry(tp)`."""
        tps = list(session.partitions)
        if denied:
            for tp in tps:
                if tp[0] in denied:
                    entry(tp).error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            tps = [tp for tp in tps if tp[0] not in denied]
        delayed = DelayedShareFetch(self, fetch.group, fetch.member, fetch.params)
        fetched = await delayed.run(tps)
        if fetch.session_epoch == 0:
            # a full (epoch 0) request lists every share-partition the fetch went through, records or not
            for tp in delayed.visited:
                entry(tp)
        for tp, got in fetched.items():
            e = entry(tp)
            if got.acquired is None:
                e.error, e.message = got.error, got.message
            else:
                e.records, e.acquired = got.acquired.records, got.acquired.ranges

    async def acknowledge(self, ack: ShareAcknowledge, readable: Callable[[uuid.UUID], bool]
                          ) -> ShareAcknowledgeAnswer:
        """Serve one ShareAcknowledge: its share-session part, then its acknowledgements (durable before they are
        answered); a closing session's member's records are released. `readable` as for `fetch_messages`."""
        group, member, epoch = ack.group, ack.member, ack.session_epoch
        outcome = self.sessions.acknowledge(group, member, epoch)
        if outcome.error != ErrorCode.NONE:
            return ShareAcknowledgeAnswer(outcome.error, outcome.message)
        if epoch == FINAL_EPOCH:
            self._session_closed(group, member)
        denied = {tid for tid in {tp[0] for tp, _ in ack.partitions} if not readable(tid)}
        outcomes = iter(await self._acknowledge_all(group, member,
                                                    [(tp, a) for tp, a in ack.partitions if tp[0] not in denied]))
        answers = [(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None) if tp[0] in denied else next(outcomes)
                   for tp, _ in ack.partitions]
        if outcome.ended is not None:
            await self.release_member(group, member)
        return ShareAcknowledgeAnswer(lock_duration_ms=self.lock_duration_ms(group), partitions=answers)

    async def _acknowledge_all(self, group: str, member: str, parts: list[tuple[TopicPartition, Acknowledgements]]
                               ) -> list[tuple[ErrorCode, str | None]]:
        """Acknowledge several partitions together: their state writes go out concurrently (one group commit)
        instead of one fsync after another. One partition (the common case) is awaited directly: a task of its
        own would only cost event-loop turns."""
        if len(parts) == 1:
            (tp, acks), = parts
            return [await self._acknowledge_partition(group, member, tp, acks)]
        return list(await asyncio.gather(*(self._acknowledge_partition(group, member, tp, acks)
                                           for tp, acks in parts)))

    async def _acknowledge_partition(self, group: str, member: str, tp: TopicPartition, acks: Acknowledgements
                                     ) -> tuple[ErrorCode, str | None]:
        if acks is None:
            return ErrorCode.INVALID_REQUEST, None  # Kafka refuses the type before the share-partition: no message
        if acks.renew and not self.renew_enabled(group):
            return ErrorCode.INVALID_RECORD_STATE, "Renew acknowledgements are disabled for the group " \
                "(share.renew.acknowledge.enable=false)."
        try:
            sp = self.loaded(group, *tp) or await self.partition(group, *tp)
        except ShareError as err:
            return err.code, err.message
        code = await self.acknowledge_records(sp, member, acks.batches)
        return code, (sp.inflight.refusal_message(member, acks.batches) if code == ErrorCode.INVALID_RECORD_STATE
                      or code == ErrorCode.INVALID_REQUEST else None)

    # --- configuration -----------------------------------------------------------------------------------------
    def settings(self, group: str) -> GroupSettings:
        """The group's settings, read again only when its configs changed (a new object, see GroupConfigs): a
        change (IncrementalAlterConfigs on the GROUP resource) applies to the next request, and a request parses
        no config."""
        configs = self.group_configs(group)
        cached = self._settings.get(group)
        if cached is not None and cached.source is configs:
            return cached
        settings = GroupSettings(
            configs,
            lock_duration_ms=configs.share_record_lock_duration_ms,
            delivery_count_limit=configs.share_delivery_count_limit,
            max_in_flight_records=configs.share_partition_max_record_locks,
            renew_enabled=configs.share_renew_acknowledge_enable,
            read_committed=configs.share_read_committed)
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

    def _start_offset(self, group: str, topic: str, partition: int) -> int:
        reset = self.group_configs(group).share_auto_offset_reset
        replicas = self._replicas
        if reset == "earliest":
            return replicas.log_offsets(topic, partition)[0]
        if reset.startswith("by_duration:"):
            found = replicas.offset_for_timestamp(
                topic, partition, self.now_ms() - gc.duration_ms(reset.removeprefix("by_duration:")))
            if found is not None:
                return found[0]
        return replicas.log_offsets(topic, partition)[1]

    # --- partitions --------------------------------------------------------------------------------------------
    def resolve(self, topic_id: uuid.UUID, partition: int) -> TopicInfo:
        """The partition's topic, or ShareError UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION, or
        KAFKA_STORAGE_ERROR for a log whose directory is offline (Kafka's share fetch looks the partition up
        with ReplicaManager.getPartitionOrException)."""
        info = self._topics.registry.by_id(topic_id)
        if info is None:
            raise ShareError(ErrorCode.UNKNOWN_TOPIC_ID)
        if not 0 <= partition < info.num_partitions:
            raise ShareError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if self._replicas.offline(info.name, partition):
            raise offline_error(info.name, partition)
        return info

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
        info = self.resolve(topic_id, partition)
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        fut: asyncio.Future[SharePartition] = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            sp = await self._load(key, info.name)
            self._partitions[key] = sp
            fut.set_result(sp)
            return sp
        except BaseException as err:
            fut.set_exception(err)
            fut.exception()  # retrieved: a failed load must not log "never retrieved"
            raise
        finally:
            del self._loading[key]

    async def _load(self, key: PartitionKey, topic: str) -> SharePartition:
        group, topic_id, partition = key
        settings = self.settings(group)
        state_epoch, start, batches = await self._read_state(key)
        self.resolve(topic_id, partition)  # still there (the topic may have been deleted meanwhile)
        # Any negative start offset is "not initialized" (-1 is the only one a well-behaved writer stores, but the
        # inter-broker InitializeShareGroupState/WriteShareGroupState APIs accept others): resolve it as such.
        if start >= 0:
            try:
                inflight = ShareInFlight.load(start, batches, state_epoch=state_epoch,
                                              max_in_flight_records=settings.max_in_flight_records,
                                              delivery_count_limit=settings.delivery_count_limit,
                                              lock_duration_ms=settings.lock_duration_ms)
            except ValueError as err:
                # The share coordinator refuses malformed batches now, but a state written before it did (or
                # by a future version) may still hold some: it fails this partition, not the request.
                log.warning("share-partition state unreadable", group=group, topic=topic, partition=partition,
                            error=str(err))
                raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, f"The share-partition state is invalid: {err}") \
                    from None
            # The log may have moved on (retention) while nobody was fetching.
            inflight.advance_log_start(self._replicas.log_offsets(topic, partition)[0])
            sp = SharePartition(key, topic, inflight)
        else:
            inflight = ShareInFlight(0, state_epoch=state_epoch, max_in_flight_records=settings.max_in_flight_records,
                                     delivery_count_limit=settings.delivery_count_limit,
                                     lock_duration_ms=settings.lock_duration_ms)
            inflight.reset_start(self._start_offset(group, topic, partition))
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
            code: ErrorCode = outcome
            return code
        sp.last_write = outcome
        return await asyncio.shield(outcome)

    async def _write_after(self, prev: asyncio.Future[ErrorCode] | None, sp: SharePartition, delta: StateDelta | None,
                           dead: list[DeadLetter]) -> ErrorCode:
        if prev is not None:
            await asyncio.wait([prev])
        if sp.dead:
            return sp.failure  # an earlier write failed: this delta builds on state that was never durable
        group, topic_id, partition = sp.key
        if dead:
            # KIP-1191: the dead letters are durable in the group's DLQ before their archived state is written.
            try:
                source: TopicInfo | None = self.resolve(topic_id, partition)
            except ShareError:
                source = None
            try:
                await self.dlq.write(group, sp.topic, partition, dead, source)
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
            self.resolve(topic_id, partition)
        except ShareError as err:
            if err.code == ErrorCode.KAFKA_STORAGE_ERROR:
                raise
            return None
        inflight = sp.inflight
        if sp.dead:
            return None
        settings = self._configure(sp)
        replicas, topic = self._replicas, sp.topic
        log_start = replicas.log_offsets(topic, partition)[0]
        if inflight.start_offset < log_start:
            inflight.advance_log_start(log_start)
        now = self.now_ms()
        speo = inflight.end_offset
        # KIP-932 share.isolation.level=read_committed (Kafka's SharePartition with the fetch isolation
        # READ_COMMITTED): new records only below the LSO; aborted transactions' batches are archived as they are
        # passed, never delivered.
        new = replicas.new_batches(topic, partition, speo,
                                   min(max_records, inflight.max_in_flight_records - inflight.in_flight_count),
                                   max_bytes, min_one=min_one, strict=strict, read_committed=settings.read_committed)
        ranges = inflight.acquire(member, new.batches, max_records, now, new.archived)
        if not ranges:
            return None
        self._locked(now + inflight.lock_duration_ms)
        if new.reads is not None and ranges[0].first_offset >= speo:
            # Only new records: a slice of the read above, not a byte copied.
            return Acquired(ranges, new.reads.served(speo, inflight.end_offset - 1))
        # Re-delivered records (below the old SPEO) are read again, with the new ones: a batch may hold both
        # (record_limit mode cuts batches), and each batch is served once.
        return Acquired(ranges, replicas.read_batches(topic, partition, ranges, new.spans))

    def _locked(self, deadline_ms: int) -> None:
        """New locks expire at `deadline_ms`: wake the expiry task only if it would sleep past that (one wake
        per acquisition would cost every ShareFetch a round over all share-partitions)."""
        self._lock_expiry.wake_if_due_before((deadline_ms - self.now_ms()) / 1000)

    def available_bytes(self, sp: SharePartition, enough: int) -> int:
        """Bytes acquirable now, counted up to `enough` (MinBytes); released records count as enough."""
        try:
            self.resolve(sp.key[1], sp.key[2])
        except ShareError as err:
            # an offline partition is answered at once (KAFKA_STORAGE_ERROR), as Kafka completes a delayed
            # share fetch whose partition is in an offline log directory
            return enough if err.code == ErrorCode.KAFKA_STORAGE_ERROR else 0
        inflight = sp.inflight
        if inflight.available_count:
            return enough
        if inflight.in_flight_count >= inflight.max_in_flight_records:
            return 0
        return self._replicas.acquirable_bytes(sp.topic, sp.key[2], inflight.end_offset, enough,
                                               read_committed=self.read_committed(sp.key[0]))

    # --- acknowledge / release ---------------------------------------------------------------------------------
    async def acknowledge_records(self, sp: SharePartition, member: str,
                                  batches: Sequence[tuple[int, int, Sequence[int]]]) -> ErrorCode:
        """Apply a member's acknowledgements to one share-partition and persist them: durable on return."""
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

    def _session_opened(self, group: str, member: str, connection_id: int) -> None:
        self._session_conn[(group, member)] = connection_id

    def _session_closed(self, group: str, member: str) -> None:
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
        self._session_closed(group_id, member_id)
        self._release_soon(group_id, member_id)

    def on_group_deleted(self, group_id: str) -> None:
        """The group coordinator deleted the (empty) share group and its share state: forget the loaded
        share-partitions, so a new group of the same name starts from fresh state."""
        for key in [k for k in self._partitions if k[0] == group_id]:
            del self._partitions[key]
        self._settings.pop(group_id, None)

    def on_share_state_reset(self, group_id: str, partitions: Mapping[uuid.UUID, Iterable[int]]) -> None:
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

    def _release_done(self, task: asyncio.Task[int]) -> None:
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
        # One event for releases and appends, both watched before the first await (see watching_appends).
        event = asyncio.Event()
        for sp in partitions:
            sp.waiters.add(event)
        try:
            with self._replicas.watching_appends([(sp.topic, sp.key[2]) for sp in partitions], event):
                return await wait_event(event, timeout_s)
        finally:
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
