"""Storage faults fail safe: a failed fsync takes the log directory offline and is never confirmed by a later
flush; a full disk on append undoes the append (no partial batch, no index entry past it) and appends succeed
again once space returns. Faults are injected by replacing os.fsync / os.write / os.pwrite / os.ftruncate."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from broker.log import GroupCommitFlusher, LogConfig, PartitionLog
from broker.log.dir_failure import KafkaStorageError, LogDirFailureChannel
from protocol import records as rec
from tests.helpers.record_batches import batch, batches_in

REAL_WRITE, REAL_PWRITE, REAL_FSYNC = os.write, os.pwrite, os.fsync


def enospc(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def eio(*_args, **_kwargs):
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def half_then_enospc(monkeypatch):
    """os.write writes half of what it is given once, then fails with ENOSPC (a disk filling mid-batch)."""
    calls = []

    def write(fd, data):
        if not calls:
            calls.append(1)
            return REAL_WRITE(fd, bytes(data)[:len(data) // 2])
        enospc()

    monkeypatch.setattr(os, "write", write)


def file_size(plog: PartitionLog) -> int:
    return os.stat(plog.active.log_path).st_size


def offsets(plog: PartitionLog) -> list[tuple[int, int]]:
    return [(h.base_offset, h.records_count) for h in batches_in(plog.read(plog.log_start_offset, 1 << 24).data)]


def test_full_disk_mid_batch_undoes_the_append_and_appends_resume(tmp_path: Path, monkeypatch) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    plog.append(batch(3, value_size=500))
    plog.append(batch(2, value_size=500))
    plog.flush()
    size, index_entries = file_size(plog), len(plog.active.offset_index)
    half_then_enospc(monkeypatch)
    with pytest.raises(OSError) as raised:
        plog.append(batch(4, value_size=500))
    assert raised.value.errno == errno.ENOSPC
    monkeypatch.setattr(os, "write", REAL_WRITE)
    # nothing of the failed batch is left: not in the file, not in memory, not in the index
    assert file_size(plog) == plog.active.size == size
    assert plog.log_end_offset == 5
    assert len(plog.active.offset_index) == index_entries
    assert not plog.failures.offline
    # space is back: the next append gets the offsets the failed one would have had
    info = plog.append(batch(4, value_size=500))
    assert (info.base_offset, info.last_offset) == (5, 8)
    plog.flush()
    assert offsets(plog) == [(0, 3), (3, 2), (5, 4)]
    plog.close()
    again = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    assert offsets(again) == [(0, 3), (3, 2), (5, 4)]
    again.close()


def test_full_disk_writing_the_index_undoes_the_batch_too(tmp_path: Path, monkeypatch) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    plog.append(batch(2))
    plog.append(batch(2))  # the second batch is indexed (it starts more than 1 byte after the first)
    entries, size = len(plog.active.offset_index), file_size(plog)
    monkeypatch.setattr(os, "pwrite", enospc)
    with pytest.raises(OSError):
        plog.append(batch(3))
    monkeypatch.setattr(os, "pwrite", REAL_PWRITE)
    assert file_size(plog) == size and plog.log_end_offset == 4
    assert len(plog.active.offset_index) == entries
    index_path = Path(plog.active.offset_index.path)
    assert index_path.stat().st_size == entries * 8  # no partial entry left in the file
    assert plog.append(batch(3)).base_offset == 4
    assert offsets(plog) == [(0, 2), (2, 2), (4, 3)]
    plog.close()


def test_an_undone_control_batch_is_forgotten_with_it(tmp_path: Path, monkeypatch) -> None:
    """The segment's known control batches (reads may return batches free of them as one run) roll back with a
    failed append: a data batch written where the undone marker was is read as part of one run."""
    plog = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    plog.append(batch(2))
    monkeypatch.setattr(os, "pwrite", enospc)  # its index entry cannot be written
    with pytest.raises(OSError):
        plog.append(rec.build_batch([rec.Record(None, b"")], timestamp=1_000, control=True, transactional=True,
                                    producer_id=1))
    monkeypatch.setattr(os, "pwrite", REAL_PWRITE)
    plog.append(batch(3))
    bounds: list = []
    got = plog.read(0, 1 << 20, bounds=bounds, run_records=10)
    assert bounds == [(0, 0, 4, len(got.data), 0)]
    plog.close()


def test_full_disk_when_rolling_a_segment_leaves_the_log_usable(tmp_path: Path, monkeypatch) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=1024))
    plog.append(batch(1, value_size=900))
    real_open = os.open

    def no_new_files(path, flags, *args):
        if flags & os.O_CREAT and str(path).endswith(".log"):
            enospc()
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_new_files)
    with pytest.raises(OSError):
        plog.append(batch(1, value_size=900))  # needs a new segment
    monkeypatch.setattr(os, "open", real_open)
    assert plog.log_end_offset == 1 and not plog.failures.offline
    assert plog.append(batch(1, value_size=900)).base_offset == 1
    assert len(plog.segments) == 2
    plog.close()


def test_an_append_that_cannot_be_undone_takes_the_directory_offline(tmp_path: Path, monkeypatch) -> None:
    failures = LogDirFailureChannel(str(tmp_path))
    heard = []
    failures.add_listener(heard.append)
    plog = PartitionLog(tmp_path / "t-0", failures=failures)
    other = PartitionLog(tmp_path / "u-0", failures=failures)
    plog.append(batch(2))
    half_then_enospc(monkeypatch)
    monkeypatch.setattr(os, "ftruncate", eio)
    with pytest.raises(KafkaStorageError):
        plog.append(batch(2))
    assert failures.offline and len(heard) == 1
    # every log of the directory refuses from now on
    with pytest.raises(KafkaStorageError):
        other.append(batch(1))
    with pytest.raises(KafkaStorageError):
        other.read(0, 100)
    plog.close()
    other.close()


def test_a_write_error_other_than_a_full_disk_takes_the_directory_offline(tmp_path: Path, monkeypatch) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    plog.append(batch(2))
    monkeypatch.setattr(os, "write", eio)
    with pytest.raises(KafkaStorageError):
        plog.append(batch(2))
    monkeypatch.setattr(os, "write", REAL_WRITE)
    assert plog.failures.offline
    assert file_size(plog) == plog.active.size  # undone all the same
    plog.close()


def test_a_failed_fsync_is_never_confirmed_by_a_later_flush(tmp_path: Path, monkeypatch) -> None:
    """Regression: a failed flush put its segments back in the dirty set and the next flush reported success,
    though Linux may have dropped the pages the failed fsync could not write."""
    plog = PartitionLog(tmp_path / "t-0")
    plog.append(batch(3))
    plog.flush()  # offsets 0-2 are durable
    durable = file_size(plog)
    plog.append(batch(2))  # offsets 3-4: their fsync fails
    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(KafkaStorageError):
        plog.flush()
    monkeypatch.setattr(os, "fsync", REAL_FSYNC)
    assert plog.failures.offline
    with pytest.raises(KafkaStorageError):
        plog.flush()  # fsync works again, but nothing may be confirmed now
    with pytest.raises(KafkaStorageError):
        plog.append(batch(1))
    with pytest.raises(KafkaStorageError):
        plog.read(0, 1 << 20)
    # the bytes the failed fsync covered are cut off: a restart sees only what really was made durable
    assert file_size(plog) == durable
    plog.close()
    again = PartitionLog(tmp_path / "t-0")
    assert offsets(again) == [(0, 3)]
    assert again.append(batch(1)).base_offset == 3
    again.close()


def test_flush_waiters_get_the_storage_error(tmp_path: Path, monkeypatch) -> None:
    plog = PartitionLog(tmp_path / "t-0")

    async def run() -> None:
        flusher = GroupCommitFlusher()
        plog.append(batch(1))
        monkeypatch.setattr(os, "fsync", eio)
        results = await asyncio.gather(flusher.sync(plog), flusher.sync(plog), return_exceptions=True)
        monkeypatch.setattr(os, "fsync", REAL_FSYNC)
        assert all(isinstance(r, KafkaStorageError) for r in results), results
        # a sync asked for afterwards fails too, although fsync works again
        with pytest.raises(KafkaStorageError):
            await flusher.sync(plog)
        await flusher.close()

    asyncio.run(run())
    plog.close()
