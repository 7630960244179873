"""FileCache: one LRU of open file descriptors shared by every segment and index file of every partition log.

Segments are read with `os.pread` and written with `os.write`/`os.pwrite`, so any descriptor of the file will do:
a file is opened when it is used and closed again when `capacity` other files have been used since. A broker can
therefore host far more partitions than the process may hold descriptors open (Kafka keeps every segment open and
needs a high `ulimit -n`; here 10 000 partitions need no more descriptors than the files in use).

Users pin a descriptor for the duration of one operation (`acquire` ... `release`); only unpinned descriptors are
evicted, so a number is never closed (and reused for another file) while a thread still uses it. `forget` (the
file is being deleted or renamed) closes it now, or when its last user releases it. All methods are thread-safe
(the event loop appends and reads; flush threads fsync).
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict

LOG_FLAGS = os.O_RDWR | os.O_APPEND  # segment .log files: appends, preads
INDEX_FLAGS = os.O_RDWR  # .index / .timeindex: pwrite at explicit positions (O_APPEND would ignore them)
MIN_CAPACITY = 8


def default_capacity() -> int:
    """Half the soft RLIMIT_NOFILE: the other half stays for client connections, flushes and the rest."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 16
    return max(MIN_CAPACITY, soft // 2)


class _Entry:
    __slots__ = ("fd", "pins", "doomed")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pins = 0
        self.doomed = False


class FileCache:
    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = max(MIN_CAPACITY, capacity if capacity is not None else default_capacity())
        self._lock = threading.Lock()
        self._open: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._doomed: dict[int, _Entry] = {}  # forgotten while pinned: closed on the last release, by fd
        self.opens = 0  # files opened since start (a measure of churn)

    def __len__(self) -> int:
        return len(self._open)

    def configure(self, capacity: int) -> None:
        with self._lock:
            self.capacity = max(MIN_CAPACITY, capacity)
            self._evict_locked()

    def acquire(self, path: str, flags: int) -> int:
        """An open descriptor of `path`, pinned until `release(path, fd)`. `flags` are used if the file has to be
        opened (with O_CREAT a missing file is created). Raises OSError (FileNotFoundError for a missing file)."""
        with self._lock:
            entry = self._open.get(path)
            if entry is not None:
                self._open.move_to_end(path)
                entry.pins += 1
                return entry.fd
            fd = self._open_file(path, flags)
            entry = self._open[path] = _Entry(fd)
            entry.pins = 1
            self.opens += 1
            self._evict_locked()
            return fd

    def release(self, path: str, fd: int) -> None:
        with self._lock:
            entry = self._open.get(path)
            if entry is not None and entry.fd == fd:
                entry.pins -= 1
                if len(self._open) > self.capacity:
                    self._evict_locked()
                return
            entry = self._doomed.get(fd)
            if entry is not None:
                entry.pins -= 1
                if not entry.pins:
                    del self._doomed[fd]
                    os.close(fd)

    def forget(self, path: str) -> None:
        """Stop caching `path` (about to be deleted, renamed or closed for good)."""
        with self._lock:
            entry = self._open.pop(path, None)
            if entry is None:
                return
            if entry.pins:
                entry.doomed = True
                self._doomed[entry.fd] = entry
            else:
                os.close(entry.fd)

    def close(self) -> None:
        with self._lock:
            for path in [p for p, e in self._open.items() if not e.pins]:
                os.close(self._open.pop(path).fd)

    # --- internals -------------------------------------------------------------------------------------------
    def _open_file(self, path: str, flags: int) -> int:
        while True:
            try:
                return os.open(path, flags, 0o644)
            except OSError as err:
                # out of descriptors: give back idle ones and try again
                if err.errno not in (errno.EMFILE, errno.ENFILE) or not self._evict_one_locked():
                    raise

    def _evict_locked(self) -> None:
        while len(self._open) > self.capacity and self._evict_one_locked():
            pass

    def _evict_one_locked(self) -> bool:
        for path, entry in self._open.items():  # least recently used first
            if not entry.pins:
                del self._open[path]
                os.close(entry.fd)
                return True
        return False


SHARED = FileCache()
"""The cache every partition log uses unless given another (LogManager configures its capacity)."""
