"""The share coordinator (KIP-932), sans-IO: durable share-partition state on `__share_group_state`.

One object plays Kafka's ShareCoordinatorService (request fan-out, loading, partitioning) and the
ShareCoordinatorShards behind it (per-key state, fencing, record generation, replay). It is driven by method calls
and an injected clock; it never touches the log itself.

Contract with the caller (wire handler or in-process share-partition leader):
 * Every operation returns `records`: `Record(partition, key, value)` tuples for `__share_group_state`
   (value None = tombstone). The caller must append them, in order, to those partitions and make them durable
   BEFORE it sends the response / tells anyone the operation succeeded (durability before answer).
 * The state in memory already includes those records (Kafka's runtime does the same: it replays a record when
   it writes it). A response without records may therefore show state from an earlier operation whose append
   is still in flight; the caller answers it only once every earlier append to the key's partition is durable
   (Kafka completes coordinator operations in log order). With one event loop and a group-commit flusher that
   is "await the partition's last appended offset".
 * If an append fails, memory is ahead of the log: `load_begin(p)`, replay partition p from the log, then
   `load_complete(p)` (there is no undo, as in the group coordinator).

Loading: `load_begin(p)` drops the state of partition p and answers COORDINATOR_LOAD_IN_PROGRESS for its keys
until `load_complete(p)`; `unload(p)` drops it and answers NOT_COORDINATOR until the next load. Partitions never
loaded or unloaded are served (a single node owns them all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from protocol.errors import ErrorCode

from . import records as rec
from .config import ShareCoordinatorConfig
from .keys import SharePartitionKey, partition_for
from .records import Record
from .state import (
    UNINITIALIZED_START_OFFSET,
    UNKNOWN_DELIVERY_COMPLETE_COUNT,
    SharePartitionState,
    ShareUpdate,
    StateBatch,
    apply_update,
    combine_state_batches,
    overlay_state_batches,
)

# Kafka's messages (ShareCoordinatorShard / ShareCoordinatorService).
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
EMPTY_GROUP_ID = "Group id must be specified and non-empty."
INVALID_BATCH = "State batch offsets must satisfy 0 <= FirstOffset <= LastOffset."
# Ours (Kafka's share coordinator stores such values and its share-partition leader then fails to load them):
INVALID_START_OFFSET = "The start offset must be -1 or non-negative."
INVALID_DELIVERY_STATE = "State batch delivery states must be 0 (Available), 2 (Acknowledged) or 4 (Archived)."
INVALID_DELIVERY_COUNT = "State batch delivery counts cannot be negative."
BATCHES_WITHOUT_START = "State batches cannot be written to a share-partition without a start offset."
# Delivery states a share-partition leader persists (Kafka's RecordState ids; Acquired is written as Available).
PERSISTED_DELIVERY_STATES = frozenset({0, 2, 4})

# What a read summary says for a key without state (Kafka's PartitionFactory defaults).
DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0

PartitionExists = Callable[[UUID, int], bool]


@dataclass
class OpResult:
    """Outcome of one in-process operation; unpacks as `(error_code, records)`."""

    error_code: ErrorCode
    records: list[Record] = field(default_factory=list)
    error_message: str | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.error_code, self.records))


@dataclass
class ReadResult:
    """Outcome of a read; unpacks as `(error_code, state, records)`. A read may write: a new leader epoch is
    recorded durably so that older leaders are fenced after a restart too."""

    error_code: ErrorCode
    state: SharePartitionState | None = None
    records: list[Record] = field(default_factory=list)
    error_message: str | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.error_code, self.state, self.records))


@dataclass(frozen=True)
class Summary:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int


@dataclass
class CoordinatorResult:
    """Outcome of a wire request; unpacks as `(response, records)`."""

    response: dict[str, Any]
    records: list[Record] = field(default_factory=list)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.response, self.records))


@dataclass(slots=True)
class _Entry:
    state: SharePartitionState
    # Highest epochs ever recorded for the key (Kafka's leaderEpochMap / stateEpochMap): fencing survives a
    # re-initialization that writes a lower leader epoch into the state itself.
    leader_epoch_fence: int
    state_epoch_fence: int
    updates_since_snapshot: int
    partition: int  # the key's `__share_group_state` partition
    update_key: bytes  # the key of its ShareUpdate records


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _batch(b: Any) -> StateBatch:
    if type(b) is StateBatch:  # the in-process leader's (most writes)
        return b
    if isinstance(b, Mapping):
        return StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
    return StateBatch(*b)


class ShareCoordinator:
    def __init__(self, config: ShareCoordinatorConfig | None = None, *, clock: Callable[[], int],
                 partition_exists: PartitionExists | None = None) -> None:
        """`clock()` gives wall-clock milliseconds (record timestamps). `partition_exists(topic_id, p)` is the
        metadata check Kafka makes (UNKNOWN_TOPIC_OR_PARTITION when False); None skips it."""
        self.config = config or ShareCoordinatorConfig()
        self._clock = clock
        self._partition_exists = partition_exists
        self._entries: dict[SharePartitionKey, _Entry] = {}
        self._loading: set[int] = set()
        self._unloaded: set[int] = set()

    # ------------------------------------------------------------------------------------------- partitions

    def partition_for(self, key: SharePartitionKey) -> int:
        return partition_for(key, self.config.state_topic_num_partitions)

    def load_begin(self, partition: int) -> None:
        self._drop_partition(partition)
        self._unloaded.discard(partition)
        self._loading.add(partition)

    def load_complete(self, partition: int) -> None:
        self._loading.discard(partition)

    def unload(self, partition: int) -> None:
        self._drop_partition(partition)
        self._loading.discard(partition)
        self._unloaded.add(partition)

    def _drop_partition(self, partition: int) -> None:
        for k in [k for k in self._entries if self.partition_for(k) == partition]:
            del self._entries[k]

    def state(self, key: SharePartitionKey) -> SharePartitionState | None:
        e = self._entries.get(key)
        return e.state if e else None

    def keys(self) -> list[SharePartitionKey]:
        return list(self._entries)

    # ------------------------------------------------------------------------------------------------ replay

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        """Apply one `__share_group_state` record (ShareSnapshot replaces, ShareUpdate merges, a tombstone
        deletes). Records of other types are ignored, as Kafka does."""
        decoded = rec.decode(key, value)
        if decoded is not None:
            self._apply(decoded.key, decoded.value)

    def _apply(self, key: SharePartitionKey, value: SharePartitionState | ShareUpdate | None,
               e: _Entry | None = None) -> None:
        # The one mutation path: live writes and replay both come through here, so replay rebuilds the same state.
        # `e`: the key's entry when the caller holds it already (a write), else it is looked up.
        if e is None:
            e = self._entries.get(key)
        if value is None:
            self._entries.pop(key, None)
        elif isinstance(value, SharePartitionState):
            # Normalize in case a writer left overlapping or unpruned batches in a snapshot.
            s = value._replace(state_batches=combine_state_batches((), value.state_batches, value.start_offset))
            if e is None:
                self._entries[key] = self._new_entry(key, s, s.state_epoch, 0)
            else:
                e.state = s
                e.leader_epoch_fence = max(e.leader_epoch_fence, s.leader_epoch)
                e.state_epoch_fence = max(e.state_epoch_fence, s.state_epoch)
                e.updates_since_snapshot = 0
        else:
            s = apply_update(e.state if e else None, value)
            if e is None:
                self._entries[key] = self._new_entry(key, s, -1, 1)
            else:
                e.state = s
                e.leader_epoch_fence = max(e.leader_epoch_fence, s.leader_epoch)
                e.updates_since_snapshot += 1

    def _new_entry(self, key: SharePartitionKey, s: SharePartitionState, state_epoch_fence: int, updates: int
                   ) -> _Entry:
        return _Entry(s, s.leader_epoch, state_epoch_fence, updates, self.partition_for(key), rec.update_key(key))

    def _emit_snapshot(self, key: SharePartitionKey, s: SharePartitionState) -> Record:
        k, v = rec.encode_snapshot(key, s)
        self._apply(key, s)
        return Record(self.partition_for(key), k, v)

    def _emit_update(self, key: SharePartitionKey, e: _Entry, u: ShareUpdate) -> Record:
        value = rec.encode_update_value(u)
        self._apply(key, u, e)
        return Record(e.partition, e.update_key, value)

    def _emit_tombstones(self, key: SharePartitionKey) -> list[Record]:
        p = self.partition_for(key)
        self._apply(key, None)
        return [Record(p, k, None) for k in rec.tombstone_keys(key)]

    # ------------------------------------------------------------------------------------------------ checks

    def _check_common(self, key: SharePartitionKey, p: int | None = None) -> int:
        """The checks of every operation; returns the key's `__share_group_state` partition (`p`, when the
        caller knows it already)."""
        if not key.group_id:
            raise _Refused(ErrorCode.INVALID_GROUP_ID, EMPTY_GROUP_ID)
        if p is None:
            p = self.partition_for(key)
        if p in self._unloaded:
            raise _Refused(ErrorCode.NOT_COORDINATOR)
        if p in self._loading:
            raise _Refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if key.partition < 0:
            raise _Refused(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        return p

    def _check_metadata(self, key: SharePartitionKey) -> None:
        if self._partition_exists is not None and not self._partition_exists(key.topic_id, key.partition):
            raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    @staticmethod
    def _check_leader_epoch(e: _Entry, leader_epoch: int) -> None:
        # -1 means "not supplied" and is never fenced.
        if leader_epoch != -1 and e.leader_epoch_fence > leader_epoch:
            raise _Refused(ErrorCode.FENCED_LEADER_EPOCH)

    @staticmethod
    def _check_state_epoch(e: _Entry | None, state_epoch: int) -> None:
        if e is not None and state_epoch != -1 and e.state_epoch_fence > state_epoch:
            raise _Refused(ErrorCode.FENCED_STATE_EPOCH)

    @staticmethod
    def _check_start_offset(start_offset: int) -> None:
        if start_offset < UNINITIALIZED_START_OFFSET:
            raise _Refused(ErrorCode.INVALID_REQUEST, INVALID_START_OFFSET)

    @staticmethod
    def _check_batches(batches: Sequence[StateBatch]) -> None:
        for b in batches:
            if b.first_offset < 0 or b.first_offset > b.last_offset:
                raise _Refused(ErrorCode.INVALID_REQUEST, INVALID_BATCH)
            if b.delivery_state not in PERSISTED_DELIVERY_STATES:
                raise _Refused(ErrorCode.INVALID_REQUEST, INVALID_DELIVERY_STATE)
            if b.delivery_count < 0:
                raise _Refused(ErrorCode.INVALID_REQUEST, INVALID_DELIVERY_COUNT)

    # ------------------------------------------------------------------------------------ in-process API

    def initialize(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                   start_offset: int) -> OpResult:
        """InitializeShareGroupState for one share-partition: a fresh ShareSnapshot (no batches), replacing any
        state of an older state epoch. start_offset -1 leaves the SPSO to share.auto.offset.reset."""
        key = SharePartitionKey(group_id, topic_id, partition)
        try:
            self._check_common(key)
            self._check_start_offset(start_offset)
            e = self._entries.get(key)
            # Unlike a write's, an initialization's state epoch is always compared (Kafka's initializeState):
            # -1 is no "not supplied" here, or it would replace the state of any newer epoch.
            if e is not None and e.state_epoch_fence > state_epoch:
                raise _Refused(ErrorCode.FENCED_STATE_EPOCH)
            self._check_metadata(key)
        except _Refused as r:
            return OpResult(r.code, [], r.message)
        now = self._clock()
        s = SharePartitionState(
            snapshot_epoch=e.state.snapshot_epoch + 1 if e else 0, state_epoch=state_epoch,
            leader_epoch=DEFAULT_LEADER_EPOCH, start_offset=start_offset,
            delivery_complete_count=(UNKNOWN_DELIVERY_COMPLETE_COUNT
                                     if start_offset == UNINITIALIZED_START_OFFSET else 0),
            create_timestamp=now, write_timestamp=now)
        return OpResult(ErrorCode.NONE, [self._emit_snapshot(key, s)])

    def write_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: Iterable[Any],
                    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT) -> OpResult:
        """WriteShareGroupState for one share-partition. `batches` are StateBatch tuples or mappings with the
        schema's snake_case names; start_offset -1 keeps the current SPSO."""
        key = SharePartitionKey(group_id, topic_id, partition)
        new = [_batch(b) for b in batches] if batches else []
        e = self._entries.get(key)
        try:
            self._check_common(key, None if e is None else e.partition)
            self._check_start_offset(start_offset)
            if new:
                self._check_batches(new)
            if e is None:
                raise _Refused(ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED)
            self._check_leader_epoch(e, leader_epoch)
            self._check_state_epoch(e, state_epoch)
            self._check_metadata(key)
            if new and start_offset == UNINITIALIZED_START_OFFSET and e.state.start_offset < 0:
                # batches with no SPSO to hang from: the leader resolves the SPSO before it writes any
                raise _Refused(ErrorCode.INVALID_REQUEST, BATCHES_WITHOUT_START)
        except _Refused as r:
            return OpResult(r.code, [], r.message)
        return OpResult(ErrorCode.NONE, [self._write_record(key, e, state_epoch, leader_epoch, start_offset,
                                                            delivery_complete_count, new)])

    def _write_record(self, key: SharePartitionKey, e: _Entry, state_epoch: int, leader_epoch: int,
                      start_offset: int, dcc: int, batches: Sequence[StateBatch]) -> Record:
        cur = e.state
        # A ShareUpdate cannot carry a state epoch, so a newer one needs a snapshot (as in Kafka).
        newer_state_epoch = state_epoch != -1 and state_epoch > cur.state_epoch
        if e.updates_since_snapshot >= self.config.snapshot_update_records_per_snapshot or newer_state_epoch:
            start = cur.start_offset if start_offset == -1 else start_offset
            now = self._clock()
            return self._emit_snapshot(key, SharePartitionState(
                snapshot_epoch=cur.snapshot_epoch + 1,
                state_epoch=cur.state_epoch if state_epoch == -1 else state_epoch,
                leader_epoch=cur.leader_epoch if leader_epoch == -1 else leader_epoch,
                start_offset=start, delivery_complete_count=dcc, create_timestamp=now, write_timestamp=now,
                state_batches=overlay_state_batches(cur.state_batches, batches, start)))
        # (snapshot epoch, leader epoch, start offset, delivery-complete count, batches): positional, built per write
        return self._emit_update(key, e, ShareUpdate(
            cur.snapshot_epoch, leader_epoch, start_offset, dcc, combine_state_batches((), batches, start_offset)))

    def read_state(self, group_id: str, topic_id: UUID, partition: int, leader_epoch: int) -> ReadResult:
        """ReadShareGroupState for one share-partition (the share-partition leader's first call)."""
        key = SharePartitionKey(group_id, topic_id, partition)
        try:
            self._check_common(key)
            e = self._entries.get(key)
            if e is None:
                raise _Refused(ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED)
            self._check_leader_epoch(e, leader_epoch)
            self._check_metadata(key)
        except _Refused as r:
            return ReadResult(r.code, None, [], r.message)
        current = e.state
        records = []
        if leader_epoch != -1 and leader_epoch != current.leader_epoch:
            # A new leader: record its epoch durably so writes from the old one stay fenced after a reload.
            records.append(self._write_record(key, e, -1, leader_epoch, current.start_offset,
                                              current.delivery_complete_count, ()))
        return ReadResult(ErrorCode.NONE, current, records)

    def read_state_summary(self, group_id: str, topic_id: UUID, partition: int) -> tuple[ErrorCode, Summary | None,
                                                                                      str | None]:
        """ReadShareGroupStateSummary for one share-partition; a key without state is not an error (Kafka
        answers start offset -1)."""
        key = SharePartitionKey(group_id, topic_id, partition)
        try:
            self._check_common(key)
            self._check_metadata(key)
        except _Refused as r:
            return r.code, None, r.message
        e = self._entries.get(key)
        if e is None:
            return ErrorCode.NONE, Summary(DEFAULT_STATE_EPOCH, DEFAULT_LEADER_EPOCH, UNINITIALIZED_START_OFFSET,
                                           UNKNOWN_DELIVERY_COMPLETE_COUNT), None
        s = e.state
        return ErrorCode.NONE, Summary(s.state_epoch, s.leader_epoch, s.start_offset,
                                       s.delivery_complete_count), None

    def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> OpResult:
        """DeleteShareGroupState for one share-partition: tombstones; deleting nothing is not an error."""
        key = SharePartitionKey(group_id, topic_id, partition)
        try:
            self._check_common(key)
            self._check_metadata(key)
        except _Refused as r:
            return OpResult(r.code, [], r.message)
        if key not in self._entries:
            return OpResult(ErrorCode.NONE)
        return OpResult(ErrorCode.NONE, self._emit_tombstones(key))

    def resnapshot(self, key: SharePartitionKey) -> list[Record]:
        """A fresh ShareSnapshot of the key's current state (same state, newer record), so that the records
        before it can be pruned (Kafka's cold-partition snapshots). Nothing for a key without state or of a
        partition being loaded or not owned."""
        e = self._entries.get(key)
        p = self.partition_for(key)
        if e is None or p in self._loading or p in self._unloaded:
            return []
        s = e.state
        return [self._emit_snapshot(key, s._replace(snapshot_epoch=s.snapshot_epoch + 1,
                                                    write_timestamp=self._clock()))]

    def delete_topics(self, topic_ids: Iterable[UUID]) -> list[Record]:
        """Tombstone the state of every share-partition of deleted topics (Kafka's maybeCleanupShareState, run
        on metadata changes). Keys of partitions being loaded or not owned are left alone."""
        ids = set(topic_ids)
        out: list[Record] = []
        for key in [k for k in self._entries if k.topic_id in ids]:
            p = self.partition_for(key)
            if p not in self._loading and p not in self._unloaded:
                out.extend(self._emit_tombstones(key))
        return out

    # ------------------------------------------------------------------------------------------ wire API

    @staticmethod
    def _per_partition(request: Mapping[str, Any], serve: Callable[[UUID, Any], dict[str, Any]]
                       ) -> dict[str, Any]:
        # Results in request order, one entry per topic of the request.
        return {"results": [
            {"topic_id": t["topic_id"], "partitions": [serve(t["topic_id"], p) for p in t["partitions"]]}
            for t in request["topics"]]}

    def initialize_share_group_state(self, request: Mapping[str, Any], version: int = 0) -> CoordinatorResult:
        records: list[Record] = []

        def serve(topic_id: UUID, p: Any) -> dict[str, Any]:
            r = self.initialize(request["group_id"], topic_id, p["partition"], p["state_epoch"],
                                p["start_offset"])
            records.extend(r.records)
            return {"partition": p["partition"], "error_code": int(r.error_code), "error_message": r.error_message}

        return CoordinatorResult(self._per_partition(request, serve), records)

    def write_share_group_state(self, request: Mapping[str, Any], version: int = 0) -> CoordinatorResult:
        records: list[Record] = []

        def serve(topic_id: UUID, p: Any) -> dict[str, Any]:
            r = self.write_state(request["group_id"], topic_id, p["partition"], p["state_epoch"],
                                 p["leader_epoch"], p["start_offset"], p["state_batches"],
                                 p.get("delivery_complete_count", UNKNOWN_DELIVERY_COMPLETE_COUNT))
            records.extend(r.records)
            return {"partition": p["partition"], "error_code": int(r.error_code), "error_message": r.error_message}

        return CoordinatorResult(self._per_partition(request, serve), records)

    def read_share_group_state(self, request: Mapping[str, Any], version: int = 0) -> CoordinatorResult:
        records: list[Record] = []

        def serve(topic_id: UUID, p: Any) -> dict[str, Any]:
            r = self.read_state(request["group_id"], topic_id, p["partition"], p["leader_epoch"])
            records.extend(r.records)
            out: dict[str, Any] = {"partition": p["partition"], "error_code": int(r.error_code),
                                   "error_message": r.error_message}
            if r.state is not None:
                s = r.state
                out.update(state_epoch=s.state_epoch, start_offset=s.start_offset,
                           state_batches=[b._asdict() for b in s.state_batches])
            return out

        return CoordinatorResult(self._per_partition(request, serve), records)

    def read_share_group_state_summary(self, request: Mapping[str, Any], version: int = 0) -> CoordinatorResult:
        def serve(topic_id: UUID, p: Any) -> dict[str, Any]:
            code, s, message = self.read_state_summary(request["group_id"], topic_id, p["partition"])
            out: dict[str, Any] = {"partition": p["partition"], "error_code": int(code), "error_message": message}
            if s is not None:
                out.update(state_epoch=s.state_epoch, leader_epoch=s.leader_epoch, start_offset=s.start_offset)
                if version >= 1:
                    out["delivery_complete_count"] = s.delivery_complete_count
            return out

        return CoordinatorResult(self._per_partition(request, serve))

    def delete_share_group_state(self, request: Mapping[str, Any], version: int = 0) -> CoordinatorResult:
        records: list[Record] = []

        def serve(topic_id: UUID, p: Any) -> dict[str, Any]:
            r = self.delete_state(request["group_id"], topic_id, p["partition"])
            records.extend(r.records)
            return {"partition": p["partition"], "error_code": int(r.error_code), "error_message": r.error_message}

        return CoordinatorResult(self._per_partition(request, serve), records)
