"""Durable state of one share-partition and the combining of state batches.

A share-partition's durable state is what a ShareSnapshot record holds: state epoch, leader epoch, start offset
(SPSO), delivery-complete count, timestamps and non-overlapping state batches (offset range, delivery state,
delivery count) above the start offset. A ShareUpdate record carries only the batches a write changed; replay
overlays them on the state.

Combining (Kafka's PersisterStateBatchCombiner has the same contract: in, any batches; out, sorted,
non-overlapping, pruned at the start offset, contiguous equal batches merged) differs from Kafka in one rule: when
batches overlap, the one applied later wins. Kafka instead lets the higher (delivery count, delivery state) win.
Shoal's share-partition leader is in-process and its writes reach the coordinator in order, so "later is newer"
holds, and the later write is the leader's truth even when it lowers a delivery count (a release on session close
does that). For a leader whose counts only grow both rules give the same state.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import NamedTuple

UNINITIALIZED_START_OFFSET = -1
UNKNOWN_DELIVERY_COMPLETE_COUNT = -1


class StateBatch(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_state: int  # 0 Available, 2 Acknowledged, 4 Archived (Acquired is never persisted)
    delivery_count: int


def _same(a: StateBatch, b: StateBatch) -> bool:
    return a.delivery_state == b.delivery_state and a.delivery_count == b.delivery_count


def _overlay(out: list[StateBatch], b: StateBatch) -> None:
    """Lay `b` over `out` (sorted, disjoint, maximal), cutting what it covers and merging `b` with equal
    contiguous neighbours, so `out` keeps those properties. O(log n) plus one slice move."""
    lo = bisect_left(out, b.first_offset, key=lambda s: s.last_offset)  # first batch ending at/after b
    hi = lo
    while hi < len(out) and out[hi].first_offset <= b.last_offset:
        hi += 1
    left = out[lo] if lo < hi and out[lo].first_offset < b.first_offset else None
    right = out[hi - 1] if lo < hi and out[hi - 1].last_offset > b.last_offset else None
    if lo > 0 and out[lo - 1].last_offset + 1 == b.first_offset and _same(out[lo - 1], b):
        lo -= 1
        b = b._replace(first_offset=out[lo].first_offset)
    elif left is not None:
        if _same(left, b):
            b = b._replace(first_offset=left.first_offset)
            left = None
        else:
            left = left._replace(last_offset=b.first_offset - 1)
    if right is not None:
        if _same(right, b):
            b = b._replace(last_offset=right.last_offset)
            right = None
        else:
            right = right._replace(first_offset=b.last_offset + 1)
    elif hi < len(out) and out[hi].first_offset == b.last_offset + 1 and _same(out[hi], b):
        b = b._replace(last_offset=out[hi].last_offset)
        hi += 1
    out[lo:hi] = [x for x in (left, b, right) if x is not None]


def _prune(out: list[StateBatch], start_offset: int) -> None:
    if start_offset < 0:  # -1: start offset not known / not changing, as in Kafka
        return
    i = bisect_left(out, start_offset, key=lambda s: s.last_offset)
    del out[:i]
    if out and out[0].first_offset < start_offset:
        out[0] = out[0]._replace(first_offset=start_offset)


def _laid_over(out: list[StateBatch], batches: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    if not out and not batches:
        return ()  # most writes: every record up to the new start offset acknowledged, nothing else to keep
    for b in batches:
        if b.last_offset >= b.first_offset:  # an empty batch changes nothing (the write path rejects them)
            _overlay(out, StateBatch(*b))
    _prune(out, start_offset)
    return tuple(out)


def combine_state_batches(current: Iterable[StateBatch], new: Iterable[StateBatch],
                          start_offset: int) -> tuple[StateBatch, ...]:
    """`current` then `new`, each batch laid over the ones before it, pruned below `start_offset`; the result
    is sorted, disjoint and maximal (contiguous equal batches merged). A start offset of -1 prunes nothing."""
    return _laid_over([], (*current, *new) if current else new, start_offset)


def overlay_state_batches(current: tuple[StateBatch, ...], new: Iterable[StateBatch],
                          start_offset: int) -> tuple[StateBatch, ...]:
    """As combine_state_batches, for `current` already sorted, disjoint and maximal (every stored state is):
    costs O(len(new) * log n) plus slice moves instead of a pass over all of `current`."""
    return _laid_over(list(current), new, start_offset)


class SharePartitionState(NamedTuple):  # built for every write: a tuple builds faster than a frozen dataclass
    """The durable state of one share-partition; also exactly the content of a ShareSnapshot value."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT
    create_timestamp: int = -1
    write_timestamp: int = -1
    state_batches: tuple[StateBatch, ...] = ()


class ShareUpdate(NamedTuple):
    """The content of a ShareUpdate value: a delta on the snapshot with the same snapshot epoch.

    -1 in start_offset or leader_epoch means "unchanged"; state_batches are overlaid on the current ones.
    """

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT
    state_batches: tuple[StateBatch, ...] = ()


def apply_update(current: SharePartitionState | None, u: ShareUpdate) -> SharePartitionState:
    """The state after replaying ShareUpdate `u` (Kafka's ShareCoordinatorShard.merge)."""
    if current is None:
        # An update without a snapshot before it: Kafka takes it as the state; there is no state epoch.
        return SharePartitionState(
            snapshot_epoch=u.snapshot_epoch, state_epoch=-1, leader_epoch=u.leader_epoch,
            start_offset=u.start_offset, delivery_complete_count=u.delivery_complete_count,
            state_batches=combine_state_batches((), u.state_batches, u.start_offset))
    start = current.start_offset if u.start_offset == -1 else u.start_offset
    # positional (replayed for every write): the fields in SharePartitionState's order
    return SharePartitionState(
        current.snapshot_epoch,  # updates never change it
        current.state_epoch,  # updates carry no state epoch
        current.leader_epoch if u.leader_epoch == -1 else u.leader_epoch,
        start,
        # The leader sends the whole count with each write (v1+); -1 (a v0 writer) means "not known".
        u.delivery_complete_count,
        current.create_timestamp,
        current.write_timestamp,
        overlay_state_batches(current.state_batches, u.state_batches, start),
    )
