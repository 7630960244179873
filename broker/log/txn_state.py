"""Transactions of one partition, sans-IO: the transactional half of Kafka's ProducerStateManager and
ProducerAppendInfo, to sit beside `broker.log.producer_state.ProducerStateTable` (which keeps sequences).

Per producer id the table keeps the epoch, the epoch of the last coordinator that wrote a marker for it, and the
first offset of its ongoing transaction. A producer's first transactional batch starts a transaction at the
batch's base offset; the COMMIT or ABORT marker ends it. The first unstable offset is the smallest first offset of
a transaction not yet decided, or decided by a marker not yet below the high watermark; the last stable offset
(LSO), the bound of read_committed fetches, is that offset, or the high watermark when there is none or it is lower.

The produce path asks `check_append` / `check_marker` before appending (Kafka's rules, with its error codes) and
calls `on_append` / `on_marker` after; `on_marker` returns the entry to write to the segment's `.txnindex` when the
transaction aborted. On start the state is rebuilt by `replay` over the log's batches (the scan Kafka's log loader
and segment recovery make), optionally from a `snapshot` taken earlier.

Only producers that have written transactional batches or markers are kept here: a plain idempotent producer
can neither be in a transaction nor be fenced by one, and its epoch is the ProducerStateTable's business.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass, replace

from broker.log.txn_index import AbortedTxn
from protocol.control_records import EndTxnMarker
from protocol.errors import ErrorCode
from protocol.records import BatchHeader

__all__ = ["NO_TXN", "TxnProducerEntry", "TxnStateTable"]

NO_TXN = -1  # txn_first_offset of a producer without an ongoing transaction (Kafka's snapshot encoding)
NO_EPOCH = -1


@dataclass(slots=True)
class TxnProducerEntry:
    """One producer's transactional state; also the unit of a snapshot."""

    producer_id: int
    epoch: int = NO_EPOCH
    coordinator_epoch: int = -1
    txn_first_offset: int = NO_TXN
    last_timestamp: int = -1

    @property
    def in_transaction(self) -> bool:
        return self.txn_first_offset != NO_TXN


class TxnStateTable:
    """Producer id -> transactional state, for one partition."""

    def __init__(self) -> None:
        self._producers: dict[int, TxnProducerEntry] = {}
        # ongoing transactions: first offsets in order, and first offset -> producer id
        self._ongoing_starts: list[int] = []
        self._ongoing: dict[int, int] = {}
        # decided transactions whose marker is not yet below the high watermark: first offset -> marker offset
        self._unreplicated: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> TxnProducerEntry | None:
        return self._producers.get(producer_id)

    # --- checks before an append (Kafka's ProducerAppendInfo) -----------------------------------------------
    def check_append(self, header: BatchHeader) -> ErrorCode:
        """May a client's data batch be appended? INVALID_PRODUCER_EPOCH for an epoch older than the producer's
        (a fenced zombie), INVALID_TXN_STATE for a non-transactional batch while the producer's transaction is
        open."""
        if header.producer_id < 0 or header.is_control:
            return ErrorCode.NONE
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return ErrorCode.NONE
        if header.producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if entry.in_transaction and not header.is_transactional:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, *,
                     transaction_version: int = 0) -> ErrorCode:
        """May the coordinator's marker be appended? INVALID_PRODUCER_EPOCH for an epoch older than the producer's
        (with transaction version 2, where the coordinator bumps the epoch for every marker, also an equal epoch,
        unless no transaction is open: that is a retried marker, written again); TRANSACTION_COORDINATOR_FENCED for
        a coordinator epoch older than the last marker's."""
        entry = self._producers.get(producer_id)
        epoch = entry.epoch if entry is not None else NO_EPOCH
        if transaction_version >= 2:
            retry = producer_epoch == epoch and (entry is None or not entry.in_transaction)
            fenced = producer_epoch <= epoch and not retry
        else:
            fenced = producer_epoch < epoch
        if fenced:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if entry is not None and entry.coordinator_epoch > coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    # --- updates after an append ----------------------------------------------------------------------------
    def on_append(self, header: BatchHeader) -> None:
        """Record an appended data batch (control batches go to `on_marker`)."""
        pid = header.producer_id
        if pid < 0 or header.is_control:
            return
        entry = self._producers.get(pid)
        if entry is None:
            if not header.is_transactional:
                return
            entry = self._producers[pid] = TxnProducerEntry(pid)
        entry.epoch = header.producer_epoch
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and not entry.in_transaction:
            entry.txn_first_offset = header.base_offset
            self._add_ongoing(header.base_offset, pid)

    def on_marker(self, producer_id: int, producer_epoch: int, commit: bool, offset: int, coordinator_epoch: int,
                  timestamp: int = -1) -> AbortedTxn | None:
        """Record a marker appended at `offset`. Returns the `.txnindex` entry of the transaction it aborted, if it
        aborted one that wrote data here (a marker of a transaction without data changes no offset)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = TxnProducerEntry(producer_id)
        aborted = None
        if entry.in_transaction:
            first = entry.txn_first_offset
            if not commit:
                aborted = AbortedTxn(producer_id, first, offset, self._lso_after(producer_id, offset))
            self._remove_ongoing(first)
            self._unreplicated[first] = offset
        entry.epoch = producer_epoch
        entry.coordinator_epoch = coordinator_epoch
        entry.txn_first_offset = NO_TXN
        entry.last_timestamp = timestamp
        return aborted

    def _lso_after(self, producer_id: int, offset: int) -> int:
        # Kafka's ProducerStateManager.lastStableOffset(completedTxn): the start of the oldest transaction of
        # another producer still open, else just past the marker (unreplicated markers do not count here)
        for first in self._ongoing_starts:
            if self._ongoing[first] != producer_id:
                return first
        return offset + 1

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget decided transactions whose marker is now below the high watermark (the LSO may pass them)."""
        self._drop_unreplicated_below(high_watermark)

    def on_log_start_offset(self, log_start_offset: int) -> None:
        self._drop_unreplicated_below(log_start_offset)

    def _drop_unreplicated_below(self, offset: int) -> None:
        for first in [f for f, last in self._unreplicated.items() if last < offset]:
            del self._unreplicated[first]

    # --- offsets ------------------------------------------------------------------------------------------------
    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest open transaction (Kafka's firstUndecidedOffset)."""
        return self._ongoing_starts[0] if self._ongoing_starts else None

    def first_unstable_offset(self, high_watermark: int | None = None, log_start_offset: int = 0) -> int | None:
        """First offset of the oldest transaction not decided, or decided by a marker at or above the high
        watermark (all markers not yet acknowledged by `on_high_watermark` when it is None). Never below the log
        start offset: the start of a transaction may have been deleted (Kafka's clamp)."""
        candidates = [f for f, last in self._unreplicated.items() if high_watermark is None or last >= high_watermark]
        if self._ongoing_starts:
            candidates.append(self._ongoing_starts[0])
        if not candidates:
            return None
        return max(min(candidates), log_start_offset)

    def last_stable_offset(self, high_watermark: int, log_start_offset: int = 0) -> int:
        """The LSO: read_committed fetches see offsets below it only."""
        first = self.first_unstable_offset(high_watermark, log_start_offset)
        return first if first is not None and first < high_watermark else high_watermark

    def ongoing_txn_first_offset(self, producer_id: int) -> int | None:
        entry = self._producers.get(producer_id)
        return entry.txn_first_offset if entry is not None and entry.in_transaction else None

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether this producer, at this epoch, has a transaction open here (Kafka's hasOngoingTransaction: its
        next transactional write here needs no verification with the coordinator)."""
        entry = self._producers.get(producer_id)
        return entry is not None and entry.in_transaction and entry.epoch == producer_epoch

    def ongoing_txns(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction, oldest first."""
        return {self._ongoing[first]: first for first in self._ongoing_starts}

    def _add_ongoing(self, first: int, producer_id: int) -> None:
        insort(self._ongoing_starts, first)
        self._ongoing[first] = producer_id

    def _remove_ongoing(self, first: int) -> None:
        i = bisect_left(self._ongoing_starts, first)
        del self._ongoing_starts[i]
        del self._ongoing[first]

    # --- expiry, snapshots, recovery ----------------------------------------------------------------------------
    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for `producer.id.expiration.ms`, except those in a transaction (as Kafka's
        isProducerExpired). Returns how many."""
        expired = [pid for pid, e in self._producers.items()
                   if not e.in_transaction and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def snapshot(self) -> list[TxnProducerEntry]:
        """Copies of every producer's state: enough, with the log after the snapshot's offset, to rebuild."""
        return [replace(e) for e in self._producers.values()]

    @classmethod
    def restore(cls, entries: Iterable[TxnProducerEntry]) -> TxnStateTable:
        """A table holding `entries` (a snapshot taken at an offset at or below the high watermark: decided
        transactions are taken as replicated, as Kafka loads a snapshot)."""
        table = cls()
        for e in entries:
            table._producers[e.producer_id] = replace(e)
            if e.in_transaction:
                table._add_ongoing(e.txn_first_offset, e.producer_id)
        return table

    def replay(self, batches: Iterable[tuple[BatchHeader, EndTxnMarker | None]]) -> list[AbortedTxn]:
        """Apply batches read back from the log, in offset order, without checks (they were checked when
        appended; Kafka's replication origin). Returns the `.txnindex` entries of the aborts met, for the segments
        holding their markers. Control batches without a transaction marker (emptied by the cleaner) are skipped.
        `protocol.control_records.iter_txn_batches` reads such pairs from a segment's bytes."""
        aborted = []
        for header, marker in batches:
            if header.producer_id < 0:
                continue
            if not header.is_control:
                self.on_append(header)
            elif marker is not None:
                txn = self.on_marker(header.producer_id, header.producer_epoch, marker.commit, header.base_offset,
                                     marker.coordinator_epoch, header.max_timestamp)
                if txn is not None:
                    aborted.append(txn)
        return aborted
