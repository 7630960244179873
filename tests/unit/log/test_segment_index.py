"""Index files and reads through them: every offset maps to the batch holding it."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import LogConfig, PartitionLog
from broker.log.index import OffsetIndex, TimeIndex
from protocol import records as rec
from tests.helpers.record_batches import batch, batches_in

CONTROL_BATCH = rec.build_batch([rec.Record(None, b"")], timestamp=1_000, control=True, transactional=True,
                                producer_id=1)


def test_offset_index_lookup_and_reload(tmp_path: Path) -> None:
    path = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(path, 100)
    assert idx.lookup(150) == (100, 0)
    for off, pos in [(110, 4000), (120, 8100), (135, 12300)]:
        idx.append(off, pos)
    idx.append(130, 9000)  # not increasing: ignored
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 4000)
    assert idx.lookup(134) == (120, 8100)
    assert idx.lookup(10**9) == (135, 12300)
    idx.close()
    again = OffsetIndex(path, 100)
    assert len(again) == 3 and again.lookup(121) == (120, 8100)
    again.truncate_to_position(8100)
    assert len(again) == 1
    again.close()
    assert Path(path).stat().st_size == 8


def test_preallocated_zero_tail_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">ii", 5, 4100) + struct.pack(">ii", 9, 8300) + b"\0" * 800)
    idx = OffsetIndex(str(path), 0)
    assert len(idx) == 2 and path.stat().st_size == 16
    tpath = tmp_path / "00000000000000000000.timeindex"
    tpath.write_bytes(struct.pack(">qi", 1000, 5) + b"\0" * 120)
    tidx = TimeIndex(str(tpath), 0)
    assert len(tidx) == 1 and tidx.last == (1000, 5)
    assert tidx.lookup_before(1000) is None and tidx.lookup_before(1001) == 5
    idx.close()
    tidx.close()


def check_every_offset(plog: PartitionLog, max_bytes: int, *, tracked: bool) -> None:
    """`tracked`: every segment was written since the log was opened, so its control batches are known."""
    for offset in range(plog.log_start_offset, plog.log_end_offset):
        result = plog.read(offset, max_bytes)
        headers = batches_in(result.data)
        assert headers, offset
        first = headers[0]
        assert first.base_offset <= offset <= first.last_offset
        assert result.first_offset == first.base_offset
        assert len(result.data) <= max_bytes or len(headers) == 1  # KIP-74: one whole batch may exceed it
        # a plain read finds its cut from the offset index; one asking for the batches' bounds walks every batch
        walked: list = []
        walked_data = bytes(plog.read(offset, max_bytes, bounds=walked).data)
        assert bytes(result.data) == walked_data, offset
        assert walked == [(pos, h.base_offset, h.last_offset, h.size, h.attributes)
                          for pos, h in rec.iter_batches(result.data)]
        check_runs(plog, offset, max_bytes, walked_data, walked, tracked)
        for a, b in zip(headers, headers[1:], strict=False):
            assert b.base_offset == a.last_offset + 1


def check_runs(plog: PartitionLog, offset: int, max_bytes: int, data: bytes, walked: list, tracked: bool) -> None:
    """A read asking for the bounds as one run (`run_records`) returns the same bytes, and one bound for all its
    batches exactly when none is a control batch, they span at most `run_records` offsets and the segment's
    control batches are known; else the bounds of each batch."""
    span = walked[-1][2] - walked[0][1] + 1
    control = any(b[4] & rec.ATTR_CONTROL for b in walked)
    for run_records in (1, span - 1, span, 10 ** 6):
        if run_records < 1:
            continue
        runs: list = []
        assert bytes(plog.read(offset, max_bytes, bounds=runs, run_records=run_records).data) == data
        one = [(0, walked[0][1], walked[-1][2], sum(b[3] for b in walked), 0)]
        if control or span > run_records:
            assert runs == walked, (offset, run_records)
        elif tracked:
            assert runs == one, (offset, run_records)
        else:  # segments opened from disk: one run only where the segment was recovered from its start
            assert runs in (walked, one), (offset, run_records)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 900), st.integers(0, 9)), min_size=1, max_size=40),
       interval=st.sampled_from([0, 100, 4096]), segment_bytes=st.sampled_from([700, 3000, 1 << 20]),
       max_bytes=st.sampled_from([1, 200, 1500, 1 << 20]))
def test_read_every_offset_returns_the_batch_holding_it(sizes, interval, segment_bytes, max_bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
        plog = PartitionLog(Path(tmp) / "t-0", cfg)
        expected = 0
        for count, value_size, kind in sizes:
            # one batch in ten a transaction marker (a control batch: never part of a run)
            data = CONTROL_BATCH if kind == 0 else batch(count, value_size=value_size)
            info = plog.append(data)
            assert info.base_offset == expected
            expected = info.last_offset + 1
        assert plog.log_end_offset == expected
        check_every_offset(plog, max_bytes, tracked=True)
        plog.close()
        reopened = PartitionLog(Path(tmp) / "t-0", cfg)  # indexes loaded from disk this time
        assert reopened.log_end_offset == expected
        check_every_offset(reopened, max_bytes, tracked=False)
        reopened.close()


def test_min_one_batch_kip74(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    plog.append(batch(1, value_size=5000))
    plog.append(batch(1, value_size=10))
    big = plog.read(0, 100)
    assert [h.base_offset for h in batches_in(big.data)] == [0] and len(big.data) > 5000
    assert plog.read(0, 100, min_one_batch=False).data == b""
    both = plog.read(0, 1 << 20)
    assert [h.base_offset for h in batches_in(both.data)] == [0, 1]
    assert plog.read(2, 100).data == b""  # at the log end: nothing yet
    plog.close()
