"""The producer state scan that runs in a worker thread reads its segments in large chunks: each pread releases and
retakes the GIL, and a thread doing that every millisecond starves the event loop's thread for the whole scan
(Python only forces a GIL switch after 5 ms without one; a 400 000-batch scan held the loop for 564 ms)."""

from __future__ import annotations

import time

from broker.log import PartitionLog
from broker.log.producer_state import scan_producers_in_thread
from broker.log.segment import THREAD_SCAN_CHUNK, Segment
from protocol import records as rec


def _idempotent_batches(count: int, now_ms: int) -> bytes:
    return b"".join(rec.build_batch([rec.Record(key=None, value=b"v")], timestamp=now_ms, producer_id=1000 + i % 10,
                                    producer_epoch=0, base_sequence=i // 10) for i in range(count))


def test_the_threaded_producer_scan_reads_in_large_chunks(tmp_path, monkeypatch) -> None:
    now = int(time.time() * 1000)
    chunk = _idempotent_batches(1000, now)
    headers = rec.validate_batches(bytearray(chunk))
    plog = PartitionLog(tmp_path / "t-0")
    while plog.size_bytes < 3 * THREAD_SCAN_CHUNK:
        plog.append(chunk, headers=headers)
    reads: list[int] = []
    real = Segment._pread

    def counting(self, size: int, position: int) -> bytes:
        reads.append(size)
        return real(self, size, position)

    monkeypatch.setattr(Segment, "_pread", counting)
    table = scan_producers_in_thread(plog, now - 60_000, plog.log_end_offset)
    total = plog.size_bytes
    plog.close()
    assert len(table) == 10  # every producer found
    assert sum(reads) >= total - 1000  # the whole log was read
    # a read per THREAD_SCAN_CHUNK (plus one per segment and the batches cut at chunk ends), not one per 64 KiB
    assert len(reads) <= total // THREAD_SCAN_CHUNK + 4, (len(reads), total)
