"""A transactional id's metadata (Kafka's TransactionMetadata) and its transitions (Kafka's prepare* methods).

`TxnMetadata` is immutable: every transition returns the metadata the next record will hold (Kafka's
TxnTransitMetadata) after checking that the state change is legal. Nothing here decides whether a request may
make the transition (fencing, retries): that is the coordinator's job; here only Kafka's invariants on the
values live (epoch >= 0, producer id >= 0, legal state pairs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from .state import TV_0, TxnState, is_legal, supports_epoch_bump

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = (1 << 15) - 1


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class IllegalTransition(RuntimeError):
    """A transition Kafka's state machine forbids: a coordinator bug, never a client error."""


def is_epoch_exhausted(epoch: int) -> bool:
    # Short.MAX_VALUE stays free so the coordinator can always fence the current producer once more.
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    topic_partitions: frozenset[TopicPartition] = frozenset()
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # Producer id before the last transition (Kafka's prevProducerId, logged from value version 1).
    prev_producer_id: int = NO_PRODUCER_ID
    # TV2 epoch overflow: the id the producer moves to once the transaction completes (value version 1).
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = TV_0
    # The epoch before the last bump, for KIP-360 retries of InitProducerId. Kafka does not log it either, so
    # it is lost on a reload (a retry spanning a coordinator move is fenced); it is left out of equality so
    # that state rebuilt from the log compares equal to state built while serving.
    last_producer_epoch: int = field(default=NO_PRODUCER_EPOCH, compare=False)

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def with_volatile(self, last_producer_epoch: int) -> TxnMetadata:
        return dataclasses.replace(self, last_producer_epoch=last_producer_epoch)


def new_metadata(transactional_id: str, producer_id: int, txn_timeout_ms: int, now: int) -> TxnMetadata:
    """A transactional id seen for the first time: Empty with no epoch yet (never logged as such)."""
    return TxnMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, txn_timeout_ms, TxnState.EMPTY,
                       txn_last_update_timestamp=now)


def _to(m: TxnMetadata, state: TxnState, **changes: object) -> TxnMetadata:
    if not is_legal(m.state, state):
        raise IllegalTransition(f"{m.transactional_id}: {m.state.name} -> {state.name} is not a legal transition")
    out = dataclasses.replace(m, state=state, prev_producer_id=m.producer_id, **changes)  # type: ignore[arg-type]
    if out.producer_id < 0:
        raise IllegalTransition(f"{m.transactional_id}: illegal producer id {out.producer_id}")
    if out.state is not TxnState.DEAD and out.producer_epoch < 0:
        raise IllegalTransition(f"{m.transactional_id}: illegal producer epoch {out.producer_epoch}")
    return out


class Fenced(Exception):
    """InitProducerId's expected epoch is neither the current nor the previous one (PRODUCER_FENCED)."""


def increment_epoch(m: TxnMetadata, txn_timeout_ms: int, expected_epoch: int | None, now: int) -> TxnMetadata:
    """InitProducerId on an idle id: bump the epoch (or, for a retry of a bump that succeeded, keep it)."""
    if expected_epoch is None:
        # a new producer instance: fences whatever used the id before
        epoch, last = m.producer_epoch + 1, NO_PRODUCER_EPOCH
    elif m.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == m.producer_epoch:
        # KIP-360: the same producer recovering from an error, nobody initialized in between
        epoch, last = m.producer_epoch + 1, m.producer_epoch
    elif expected_epoch == m.last_producer_epoch:
        # retry of a bump whose response was lost: answer the current epoch again
        epoch, last = m.producer_epoch, m.last_producer_epoch
    else:
        raise Fenced
    if epoch != m.producer_epoch and is_epoch_exhausted(m.producer_epoch):
        raise IllegalTransition(f"{m.transactional_id}: no epochs left for producer id {m.producer_id}")
    return _to(m, TxnState.EMPTY, producer_epoch=epoch, last_producer_epoch=last, txn_timeout_ms=txn_timeout_ms,
               topic_partitions=frozenset(), txn_start_timestamp=-1, txn_last_update_timestamp=now)


def rotate_producer_id(m: TxnMetadata, new_producer_id: int, txn_timeout_ms: int, now: int,
                       record_last_epoch: bool) -> TxnMetadata:
    """InitProducerId with the epochs of the producer id used up: continue with a new id at epoch 0."""
    if m.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        raise IllegalTransition(f"{m.transactional_id}: cannot rotate the producer id of a pending transaction")
    return _to(m, TxnState.EMPTY, producer_id=new_producer_id, producer_epoch=0,
               last_producer_epoch=m.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
               txn_timeout_ms=txn_timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
               txn_last_update_timestamp=now)


def add_partitions(m: TxnMetadata, partitions: Iterable[TopicPartition], now: int,
                   client_transaction_version: int) -> TxnMetadata:
    """AddPartitionsToTxn / AddOffsetsToTxn: the transaction (re)starts or grows."""
    starting = m.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    return _to(m, TxnState.ONGOING, topic_partitions=m.topic_partitions | frozenset(partitions),
               txn_start_timestamp=now if starting else m.txn_start_timestamp, txn_last_update_timestamp=now,
               client_transaction_version=client_transaction_version)


def prepare_end(m: TxnMetadata, state: TxnState, client_transaction_version: int, next_producer_id: int,
                now: int, no_partition_added: bool) -> TxnMetadata:
    """EndTxn (or a coordinator abort): PrepareCommit / PrepareAbort. Under TV2 the epoch is bumped here, so
    the markers carry an epoch above every batch of the transaction and a late write of the old epoch is
    fenced; at Short.MAX_VALUE an abort goes through unbumped (Kafka lets a broken state recover that way)."""
    epoch, last = m.producer_epoch, m.last_producer_epoch
    if supports_epoch_bump(client_transaction_version):
        if not (m.producer_epoch == SHORT_MAX and state is TxnState.PREPARE_ABORT):
            epoch = m.producer_epoch + 1
        last = m.producer_epoch
    # a TV2 abort with nothing added has no start time; the abort time stands in for it
    start = now if no_partition_added else m.txn_start_timestamp
    return _to(m, state, producer_epoch=epoch, last_producer_epoch=last, txn_start_timestamp=start,
               next_producer_id=next_producer_id, txn_last_update_timestamp=now,
               client_transaction_version=client_transaction_version)


def complete(m: TxnMetadata, now: int) -> TxnMetadata:
    """All markers written: CompleteCommit / CompleteAbort. After a TV2 epoch overflow the producer continues
    with the next producer id at epoch 0 (last_producer_epoch keeps what the client last saw)."""
    target = TxnState.COMPLETE_COMMIT if m.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    if supports_epoch_bump(m.client_transaction_version) and m.next_producer_id != NO_PRODUCER_ID:
        pid, epoch = m.next_producer_id, 0
    else:
        pid, epoch = m.producer_id, m.producer_epoch
    return _to(m, target, producer_id=pid, producer_epoch=epoch, next_producer_id=NO_PRODUCER_ID,
               topic_partitions=frozenset(), txn_last_update_timestamp=now)


def fence_epoch(m: TxnMetadata) -> TxnMetadata:
    """The first half of fencing an ongoing transaction (a new producer instance, or a timeout): the epoch
    bump that PrepareEpochFence stands for. Kafka never logs PrepareEpochFence: the abort that follows is
    prepared from this metadata (state left Ongoing) and logged as PrepareAbort."""
    if not is_legal(m.state, TxnState.PREPARE_EPOCH_FENCE):
        raise IllegalTransition(f"{m.transactional_id}: cannot fence in {m.state.name}")
    bumped = m.producer_epoch if m.producer_epoch == SHORT_MAX else m.producer_epoch + 1
    return dataclasses.replace(m, producer_epoch=bumped, last_producer_epoch=NO_PRODUCER_EPOCH)


def dead(m: TxnMetadata) -> TxnMetadata:
    """Expiry of an idle transactional id (logged as a tombstone, then forgotten)."""
    return _to(m, TxnState.DEAD, topic_partitions=frozenset())
