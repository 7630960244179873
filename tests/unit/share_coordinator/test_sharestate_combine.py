"""State batch combining: overlap cases, pruning at the start offset, and a per-offset reference model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.share_coordinator import StateBatch, combine_state_batches
from broker.share_coordinator.state import overlay_state_batches
from tests.unit.share_coordinator.sharestate_model import OffsetModel

AV, ACK, ARCH = 0, 2, 4
B = StateBatch


def test_empty_and_single() -> None:
    assert combine_state_batches((), (), -1) == ()
    assert combine_state_batches((), [B(5, 9, AV, 1)], -1) == (B(5, 9, AV, 1),)


def test_newer_batch_splits_older() -> None:
    # new inside old: old is cut around it
    assert combine_state_batches([B(0, 9, AV, 1)], [B(3, 5, ACK, 1)], -1) == (
        B(0, 2, AV, 1), B(3, 5, ACK, 1), B(6, 9, AV, 1))
    # new overlaps the tail of one and the head of another
    assert combine_state_batches([B(0, 4, AV, 1), B(5, 9, ARCH, 2)], [B(3, 6, ACK, 1)], -1) == (
        B(0, 2, AV, 1), B(3, 6, ACK, 1), B(7, 9, ARCH, 2))
    # new covers several entirely
    assert combine_state_batches([B(1, 1, AV, 1), B(3, 3, AV, 2), B(5, 5, ACK, 1)], [B(0, 9, ARCH, 3)], -1) == (
        B(0, 9, ARCH, 3),)


def test_newer_wins_even_with_lower_delivery_count() -> None:
    # Kafka's combiner would keep (AV, 2); Shoal's leader is the authority and its later write wins.
    assert combine_state_batches([B(0, 4, AV, 2)], [B(0, 4, AV, 1)], -1) == (B(0, 4, AV, 1),)


def test_later_batch_in_one_write_wins() -> None:
    assert combine_state_batches((), [B(0, 9, AV, 1), B(2, 3, ACK, 1), B(3, 4, ARCH, 1)], -1) == (
        B(0, 1, AV, 1), B(2, 2, ACK, 1), B(3, 4, ARCH, 1), B(5, 9, AV, 1))


def test_contiguous_equal_batches_merge() -> None:
    assert combine_state_batches([B(0, 4, ACK, 1)], [B(5, 9, ACK, 1), B(10, 12, ACK, 2)], -1) == (
        B(0, 9, ACK, 1), B(10, 12, ACK, 2))


def test_pruned_below_start_offset() -> None:
    batches = [B(0, 4, AV, 1), B(5, 9, ACK, 1), B(12, 14, AV, 2)]
    assert combine_state_batches(batches, (), 7) == (B(7, 9, ACK, 1), B(12, 14, AV, 2))
    assert combine_state_batches(batches, (), 15) == ()
    assert combine_state_batches(batches, (), -1) == tuple(batches)


def test_empty_batches_are_ignored() -> None:
    assert combine_state_batches((), [B(5, 4, AV, 1)], -1) == ()


batch = st.builds(lambda first, length, state, count: B(first, first + length, state, count),
                  st.integers(0, 60), st.integers(0, 12), st.sampled_from([AV, ACK, ARCH]), st.integers(0, 3))
write = st.tuples(st.one_of(st.just(-1), st.integers(0, 50)), st.lists(batch, max_size=6))


@settings(max_examples=300, deadline=None)
@given(st.lists(write, max_size=12))
def test_one_by_one_and_all_at_once_match_the_model(writes: list) -> None:
    model = OffsetModel()
    state: tuple[StateBatch, ...] = ()
    start = -1
    for new_start, batches in writes:
        model.write(new_start, batches)
        start = start if new_start == -1 else new_start
        state = combine_state_batches(state, batches, start)
        assert state == model.batches()
    # Combining everything in one go gives the same answer when the start offset only moves forward.
    if all(s == -1 for s, _ in writes) or [s for s, _ in writes if s != -1] == sorted(s for s, _ in writes
                                                                                       if s != -1):
        all_batches = [b for _, bs in writes for b in bs]
        assert combine_state_batches((), all_batches, start) == state


@settings(max_examples=200, deadline=None)
@given(st.lists(batch, max_size=15), st.one_of(st.just(-1), st.integers(0, 70)))
def test_output_is_sorted_disjoint_and_maximal(batches: list, start: int) -> None:
    out = combine_state_batches((), batches, start)
    for a, b in zip(out, out[1:], strict=False):
        assert a.last_offset < b.first_offset
        assert not (a.last_offset + 1 == b.first_offset and a[2:] == b[2:])
    if start >= 0:
        assert all(b.first_offset >= start for b in out)


@settings(max_examples=200, deadline=None)
@given(st.lists(batch, max_size=15), st.lists(batch, max_size=6), st.one_of(st.just(-1), st.integers(0, 70)))
def test_incremental_overlay_equals_full_combine(current: list, new: list, start: int) -> None:
    stored = combine_state_batches((), current, -1)  # a stored state is always normalized
    assert overlay_state_batches(stored, new, start) == combine_state_batches(stored, new, start)
