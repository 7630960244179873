"""The transaction coordinator (KIP-98, KIP-447, KIP-890), sans-IO: transactional ids' state on
`__transaction_state`.

One object plays Kafka's TransactionCoordinator (request rules, fencing, retries) and TransactionStateManager
(the per-partition cache, loading, timeouts, expiry). It is driven by method calls and an injected clock and
never touches a log or a socket.

Contract with the caller (see results.py): every operation returns the records to append; the caller makes
them durable, in order, before it answers the request or sends the returned markers. The state in memory
already includes those records: every change is made by encoding the record and replaying its bytes, the same
path a load takes, so state rebuilt from the log equals state built while serving. There is therefore no
"pending transition" as in Kafka: a request that arrives while an append is in flight sees the state after it,
and the caller answers it only once the earlier appends of its partition are durable. If an append fails,
memory is ahead of the log: `load_begin(p)`, replay partition p, `load_complete(p)`. A transaction in
PrepareCommit/PrepareAbort stands for Kafka's pending transition (Kafka holds one from the prepare record until
the completion record, markers included): requests about it answer CONCURRENT_TRANSACTIONS where Kafka checks
the pending transition, before or after the producer checks as Kafka orders them.

Producer ids: an operation that needs a fresh producer id (a new transactional id, a used-up epoch range,
a TV2 epoch overflow) returns `need_producer_id`; the caller allocates one (asynchronously, as it likes) and
calls again with `new_producer_id=`. The state is checked again on that call.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from protocol.errors import ErrorCode

from . import metadata as md
from . import records as rec
from .config import TransactionCoordinatorConfig
from .metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX, TopicPartition, TxnMetadata
from .partitioning import partition_for
from .records import Record
from .results import (
    AddPartitionsResult,
    ListTransactionsResult,
    TransactionDescription,
    TransactionListing,
    TxnMarker,
    TxnResult,
)
from .state import TV_0, TxnState, log_value_version, supports_epoch_bump

PartitionExists = Callable[[str, int], bool]
DEFAULT_COORDINATOR_EPOCH = 0


@dataclass(frozen=True)
class _Refused(Exception):
    code: ErrorCode


class TransactionCoordinator:
    def __init__(self, config: TransactionCoordinatorConfig | None = None, *, clock: Callable[[], int],
                 partition_exists: PartitionExists | None = None) -> None:
        """`clock()` gives wall-clock milliseconds. `partition_exists(topic, partition)` is the metadata check
        Kafka's request handler makes before adding partitions (None skips it)."""
        self.config = config or TransactionCoordinatorConfig()
        self._clock = clock
        self._partition_exists = partition_exists
        self._txns: dict[str, TxnMetadata] = {}
        self._coordinator_epochs: dict[int, int] = {}
        self._loading: set[int] = set()
        self._unloaded: set[int] = set()

    # ------------------------------------------------------------------------------------------- partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def coordinator_epoch(self, partition: int) -> int:
        """The epoch markers carry so partition leaders can fence a stale coordinator (the leader epoch of the
        `__transaction_state` partition in Kafka; constant on a single node unless loads say otherwise)."""
        return self._coordinator_epochs.get(partition, DEFAULT_COORDINATOR_EPOCH)

    def load_begin(self, partition: int, coordinator_epoch: int = DEFAULT_COORDINATOR_EPOCH) -> None:
        """Start loading a partition: its state is dropped and its ids answer COORDINATOR_LOAD_IN_PROGRESS until
        `load_complete`; feed its records to `replay` in between."""
        self._drop(partition)
        self._unloaded.discard(partition)
        self._loading.add(partition)
        self._coordinator_epochs[partition] = coordinator_epoch

    def load_complete(self, partition: int) -> TxnResult:
        """End a load. Transactions the log left in PrepareCommit/PrepareAbort must still have their markers
        written: they are returned (Kafka resends them right after loading). One with nothing to mark (a TV2
        abort of nothing, cut short before its completion was logged) is completed at once."""
        self._loading.discard(partition)
        prepared = [m for m in self._txns.values()
                    if m.state.is_prepare and self.partition_for(m.transactional_id) == partition]
        out = self._markers_for(prepared)
        out.records += [self._emit(md.complete(m, self._clock())) for m in prepared if not m.topic_partitions]
        return out

    def unload(self, partition: int) -> None:
        """Resign a partition: its ids answer NOT_COORDINATOR until it is loaded again."""
        self._drop(partition)
        self._loading.discard(partition)
        self._unloaded.add(partition)

    def _drop(self, partition: int) -> None:
        for tid in [t for t in self._txns if self.partition_for(t) == partition]:
            del self._txns[tid]

    def _check_owner(self, transactional_id: str) -> None:
        p = self.partition_for(transactional_id)
        if p in self._unloaded:
            raise _Refused(ErrorCode.NOT_COORDINATOR)
        if p in self._loading:
            raise _Refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    def _serving(self, transactional_id: str) -> bool:
        p = self.partition_for(transactional_id)
        return p not in self._unloaded and p not in self._loading

    # ------------------------------------------------------------------------------------------------ views

    def metadata(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def transactional_ids(self) -> list[str]:
        return list(self._txns)

    def state_counts(self) -> dict[TxnState, int]:
        """Transactional ids per state, of the partitions being served (metrics)."""
        counts: dict[TxnState, int] = {}
        for m in self._txns.values():
            if self._serving(m.transactional_id):
                counts[m.state] = counts.get(m.state, 0) + 1
        return counts

    def pending_completions(self) -> TxnResult:
        """Markers of every transaction in PrepareCommit/PrepareAbort (to resend, e.g. after marker errors)."""
        return self._markers_for(m for m in self._txns.values() if self._serving(m.transactional_id))

    # ----------------------------------------------------------------------------------------------- replay

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None) -> bool:
        """Apply one `__transaction_state` record (a tombstone forgets the id); False for a record type this
        coordinator does not know (skipped, as Kafka skips them)."""
        decoded = rec.decode(key, value)
        if decoded is None:
            return False
        if decoded.metadata is None:
            self._txns.pop(decoded.transactional_id, None)
        else:
            self._txns[decoded.transactional_id] = decoded.metadata
        return True

    def _emit(self, m: TxnMetadata) -> Record:
        key, value = rec.encode(m, log_value_version(self.config.transaction_version_level))
        self.replay(key, value)
        # The one value the log does not hold; Kafka too keeps it in memory only.
        self._txns[m.transactional_id] = self._txns[m.transactional_id].with_volatile(m.last_producer_epoch)
        return Record(self.partition_for(m.transactional_id), key, value)

    def _emit_tombstone(self, transactional_id: str) -> Record:
        key = rec.key_bytes(transactional_id)
        self.replay(key, None)
        return Record(self.partition_for(transactional_id), key, None)

    # ------------------------------------------------------------------------------------- InitProducerId

    def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int,
                         producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH, *,
                         new_producer_id: int | None = None, enable_2pc: bool = False) -> TxnResult:
        """InitProducerId. `producer_id`/`producer_epoch` are the request's (KIP-360: a producer recovering
        from an error names its current id and epoch; -1/-1 for a new producer instance)."""
        if transactional_id is None:
            # idempotent producer: a fresh id every time, no state
            if new_producer_id is None:
                return TxnResult(need_producer_id=True)
            return TxnResult(producer_id=new_producer_id, producer_epoch=0)
        if not transactional_id:
            return TxnResult(ErrorCode.INVALID_REQUEST)
        if enable_2pc:
            # KIP-939 two-phase commit participation is not offered (transaction.two.phase.commit.enable=false)
            return TxnResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return TxnResult(ErrorCode.INVALID_REQUEST)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return TxnResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        try:
            self._check_owner(transactional_id)
            return self._init(transactional_id, transaction_timeout_ms, expected, new_producer_id)
        except _Refused as r:
            return TxnResult(r.code)

    def _init(self, tid: str, timeout_ms: int, expected: tuple[int, int] | None,
              new_producer_id: int | None) -> TxnResult:
        now = self._clock()
        m = self._txns.get(tid)
        if m is None:
            if new_producer_id is None:
                return TxnResult(need_producer_id=True)
            m, new_producer_id = md.new_metadata(tid, new_producer_id, timeout_ms, now), None
        if m.state.is_prepare:
            # the client backs off until the markers are written; before the producer checks, as Kafka's
            # pending transition (its state while the markers are written) answers first
            return TxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (
                m.producer_epoch == NO_PRODUCER_EPOCH  # just created: the recovering producer gets the new id
                or expected[0] == m.producer_id  # the epoch is checked by the bump
                # a retry of a bump that moved to a new producer id (the old epochs were used up)
                or (expected[0] == m.prev_producer_id and md.is_epoch_exhausted(expected[1]))):
            return TxnResult(ErrorCode.PRODUCER_FENCED)
        if m.state is TxnState.ONGOING:
            # Fence the producer that owns the transaction and abort it; the client retries and then gets an
            # epoch bumped once more (or a new producer id if the fence used up the epochs).
            fenced = self._fence_and_abort(m, now, new_producer_id)
            if not fenced.need_producer_id:
                fenced.error = ErrorCode.CONCURRENT_TRANSACTIONS
            return fenced
        if m.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            raise md.IllegalTransition(f"{tid} found in {m.state.name}")
        if m.epoch_exhausted and (expected is None or expected[1] == m.producer_epoch):
            if new_producer_id is None:
                return TxnResult(need_producer_id=True)
            target = md.rotate_producer_id(m, new_producer_id, timeout_ms, now, record_last_epoch=expected is not None)
        else:
            try:
                target = md.increment_epoch(m, timeout_ms, None if expected is None else expected[1], now)
            except md.Fenced:
                return TxnResult(ErrorCode.PRODUCER_FENCED)
        return TxnResult(records=[self._emit(target)], producer_id=target.producer_id,
                         producer_epoch=target.producer_epoch)

    # ---------------------------------------------------------------------------------- AddPartitionsToTxn

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]], *, verify_only: bool = False,
                       client_transaction_version: int = TV_0) -> AddPartitionsResult:
        """AddPartitionsToTxn for one transaction (v0-3 carry one, v4+ a batch: call once per transaction).

        verify_only (KIP-890 part 1): a partition leader asks whether the partitions are already in the
        transaction before it appends a transactional batch; nothing is written and a partition not in it
        answers TRANSACTION_ABORTABLE. `client_transaction_version` is TV_2 for v5+ (the leader adds the
        partition for a TV2 producer), TV_0 below."""
        parts = [TopicPartition(t, p) for t, p in partitions]
        if not transactional_id:
            return AddPartitionsResult(dict.fromkeys(parts, ErrorCode.INVALID_REQUEST))
        if client_transaction_version > self.config.transaction_version_level:
            return AddPartitionsResult(dict.fromkeys(parts, ErrorCode.UNSUPPORTED_VERSION))
        if self._partition_exists is not None:
            unknown = {tp for tp in parts if not self._partition_exists(tp.topic, tp.partition)}
            if unknown:
                # Kafka's handler: the unknown ones fail, the rest are not attempted
                return AddPartitionsResult({tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                                            else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in parts})
        try:
            if not verify_only:
                # Kafka's pending transition (its state while markers are written) answers before the producer
                # checks; its verification looks at the producer first
                self._check_owner(transactional_id)
                current = self._txns.get(transactional_id)
                if current is not None and current.state.is_prepare:
                    raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
            m = self._check_producer(transactional_id, producer_id, producer_epoch)
            if m.state.is_prepare:
                raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        except _Refused as r:
            return AddPartitionsResult(dict.fromkeys(parts, r.code))
        if verify_only:
            return AddPartitionsResult({tp: ErrorCode.NONE if tp in m.topic_partitions
                                        else ErrorCode.TRANSACTION_ABORTABLE for tp in parts})
        ok = dict.fromkeys(parts, ErrorCode.NONE)
        if m.state is TxnState.ONGOING and m.topic_partitions.issuperset(parts):
            return AddPartitionsResult(ok)  # already in: nothing to write
        target = md.add_partitions(m, parts, self._clock(), client_transaction_version)
        return AddPartitionsResult(ok, [self._emit(target)])

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    offsets_partition: tuple[str, int], *, client_transaction_version: int = TV_0) -> TxnResult:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition (the caller maps the group id to it)
        joins the transaction, so the markers also settle the transactional offset commits (KIP-447). Kafka
        adds it with TV_0 whatever the producer's version; the EndTxn sets the version again."""
        r = self.add_partitions(transactional_id, producer_id, producer_epoch, [offsets_partition],
                                client_transaction_version=client_transaction_version)
        return TxnResult(next(iter(r.errors.values())), r.records)

    def _check_producer(self, tid: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        self._check_owner(tid)
        m = self._txns.get(tid)
        if m is None or m.producer_id != producer_id:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if m.producer_epoch != producer_epoch:
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        return m

    # ------------------------------------------------------------------------------------------------ EndTxn

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                client_transaction_version: int = TV_0, *, new_producer_id: int | None = None) -> TxnResult:
        """EndTxn: PrepareCommit/PrepareAbort, the markers to write, and (once they are written)
        `complete_transaction`. `client_transaction_version` is TV_2 for EndTxn v5+, TV_0 below. From TV2 on
        the epoch is bumped by every EndTxn and the response carries the producer id and epoch to use next."""
        if not transactional_id:
            return TxnResult(ErrorCode.INVALID_REQUEST)
        if client_transaction_version > self.config.transaction_version_level:
            # Kafka offers EndTxn v5 only once transaction.version 2 is finalized; below it the log cannot
            # even hold the next producer id a TV2 epoch overflow needs.
            return TxnResult(ErrorCode.UNSUPPORTED_VERSION)
        try:
            self._check_owner(transactional_id)
            m = self._txns.get(transactional_id)
            if m is None:
                raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            if supports_epoch_bump(client_transaction_version):
                return self._end_tv2(m, producer_id, producer_epoch, commit, client_transaction_version,
                                     new_producer_id)
            return self._end_tv1(m, producer_id, producer_epoch, commit)
        except _Refused as r:
            return TxnResult(r.code)

    @staticmethod
    def _invalid_state() -> _Refused:
        return _Refused(ErrorCode.INVALID_TXN_STATE)

    def _end_tv1(self, m: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool) -> TxnResult:
        if m.producer_id != producer_id:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if m.producer_epoch != producer_epoch:
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        s = m.state
        if s is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            # TV1 EndTxn records version 0, whatever AddPartitions recorded (Kafka does the same)
            return self._prepare(md.prepare_end(m, target, TV_0, NO_PRODUCER_ID, self._clock(), False))
        if s in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            if commit == (s is TxnState.COMPLETE_COMMIT):
                return TxnResult()  # a retry of an EndTxn that completed
            raise self._invalid_state()
        if s.is_prepare:
            # markers still being written: a retry, or the other outcome, backs off (Kafka's pending transition
            # to CompleteCommit/CompleteAbort answers before the state is looked at)
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        raise self._invalid_state()  # Empty

    def _end_tv2(self, m: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool, tv: int,
                 new_producer_id: int | None) -> TxnResult:
        # Retries are recognized by the epoch: the EndTxn being retried bumped it (or, at overflow, moved the
        # producer to a new id at epoch 0), so "same state, same epoch" means the next EndTxn, not a retry.
        retry_on_overflow = (m.prev_producer_id == producer_id and producer_epoch == SHORT_MAX - 1
                             and m.producer_epoch == 0)
        retry_on_bump = m.producer_epoch == producer_epoch + 1
        s = m.state
        if s.is_prepare:
            # markers still being written: Kafka's pending transition answers before the producer is checked
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        if m.producer_id != producer_id and not retry_on_overflow:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if s.is_complete:
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == m.producer_epoch
        else:
            valid_epoch = producer_epoch == m.producer_epoch
        if not valid_epoch:
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        is_retry = retry_on_bump or retry_on_overflow
        same_outcome = commit == (s in (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT))
        if s is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            return self._prepare_tv2(m, target, tv, new_producer_id, no_partition_added=False)
        if s.is_complete:
            if is_retry:
                if same_outcome:  # answered as the first time: the producer id and epoch now in use
                    return TxnResult(producer_id=m.producer_id, producer_epoch=m.producer_epoch)
                raise self._invalid_state()
            if commit:
                raise self._invalid_state()
            # an abort when the client cannot tell whether a transaction began: bump the epoch all the same
            return self._prepare_tv2(m, TxnState.PREPARE_ABORT, tv, new_producer_id, no_partition_added=True)
        if s is TxnState.EMPTY and not commit:
            return self._prepare_tv2(m, TxnState.PREPARE_ABORT, tv, new_producer_id, no_partition_added=True)
        raise self._invalid_state()

    def _prepare_tv2(self, m: TxnMetadata, target: TxnState, tv: int, new_producer_id: int | None,
                     no_partition_added: bool) -> TxnResult:
        next_pid = NO_PRODUCER_ID
        if m.epoch_exhausted:
            # the bump takes the last epoch: the producer continues with a new id once this completes
            if new_producer_id is None:
                return TxnResult(need_producer_id=True)
            next_pid = new_producer_id
        prepared = md.prepare_end(m, target, tv, next_pid, self._clock(), no_partition_added)
        result = self._prepare(prepared)
        if prepared.next_producer_id != NO_PRODUCER_ID:
            result.producer_id, result.producer_epoch = prepared.next_producer_id, 0
        else:
            result.producer_id, result.producer_epoch = prepared.producer_id, prepared.producer_epoch
        return result

    def _prepare(self, prepared: TxnMetadata) -> TxnResult:
        """Log PrepareCommit/PrepareAbort and return its markers; with no partition to mark (a TV2 abort of
        nothing) the transaction completes at once, as Kafka's marker manager does."""
        result = TxnResult(records=[self._emit(prepared)])
        result.merge(self._markers_for([prepared]))
        if not prepared.topic_partitions:
            result.records.append(self._emit(md.complete(prepared, self._clock())))
        return result

    def _fence_and_abort(self, m: TxnMetadata, now: int, new_producer_id: int | None = None) -> TxnResult:
        # Coordinator-initiated aborts use the cluster's transaction version, as Kafka's do (not the client's).
        # The producer's epoch is bumped once either way: below TV2 by the fence (the abort keeps the epoch), at
        # TV2 by the abort itself (Kafka's fence epoch is never applied there: the TV2 abort bumps the epoch the
        # transaction had, and moves to a new producer id when that takes the last epoch, as an EndTxn does).
        level = self.config.transaction_version_level
        if supports_epoch_bump(level):
            out = self._prepare_tv2(m, TxnState.PREPARE_ABORT, level, new_producer_id, no_partition_added=False)
            out.producer_id, out.producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH  # nobody is told them
            return out
        return self._prepare(md.prepare_end(md.fence_epoch(m), TxnState.PREPARE_ABORT, TV_0, NO_PRODUCER_ID, now,
                                            False))

    def _markers_for(self, txns: Iterable[TxnMetadata]) -> TxnResult:
        out = TxnResult()
        for m in txns:
            if not m.state.is_prepare:
                continue
            epoch = self.coordinator_epoch(self.partition_for(m.transactional_id))
            commit = m.state is TxnState.PREPARE_COMMIT
            out.markers += [TxnMarker(m.transactional_id, tp.topic, tp.partition, m.producer_id, m.producer_epoch,
                                      commit, epoch, m.client_transaction_version)
                            for tp in sorted(m.topic_partitions)]
        return out

    def complete_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             coordinator_epoch: int) -> TxnResult:
        """Every marker of the transaction is written (the arguments are the markers'): log CompleteCommit /
        CompleteAbort. A stale call (the coordinator moved, or the transaction is no longer the one the
        markers were for) returns an error and writes nothing."""
        try:
            self._check_owner(transactional_id)
            if coordinator_epoch != self.coordinator_epoch(self.partition_for(transactional_id)):
                raise _Refused(ErrorCode.NOT_COORDINATOR)
            m = self._txns.get(transactional_id)
            if m is None or m.producer_id != producer_id:
                raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            if m.producer_epoch != producer_epoch:
                raise _Refused(ErrorCode.PRODUCER_FENCED)
            if not m.state.is_prepare:
                raise self._invalid_state()
        except _Refused as r:
            return TxnResult(r.code)
        return TxnResult(records=[self._emit(md.complete(m, self._clock()))])

    # ------------------------------------------------------------------------------- timeouts and expiry

    def timed_out(self, now: int | None = None) -> list[str]:
        """Ongoing transactions open longer than their timeout."""
        now = self._clock() if now is None else now
        return [m.transactional_id for m in self._txns.values()
                if m.state is TxnState.ONGOING and m.txn_start_timestamp + m.txn_timeout_ms < now
                and self._serving(m.transactional_id)]

    def abort_timed_out(self, now: int | None = None) -> TxnResult:
        """Abort every timed-out transaction (transaction.abort.timed.out.transaction.cleanup.interval.ms).
        The epoch is bumped first, so the producer that let it time out is fenced. One whose abort needs a new
        producer id (TV2, the last epoch) is left out: abort it with `abort_timed_out_transaction`."""
        now = self._clock() if now is None else now
        out = TxnResult()
        for tid in self.timed_out(now):
            r = self.abort_timed_out_transaction(tid, now)
            if not r.need_producer_id:
                out.merge(r)
        return out

    def abort_timed_out_transaction(self, transactional_id: str, now: int | None = None, *,
                                    new_producer_id: int | None = None) -> TxnResult:
        """Abort this transaction if it is still open past its timeout (else nothing); `need_producer_id` when
        the abort takes the producer id's last epoch (TV2): call again with `new_producer_id`."""
        now = self._clock() if now is None else now
        if transactional_id not in self.timed_out(now):
            return TxnResult()
        return self._fence_and_abort(self._txns[transactional_id], now, new_producer_id)

    def expire_transactional_ids(self, now: int | None = None, expiration_ms: int | None = None) -> list[Record]:
        """Tombstones for ids idle (Empty, CompleteCommit, CompleteAbort) for transactional.id.expiration.ms."""
        now = self._clock() if now is None else now
        expiration_ms = self.config.transactional_id_expiration_ms if expiration_ms is None else expiration_ms
        out = []
        for m in list(self._txns.values()):
            if (m.state.expiration_allowed and m.txn_last_update_timestamp <= now - expiration_ms
                    and self._serving(m.transactional_id)):
                md.dead(m)  # checks the transition is legal; Dead itself is never logged, the tombstone is
                out.append(self._emit_tombstone(m.transactional_id))
        return out

    # ------------------------------------------------------------------------- Describe/ListTransactions

    def describe_transactions(self, transactional_ids: Iterable[str]) -> list[TransactionDescription]:
        return [self._describe(tid) for tid in transactional_ids]

    def _describe(self, tid: str) -> TransactionDescription:
        if not tid:
            return TransactionDescription(tid, ErrorCode.INVALID_REQUEST)
        try:
            self._check_owner(tid)
        except _Refused as r:
            return TransactionDescription(tid, r.code)
        m = self._txns.get(tid)
        if m is None:
            return TransactionDescription(tid, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        topics: dict[str, list[int]] = {}
        for tp in sorted(m.topic_partitions):
            topics.setdefault(tp.topic, []).append(tp.partition)
        return TransactionDescription(tid, ErrorCode.NONE, m.state.display_name, m.producer_id, m.producer_epoch,
                                      m.txn_timeout_ms, m.txn_start_timestamp, topics)

    def list_transactions(self, state_filters: Collection[str] = (), producer_id_filters: Collection[int] = (),
                          duration_filter_ms: int = -1, now: int | None = None) -> ListTransactionsResult:
        """ListTransactions. Empty filters match everything; unknown state names are reported back. A
        duration filter >= 0 keeps only transactions running longer than it (KIP-994)."""
        if self._loading:
            return ListTransactionsResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        now = self._clock() if now is None else now
        states = {TxnState.from_name(n) for n in state_filters} - {None}
        unknown = [n for n in state_filters if TxnState.from_name(n) is None]
        pids = set(producer_id_filters)
        listed = [TransactionListing(m.transactional_id, m.producer_id, m.state.display_name)
                  for m in self._txns.values()
                  if m.state is not TxnState.DEAD
                  and (not pids or m.producer_id in pids)
                  and (not state_filters or m.state in states)
                  and not (duration_filter_ms >= 0 and now - m.txn_start_timestamp <= duration_filter_ms)
                  and self._serving(m.transactional_id)]
        return ListTransactionsResult(ErrorCode.NONE, listed, unknown)
