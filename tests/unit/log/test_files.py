"""FileCache: an LRU of descriptors shared by all logs; pinned descriptors are never closed under their user."""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path

from broker.log import LogConfig, PartitionLog
from broker.log.files import LOG_FLAGS, MIN_CAPACITY, FileCache
from tests.helpers.record_batches import batch


def make_files(tmp_path: Path, n: int) -> list[str]:
    paths = []
    for i in range(n):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"%d" % i)
        paths.append(str(path))
    return paths


def read(cache: FileCache, path: str) -> bytes:
    fd = cache.acquire(path, LOG_FLAGS)
    try:
        return os.pread(fd, 100, 0)
    finally:
        cache.release(path, fd)


def test_least_recently_used_descriptors_are_closed(tmp_path: Path) -> None:
    cache = FileCache(MIN_CAPACITY)
    paths = make_files(tmp_path, 3 * MIN_CAPACITY)
    for i, path in enumerate(paths):
        assert read(cache, path) == b"%d" % i
        assert len(cache) <= MIN_CAPACITY
    read(cache, paths[-MIN_CAPACITY])  # still open: no new open
    opens = cache.opens
    read(cache, paths[-MIN_CAPACITY])
    assert cache.opens == opens
    read(cache, paths[0])  # long evicted: opened again
    assert cache.opens == opens + 1
    cache.close()
    assert len(cache) == 0


def test_pinned_descriptors_survive_eviction_and_forget(tmp_path: Path) -> None:
    cache = FileCache(MIN_CAPACITY)
    paths = make_files(tmp_path, 4 * MIN_CAPACITY)
    pinned = cache.acquire(paths[0], LOG_FLAGS)
    for path in paths[1:]:
        read(cache, path)
    assert os.pread(pinned, 10, 0) == b"0"  # not closed (nor reused) while pinned
    cache.forget(paths[0])  # e.g. the segment is deleted while a flush still uses it
    assert os.pread(pinned, 10, 0) == b"0"
    cache.release(paths[0], pinned)
    try:
        os.fstat(pinned)
        still_open = True
    except OSError:
        still_open = False
    assert not still_open or os.readlink(f"/proc/self/fd/{pinned}") != paths[0]
    cache.close()


def test_running_out_of_descriptors_gives_back_idle_ones(tmp_path: Path) -> None:
    paths = make_files(tmp_path, 64)
    cache = FileCache(1000)  # larger than what the process will be allowed
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 20, hard))
    try:
        for path in paths:  # more files than descriptors left: idle cached ones are closed to make room
            assert read(cache, path)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        cache.close()


def test_many_logs_share_a_small_cache(tmp_path: Path) -> None:
    cache = FileCache(MIN_CAPACITY)
    logs = [PartitionLog(tmp_path / f"t-{i}", LogConfig(index_interval_bytes=1), files=cache) for i in range(40)]
    for round_ in range(3):
        for i, plog in enumerate(logs):
            plog.append(batch(2, value_size=10 + i + round_))
            assert len(cache) <= MIN_CAPACITY
    errors = []

    def flush_all() -> None:
        try:
            for plog in logs:
                plog.flush()
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    flusher = threading.Thread(target=flush_all)
    flusher.start()
    for plog in logs:  # reads on this thread while another thread flushes through the same cache
        assert len(plog.read(0, 1 << 20).data) > 0
    flusher.join()
    assert not errors
    for plog in logs:
        plog.close()
    reopened = [PartitionLog(tmp_path / f"t-{i}", files=cache) for i in range(40)]
    assert [p.log_end_offset for p in reopened] == [6] * 40
    for plog in reopened:
        plog.close()
    cache.close()
