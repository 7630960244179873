"""Unit tests for the share-partition in-flight state machine (broker/share_partition/inflight.py)."""

from __future__ import annotations

import pytest

from broker.share_partition.inflight import (
    ACK_ACCEPT,
    ACK_GAP,
    ACK_REJECT,
    ACK_RELEASE,
    ACK_RENEW,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    AcquiredRange,
    ShareInFlight,
    StateBatch,
)
from protocol.errors import ErrorCode

LOCK = 1000


def make(start: int = 0, **kw) -> ShareInFlight:
    kw.setdefault("lock_duration_ms", LOCK)
    kw.setdefault("delivery_count_limit", 3)
    return ShareInFlight(start, **kw)


def batches(first: int, count: int, size: int) -> list[tuple[int, int]]:
    return [(first + i * size, first + (i + 1) * size - 1) for i in range(count)]


def states(sp: ShareInFlight) -> dict[int, tuple[int, str | None, int]]:
    return {o: (s, owner, c) for o, s, owner, c, _ in sp.iter_records()}


# ---------------------------------------------------------------------------------------- acquire
def test_acquire_new_records_whole_batches_soft_limit():
    sp = make()
    # max_records=7 ends inside the second batch (5..9): Kafka takes the whole batch.
    got = sp.acquire("a", batches(0, 4, 5), 7, 0)
    assert got == [AcquiredRange(0, 9, 1)]
    assert (sp.start_offset, sp.end_offset, sp.acquired_count) == (0, 10, 10)
    assert sp.next_deadline() == LOCK


def test_acquire_clips_first_batch_to_speo_and_skips_older_batches():
    sp = make()
    sp.acquire("a", [(0, 4)], 3, 0)
    got = sp.acquire("b", [(0, 4), (3, 8), (9, 12)], 100, 0)
    assert got == [AcquiredRange(5, 12, 1)]


def test_acquire_nothing_when_no_batches_or_zero_max():
    sp = make()
    assert sp.acquire("a", [], 10, 0) == []
    assert sp.acquire("a", [(0, 4)], 0, 0) == []
    assert sp.end_offset == 0


def test_acquire_jumps_over_missing_offsets_when_window_empty():
    sp = make(10)
    assert sp.acquire("a", [(15, 19)], 10, 0) == [AcquiredRange(15, 19, 1)]
    assert sp.start_offset == 15


def test_acquire_includes_gaps_between_batches_when_window_not_empty():
    sp = make()
    sp.acquire("a", [(0, 1)], 2, 0)
    # Offsets 2..3 were compacted away: they are acquired with the rest and acked as gaps.
    assert sp.acquire("b", [(4, 6)], 10, 0) == [AcquiredRange(2, 6, 1)]


def test_released_records_reacquired_first_lowest_offset_first_exact_limit():
    sp = make()
    sp.acquire("a", batches(0, 2, 5), 10, 0)
    assert sp.acknowledge("a", [(2, 3, [ACK_RELEASE]), (6, 8, [ACK_RELEASE])], 1) == [0, 0]
    got = sp.acquire("b", batches(10, 2, 5), 4, 2)
    # Re-acquired records come first and max_records is exact for them: 2, 3, 6, 7.
    assert got == [AcquiredRange(2, 3, 2), AcquiredRange(6, 7, 2)]
    assert states(sp)[8] == (AVAILABLE, None, 1)
    got = sp.acquire("b", batches(10, 2, 5), 3, 3)
    assert got == [AcquiredRange(8, 8, 2), AcquiredRange(10, 14, 1)]


def test_max_in_flight_gates_new_records_but_not_redelivery():
    sp = make(max_in_flight_records=10)
    sp.acquire("a", batches(0, 4, 4), 6, 0)  # 0..7 (soft limit to batch end)
    # Room for 2 more: rounded up to the end of batch 8..11.
    assert sp.acquire("a", batches(8, 2, 4), 100, 0) == [AcquiredRange(8, 11, 1)]
    assert sp.acquire("a", batches(12, 1, 4), 100, 0) == []
    assert not sp.can_acquire()
    sp.acknowledge("a", [(5, 5, [ACK_RELEASE])], 0)
    assert sp.can_acquire()
    assert sp.acquire("b", batches(12, 1, 4), 100, 0) == [AcquiredRange(5, 5, 2)]
    # Acknowledging the head frees room: SPSO moves.
    sp.acknowledge("a", [(0, 3, [ACK_ACCEPT])], 0)
    assert sp.start_offset == 4
    assert sp.acquire("b", batches(12, 1, 4), 100, 0) == [AcquiredRange(12, 15, 1)]


# ------------------------------------------------------------------------------------ acknowledge
def test_accept_whole_batch_advances_spso_and_forgets_state():
    sp = make()
    sp.acquire("a", batches(0, 2, 5), 10, 0)
    assert sp.acknowledge("a", [(0, 4, [ACK_ACCEPT])], 1) == [0]
    assert sp.start_offset == 5 and sp.piece_count == 1
    assert sp.acknowledge("a", [(5, 9, [ACK_ACCEPT])], 1) == [0]
    assert (sp.start_offset, sp.end_offset, sp.piece_count, sp.in_flight_count) == (10, 10, 0, 0)


def test_per_offset_types_split_only_where_they_differ():
    sp = make()
    sp.acquire("a", [(0, 9)], 10, 0)
    types = [ACK_ACCEPT] * 3 + [ACK_REJECT, ACK_GAP] + [ACK_RELEASE] * 3 + [ACK_ACCEPT] * 2
    assert sp.acknowledge("a", [(0, 9, types)], 1) == [0]
    st = states(sp)
    # 0..4 accepted/rejected/gap -> SPSO moved to the first released offset.
    assert sp.start_offset == 5
    assert st[5] == (AVAILABLE, None, 1) and st[8] == (ACKNOWLEDGED, None, 1)
    assert sp.piece_count == 2  # [5..7] available, [8..9] acknowledged


def test_gap_and_reject_archive():
    sp = make()
    sp.acquire("a", [(0, 9)], 10, 0)
    sp.acknowledge("a", [(5, 6, [ACK_GAP]), (7, 7, [ACK_REJECT])], 1)
    st = states(sp)
    assert st[5][0] == st[6][0] == st[7][0] == ARCHIVED
    assert sp.archived_count == 3 and sp.archived_total == 3


def test_ack_by_other_member_or_unacquired_is_invalid_record_state_and_atomic():
    sp = make()
    sp.acquire("a", [(0, 4)], 5, 0)
    sp.acquire("b", [(5, 9)], 5, 0)
    before = list(sp.iter_records())
    errs = sp.acknowledge("a", [(0, 4, [ACK_ACCEPT]), (5, 6, [ACK_ACCEPT])], 1)
    assert errs == [0, ErrorCode.INVALID_RECORD_STATE]
    assert list(sp.iter_records()) == before  # nothing applied
    sp.acknowledge("a", [(0, 0, [ACK_RELEASE])], 1)
    assert sp.acknowledge("a", [(0, 0, [ACK_ACCEPT])], 1) == [ErrorCode.INVALID_RECORD_STATE]


def test_ack_offsets_past_speo_or_malformed_are_invalid_request():
    sp = make()
    sp.acquire("a", [(0, 4)], 5, 0)
    IR = ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", [(3, 5, [ACK_ACCEPT])], 1) == [IR]
    assert sp.acknowledge("a", [(7, 8, [ACK_ACCEPT])], 1) == [IR]
    assert sp.acknowledge("a", [(3, 2, [ACK_ACCEPT])], 1) == [IR]
    assert sp.acknowledge("a", [(0, 2, [1, 1])], 1) == [IR]
    assert sp.acknowledge("a", [(0, 2, [9])], 1) == [IR]
    assert sp.acknowledge("a", [(0, 2, [])], 1) == [IR]
    assert sp.acknowledge("a", [(2, 3, [1]), (3, 4, [1])], 1) == [0, IR]  # overlapping
    assert sp.acquired_count == 5


def test_ack_below_spso_is_skipped_silently():
    sp = make()
    sp.acquire("a", [(0, 9)], 10, 0)
    sp.acknowledge("a", [(0, 4, [ACK_ACCEPT])], 1)
    assert sp.acknowledge("a", [(0, 4, [ACK_ACCEPT])], 1) == [0]
    assert sp.acknowledge("a", [(2, 6, [ACK_ACCEPT])], 1) == [0]  # 2..4 skipped, 5..6 applied
    assert sp.start_offset == 7


def test_lock_expired_record_cannot_be_acked():
    sp = make()
    sp.acquire("a", [(0, 4)], 5, 0)
    assert sp.acknowledge("a", [(0, 4, [ACK_ACCEPT])], LOCK) == [ErrorCode.INVALID_RECORD_STATE]
    assert states(sp)[0] == (AVAILABLE, None, 1)


def test_renew_extends_lock_without_delivery():
    sp = make()
    sp.acquire("a", [(0, 4)], 5, 0)
    assert sp.acknowledge("a", [(0, 1, [ACK_RENEW])], 900) == [0]
    assert sp.expire_locks(LOCK) == 3  # 2..4 expire at 1000, 0..1 now at 1900
    assert sp.next_deadline() == 1900
    assert states(sp)[0] == (ACQUIRED, "a", 1)
    assert sp.expire_locks(1900) == 2


# ------------------------------------------------------------------------ delivery count and locks
def test_delivery_count_limit_archives_at_release_time():
    sp = make(delivery_count_limit=2)
    sp.acquire("a", [(0, 4)], 5, 0)
    sp.acknowledge("a", [(0, 4, [ACK_RELEASE])], 1)
    assert sp.acquire("b", [], 5, 2) == [AcquiredRange(0, 4, 2)]
    # Second release reaches the limit: archived, never redelivered, SPSO moves past.
    sp.acknowledge("b", [(0, 1, [ACK_RELEASE])], 3)
    assert sp.start_offset == 2
    assert sp.expire_locks(10_000) == 3
    assert (sp.start_offset, sp.end_offset, sp.archived_total) == (5, 5, 5)


def test_expire_locks_returns_records_to_available_and_next_deadline():
    sp = make()
    sp.acquire("a", [(0, 4)], 5, 0)
    sp.acquire("b", [(5, 9)], 5, 500)
    assert sp.next_deadline() == LOCK
    assert sp.expire_locks(999) == 0
    assert sp.expire_locks(1000) == 5
    assert sp.next_deadline() == 1500
    assert states(sp)[0] == (AVAILABLE, None, 1)
    assert sp.expire_locks(2000) == 5
    assert sp.next_deadline() is None


def test_partial_ack_then_expiry_only_releases_the_rest():
    sp = make()
    sp.acquire("a", [(0, 9)], 10, 0)
    sp.acknowledge("a", [(3, 5, [ACK_ACCEPT])], 1)
    assert sp.expire_locks(LOCK) == 7
    st = states(sp)
    assert st[2] == (AVAILABLE, None, 1) and st[4] == (ACKNOWLEDGED, None, 1)


def test_release_member_releases_only_that_member():
    sp = make()
    sp.acquire("a", [(0, 4)], 5, 0)
    sp.acquire("b", [(5, 9)], 5, 0)
    sp.acknowledge("a", [(1, 1, [ACK_ACCEPT])], 0)
    assert sp.release_member("a", 0) == 4
    assert sp.release_member("a", 0) == 0
    st = states(sp)
    assert st[0] == (AVAILABLE, None, 1) and st[5] == (ACQUIRED, "b", 1)
    assert sp.acquired_count == 5


# ----------------------------------------------------------------------------- window movements
def test_archive_range_for_aborted_and_control_batches():
    sp = make()
    sp.acquire("a", [(0, 9)], 10, 0)
    assert sp.archive_range(2, 3) == 2  # aborted records inside an acquired range
    assert states(sp)[2] == (ARCHIVED, None, 1)
    assert sp.archive_range(10, 10) == 1  # control batch at SPEO joins the window archived
    assert sp.end_offset == 11
    with pytest.raises(ValueError):
        sp.archive_range(20, 21)
    sp.acknowledge("a", [(0, 1, [ACK_ACCEPT]), (4, 9, [ACK_ACCEPT])], 0)
    assert (sp.start_offset, sp.end_offset) == (11, 11)


def test_log_start_moving_past_spso_drops_state():
    sp = make()
    sp.acquire("a", [(0, 9)], 10, 0)
    assert sp.advance_log_start(4) == 4
    assert (sp.start_offset, sp.acquired_count) == (4, 6)
    assert sp.acknowledge("a", [(0, 9, [ACK_ACCEPT])], 1) == [0]  # 0..3 skipped
    assert sp.start_offset == 10
    assert sp.advance_log_start(50) == 0
    assert (sp.start_offset, sp.end_offset) == (50, 50)


def test_reset_start_forgets_everything_and_next_delta_is_full():
    sp = make()
    sp.acquire("a", [(0, 9)], 10, 0)
    sp.acknowledge("a", [(5, 9, [ACK_RELEASE])], 0)
    sp.take_dirty()
    sp.reset_start(100)
    assert (sp.start_offset, sp.end_offset, sp.in_flight_count, sp.next_deadline()) == (100, 100, 0, None)
    delta = sp.take_dirty()
    assert delta is not None and delta.full and delta.start_offset == 100 and delta.state_batches == []


# ---------------------------------------------------------------------------------- durable state
def test_state_batches_and_deltas_follow_persister_state_batch():
    sp = make(state_epoch=7)
    sp.acquire("a", [(0, 9)], 10, 0)
    assert sp.take_dirty() is None  # acquisitions are not written (Kafka)
    assert sp.state_batches() == []
    sp.acknowledge("a", [(0, 9, [1, 1, 2, 2, 3, 3, 1, 1, 2, 2])], 1)
    delta = sp.take_dirty()
    assert delta is not None and delta.state_epoch == 7 and delta.start_offset == 2
    assert delta.state_batches == [
        StateBatch(2, 3, AVAILABLE, 1), StateBatch(4, 5, ARCHIVED, 1),
        StateBatch(6, 7, ACKNOWLEDGED, 1), StateBatch(8, 9, AVAILABLE, 1),
    ]
    assert sp.take_dirty() is None
    sp.acquire("b", [], 10, 2)  # 2..3 and 8..9 re-acquired with count 2; durable view keeps count 1
    assert sp.state_batches() == delta.state_batches


def test_persist_acquisitions_option_writes_acquired_as_available_with_count():
    sp = make(persist_acquisitions=True)
    sp.acquire("a", [(0, 4)], 5, 0)
    delta = sp.take_dirty()
    assert delta is not None and delta.state_batches == [StateBatch(0, 4, AVAILABLE, 1)]


def test_load_rebuilds_without_acquired_and_never_redelivers_terminal_records():
    batches = [StateBatch(12, 13, ACKNOWLEDGED, 1), StateBatch(14, 15, AVAILABLE, 2),
               StateBatch(18, 19, ARCHIVED, 3)]
    sp = ShareInFlight.load(10, batches, lock_duration_ms=LOCK, delivery_count_limit=3)
    assert (sp.start_offset, sp.end_offset) == (10, 20)
    st = states(sp)
    assert st[10] == (AVAILABLE, None, 0) and st[16] == (AVAILABLE, None, 0)  # holes: never delivered
    got = sp.acquire("a", [(20, 24)], 100, 0)
    assert got == [AcquiredRange(10, 11, 1), AcquiredRange(14, 15, 3), AcquiredRange(16, 17, 1),
                   AcquiredRange(20, 24, 1)]
    assert sp.take_dirty() is None


def test_load_skips_batches_below_start_and_advances_over_terminal_prefix():
    sp = ShareInFlight.load(10, [StateBatch(5, 9, ACKNOWLEDGED, 1), StateBatch(10, 14, ARCHIVED, 1),
                                 StateBatch(15, 16, AVAILABLE, 1)])
    assert (sp.start_offset, sp.end_offset) == (15, 17)


def test_load_archives_available_at_limit_on_next_acquire():
    sp = ShareInFlight.load(0, [StateBatch(0, 4, AVAILABLE, 3)], delivery_count_limit=3)
    assert sp.acquire("a", [(5, 9)], 100, 0) == [AcquiredRange(5, 9, 1)]
    assert sp.start_offset == 5
    delta = sp.take_dirty()
    assert delta is not None and delta.start_offset == 5


def test_load_rejects_bad_batches():
    with pytest.raises(ValueError):
        ShareInFlight.load(0, [StateBatch(0, 4, 1, 1)])
    with pytest.raises(ValueError):
        ShareInFlight.load(0, [StateBatch(0, 4, 0, 1), StateBatch(3, 6, 0, 1)])
    with pytest.raises(ValueError):
        ShareInFlight(-1)
