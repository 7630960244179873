"""The cost of acks and lock expiry must not grow with the number of in-flight records (DESIGN principle 7).

Counted, not timed: `ShareInFlight.ops` counts pieces visited or split.
"""

from __future__ import annotations

from broker.share_partition.inflight import ACK_ACCEPT, ACK_REJECT, ACK_RELEASE, ShareInFlight

BATCH = 10


def filled(records: int, staggered: bool = False) -> ShareInFlight:
    sp = ShareInFlight(0, max_in_flight_records=10**9, lock_duration_ms=30_000)
    for i in range(records // BATCH):
        first = i * BATCH
        sp.acquire(f"m{i % 3}", [(first, first + BATCH - 1)], BATCH, i if staggered else 0)
    assert sp.acquired_count == records
    return sp


def cost(sp: ShareInFlight, action) -> int:
    before = sp.ops
    action(sp)
    return sp.ops - before


def ack_costs(records: int) -> list[int]:
    out = []
    sp = filled(records)
    i = records // BATCH // 2
    member, first = f"m{i % 3}", i * BATCH
    # Whole-batch accept, per-offset mixed types, release of a sub-range.
    out.append(cost(sp, lambda s: s.acknowledge(member, [(first, first + 9, [ACK_ACCEPT])], 1)))
    j = i + 3
    m2, f2 = f"m{j % 3}", j * BATCH
    types = [ACK_ACCEPT] * 4 + [ACK_REJECT] * 2 + [ACK_RELEASE] * 4
    out.append(cost(sp, lambda s: s.acknowledge(m2, [(f2, f2 + 9, types)], 1)))
    k = i + 6
    m3, f3 = f"m{k % 3}", k * BATCH
    out.append(cost(sp, lambda s: s.acknowledge(m3, [(f3 + 3, f3 + 5, [ACK_RELEASE])], 1)))
    # Invalid ack from the wrong member costs the same validation and applies nothing.
    out.append(cost(sp, lambda s: s.acknowledge("nobody", [(f3 + 6, f3 + 9, [ACK_ACCEPT])], 1)))
    return out


def test_ack_cost_independent_of_in_flight_records():
    small, large = ack_costs(200), ack_costs(20_000)
    assert small == large
    assert max(small) <= 8


def test_lock_expiry_cost_independent_of_in_flight_records():
    def expiry_cost(records: int) -> int:
        sp = filled(records, staggered=True)  # batch i expires at i + 30000
        sp.ops = 0
        assert sp.expire_locks(30_000 + 5) == 6 * BATCH
        return sp.ops

    assert expiry_cost(200) == expiry_cost(20_000) == 6


def test_release_member_cost_scales_with_member_holdings_only():
    def release_cost(records: int) -> int:
        sp = filled(records)
        sp.acquire("solo", [(records, records + BATCH - 1)], BATCH, 0)
        return cost(sp, lambda s: s.release_member("solo", 1))

    assert release_cost(200) == release_cost(20_000) == 1


def test_spso_advance_is_amortised_per_piece():
    def head_ack_cost(records: int) -> int:
        sp = filled(records)
        # Ack batches 1..4 first (no SPSO move), then batch 0 lets SPSO pass all five.
        for i in range(1, 5):
            sp.acknowledge(f"m{i % 3}", [(i * BATCH, i * BATCH + 9, [ACK_ACCEPT])], 1)
        c = cost(sp, lambda s: s.acknowledge("m0", [(0, 9, [ACK_ACCEPT])], 1))
        assert sp.start_offset == 5 * BATCH
        return c

    assert head_ack_cost(200) == head_ack_cost(20_000)
