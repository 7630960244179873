"""Micro-benchmark: cost of one share acknowledgement with 200 vs 20 000 in-flight records.

    .venv/bin/python -m bench.share_ack_cost [--rounds N]

Each round builds a share-partition whose in-flight window holds N records acquired in batches of 10 by
three members (untimed), then times acknowledgements of batches in the middle of the window one call at a
time with time.perf_counter: a whole-batch Accept, a per-offset mixed ack (Accept/Reject/Release runs,
which splits the batch) and a Renew. Prints the median and mean per call in microseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

from broker.share_partition.inflight import ACK_ACCEPT, ACK_REJECT, ACK_RELEASE, ACK_RENEW, ShareInFlight

BATCH = 10
ACKS_PER_ROUND = 15
MIXED = [ACK_ACCEPT] * 4 + [ACK_REJECT] * 2 + [ACK_RELEASE] * 4


def build(records: int) -> ShareInFlight:
    sp = ShareInFlight(0, max_in_flight_records=10**9, lock_duration_ms=30_000)
    for i in range(records // BATCH):
        sp.acquire(f"m{i % 3}", [(i * BATCH, i * BATCH + BATCH - 1)], BATCH, 0)
    return sp


def run(records: int, rounds: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"accept": [], "mixed": [], "renew": []}
    batches = records // BATCH
    # Batches spread over the middle of the window; batch 0 stays acquired so SPSO never moves.
    picks = [1 + (batches - 2) * k // ACKS_PER_ROUND for k in range(ACKS_PER_ROUND)]
    clock = time.perf_counter
    for _ in range(rounds):
        for kind in samples:
            sp = build(records)
            out = samples[kind]
            for i in picks:
                first, member = i * BATCH, f"m{i % 3}"
                types = {"accept": [ACK_ACCEPT], "mixed": MIXED, "renew": [ACK_RENEW]}[kind]
                rng = [(first, first + BATCH - 1, types)]
                t0 = clock()
                errs = sp.acknowledge(member, rng, 1)
                out.append(clock() - t0)
                assert errs == [0], errs
    return samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60)
    args = ap.parse_args()
    print(f"{'in-flight':>10} {'ack':>7} {'calls':>6} {'median us':>10} {'mean us':>8}")
    for records in (200, 20_000):
        for kind, xs in run(records, args.rounds).items():
            us = [x * 1e6 for x in xs]
            print(f"{records:>10} {kind:>7} {len(us):>6} {statistics.median(us):>10.2f} {statistics.fmean(us):>8.2f}")


if __name__ == "__main__":
    main()
