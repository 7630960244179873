"""`python -m bench.produce_validation`: cost of Produce's batch validation, in process (no sockets).

For ~1 MB batches (what librdkafka sends with batch.size=1000000) of several record shapes and codecs, times
`validate_batches` with the header/CRC checks only and `validate_client_batch` (the produce path: the header
checks and the record framing check, decompressing compressed payloads), and prints milliseconds per batch and
nanoseconds per record. The best of several rounds is shown
(the machine is shared; the minimum is the least disturbed measurement).
"""

from __future__ import annotations

import argparse
import random
import time

from protocol import records as rec

CODECS = {"none": rec.COMPRESSION_NONE, "gzip": rec.COMPRESSION_GZIP, "snappy": rec.COMPRESSION_SNAPPY,
          "lz4": rec.COMPRESSION_LZ4, "zstd": rec.COMPRESSION_ZSTD}


def shapes() -> dict[str, list[rec.Record]]:
    rnd = random.Random(7)

    def text(n: int) -> bytes:
        return bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz {}:,\"0123456789") for _ in range(n))

    return {
        "100B": [rec.Record(None, text(100)) for _ in range(9_000)],
        "1KiB": [rec.Record(None, text(1024)) for _ in range(950)],
        "100B key+2 headers": [rec.Record(b"key-%06d" % i, text(100), [("trace", text(16)), ("type", b"order")])
                               for i in range(7_000)],
        "60-140B varying": [rec.Record(None, text(rnd.randint(60, 140))) for _ in range(9_000)],
    }


def best_of(fn, rounds: int) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.produce_validation")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    print(f"{'shape':22} {'codec':6} {'records':>7} {'bytes':>9} {'header+CRC':>11} {'+records':>10} {'ns/record':>9}")
    for shape, records in shapes().items():
        for name, codec in CODECS.items():
            batch = rec.build_batch(records, compression=codec)
            header_only = best_of(lambda b=batch: rec.validate_batches(b), args.rounds)
            full = best_of(lambda b=batch: rec.validate_client_batch(b, max_message_bytes=1 << 30), args.rounds)
            print(f"{shape:22} {name:6} {len(records):7} {len(batch):9} {header_only * 1e3:9.3f}ms "
                  f"{full * 1e3:8.3f}ms {(full - header_only) / len(records) * 1e9:9.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
