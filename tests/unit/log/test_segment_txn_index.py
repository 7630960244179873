"""A segment's `.txnindex` lives and dies with it: flushed, truncated with the log (and with a torn tail on
recovery), renamed `.deleted` by retention, removed as a stray file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.log import LogManager, PartitionLog
from broker.log.txn_index import AbortedTxn
from protocol import records as rec


def _fill(plog: PartitionLog, n: int) -> None:
    for i in range(n):
        plog.append(rec.build_batch([rec.Record(None, b"v%d" % i)], timestamp=1_000))


def test_truncation_and_torn_tail_cut_the_index(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    _fill(plog, 6)
    plog.append_aborted_txn(AbortedTxn(1, 0, 2, 3))
    plog.append_aborted_txn(AbortedTxn(2, 3, 4, 5))
    plog.flush()
    path = Path(plog.active.txn_index.path)
    assert path.stat().st_size == 68 and plog.collect_aborted_txns(0, 6) == list(plog.active.txn_index)
    plog.truncate_to(4)
    assert [t.last_offset for t in plog.active.txn_index] == [2] and path.stat().st_size == 34
    plog.close()
    # a torn tail: the last batches cut off by recovery take their entries with them
    plog = PartitionLog(tmp_path / "t-0")
    plog.append_aborted_txn(AbortedTxn(3, 3, 3, 4))
    plog.flush()
    size = plog.active.size
    plog.close()
    log_path = tmp_path / "t-0" / f"{0:020d}.log"
    with open(log_path, "r+b") as f:
        f.truncate(size - 10)
    plog = PartitionLog(tmp_path / "t-0")
    assert plog.log_end_offset == 3 and [t.last_offset for t in plog.active.txn_index] == [2]
    assert plog.has_aborted_txns
    plog.close()


def test_retention_renames_and_deletes_the_index(tmp_path: Path) -> None:
    async def run() -> None:
        logs = LogManager(tmp_path, {"segment.bytes": 200})
        logs.start()
        plog = logs.get_or_create("t", 0, {"segment.bytes": 200})
        _fill(plog, 8)
        first = plog.segments[0]
        plog.append_aborted_txn(AbortedTxn(1, first.base_offset, first.next_offset - 1, first.next_offset))
        plog.flush()
        path = Path(first.txn_index.path)
        assert path.exists() and len(plog.segments) > 2
        plog.delete_records_before(plog.segments[1].base_offset)
        assert not path.exists()
        await logs.wait_deletions()
        assert not Path(str(path) + ".deleted").exists()
        logs.close()

    asyncio.run(run())
    stray = tmp_path / "t-0" / f"{999:020d}.txnindex"
    stray.write_bytes(b"")
    plog = PartitionLog(tmp_path / "t-0")
    assert not stray.exists()
    plog.close()
