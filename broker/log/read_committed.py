"""read_committed over fetched batches, sans-IO: which offsets a read_committed reader gets and which it skips.

A read_committed fetch stops at the LSO and carries the aborted transactions overlapping it, as (producer id,
first offset) pairs (the `.txnindex` entries). Kafka's consumer (CompletedFetch) and share-partition leader
(SharePartition.fetchAbortedTransactionRecordBatches, for `share.isolation.level=read_committed`) walk the batches
in offset order with them:

* an aborted transaction joins the "aborted producers" once the walk reaches a batch (with a producer id) ending
  at or after its first offset;
* a transactional data batch of an aborted producer is skipped: its records are archived, never delivered;
* the producer's ABORT marker takes it out of the set again (its next transaction may commit);
* control batches are never delivered.

Every other batch is delivered. `classify_txn_batches` is that walk, given each control batch's marker.
`classify_batches` needs batch headers only: it takes any control batch of an aborted producer for its ABORT
marker. On a log this broker writes the two agree: a producer's transactions do not interleave, so once its aborted
transaction has started, its next control batch is the marker ending that transaction, an ABORT.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from protocol.control_records import EndTxnMarker
from protocol.records import BatchHeader

__all__ = [
    "AbortedTransaction",
    "Fate",
    "ReadCommittedPlan",
    "classify_batches",
    "classify_txn_batches",
    "plan_read_committed",
]


class AbortedTransaction(Protocol):
    """A fetch response's aborted transaction (`broker.log.txn_index.AbortedTxn` is one)."""

    @property
    def producer_id(self) -> int: ...

    @property
    def first_offset(self) -> int: ...


class Fate(Enum):
    DELIVER = "deliver"
    ABORTED = "aborted"  # data of an aborted transaction: archived
    CONTROL = "control"  # a transaction marker: archived


_ANY_CONTROL = object()  # stands for "this control batch ends its producer's aborted transaction"


def classify_txn_batches(batches: Iterable[tuple[BatchHeader, EndTxnMarker | None]],
                         aborted: Iterable[AbortedTransaction]) -> Iterator[tuple[BatchHeader, Fate]]:
    """The fate of each batch, in order (batches as `protocol.control_records.iter_txn_batches` gives them)."""
    return _classify(batches, aborted)


def classify_batches(headers: Iterable[BatchHeader],
                     aborted: Iterable[AbortedTransaction]) -> Iterator[tuple[BatchHeader, Fate]]:
    """The fate of each batch, in order, from headers only (see the module's note)."""
    return _classify(((h, _ANY_CONTROL) for h in headers), aborted)


def _classify(batches: Iterable[tuple[BatchHeader, object]],
              aborted: Iterable[AbortedTransaction]) -> Iterator[tuple[BatchHeader, Fate]]:
    pending = sorted(aborted, key=lambda txn: txn.first_offset)
    next_pending = 0
    aborted_producers: set[int] = set()
    for header, marker in batches:
        pid = header.producer_id
        if pid >= 0:
            while next_pending < len(pending) and pending[next_pending].first_offset <= header.last_offset:
                aborted_producers.add(pending[next_pending].producer_id)
                next_pending += 1
            if header.is_control:
                if marker is _ANY_CONTROL or (isinstance(marker, EndTxnMarker) and not marker.commit):
                    aborted_producers.discard(pid)
            elif header.is_transactional and pid in aborted_producers:
                yield header, Fate.ABORTED
                continue
        yield header, (Fate.CONTROL if header.is_control else Fate.DELIVER)


@dataclass(slots=True)
class ReadCommittedPlan:
    """Offset ranges (first, last inclusive), ascending, contiguous ranges merged. Offsets of the fetched range
    not covered by any batch (compacted away) are in neither list."""

    deliver: list[tuple[int, int]] = field(default_factory=list)
    archive: list[tuple[int, int]] = field(default_factory=list)
    aborted_records: int = 0
    control_records: int = 0


def plan_read_committed(classified: Iterable[tuple[BatchHeader, Fate]], start_offset: int = 0,
                        end_offset: int | None = None) -> ReadCommittedPlan:
    """Ranges to deliver and to archive for the offsets [start_offset, end_offset) of the classified batches
    (a fetch starts inside a batch when its offset does; `end_offset` is the LSO or the fetch's bound)."""
    plan = ReadCommittedPlan()
    for header, fate in classified:
        if end_offset is not None and header.base_offset >= end_offset:
            break
        first = max(header.base_offset, start_offset)
        last = header.last_offset if end_offset is None else min(header.last_offset, end_offset - 1)
        if last < first:
            continue
        out = plan.deliver if fate is Fate.DELIVER else plan.archive
        if fate is Fate.ABORTED:
            plan.aborted_records += last - first + 1
        elif fate is Fate.CONTROL:
            plan.control_records += last - first + 1
        if out and out[-1][1] + 1 == first:  # only the previous batch can end right before this one
            out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return plan
