"""LogDirFailureChannel: the one place that knows whether the log directory is still usable.

As Kafka's LogDirFailureChannel: a storage error that leaves a log in an unknown state (a failed fsync, a write
that cannot be undone) takes its log directory offline. After that no log in the directory appends, flushes or
reads again, so nothing written before the failure can later be confirmed by a flush that happens to succeed
(after a failed fsync Linux may have dropped the dirty pages while still serving them from the cache). The broker
listens and stops, as Kafka's broker does when its only log directory fails.

A full disk on append is not such an error (nor is running out of descriptors): the append is undone (the file
truncated back to the last whole batch, the indexes with it) and only that append fails (see Segment.append).

`fail` may be called from a flush thread; listeners run in that thread (the broker hops to its loop).
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)

# An append that fails with one of these is undone and the log stays online: space (or descriptors) may come back.
TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EMFILE, errno.ENFILE})
STORAGE_ERROR_MESSAGE = "Disk error when trying to access log file on the disk."  # Kafka's KAFKA_STORAGE_ERROR text


class KafkaStorageError(Exception):
    """The log cannot be used: its directory is offline after a storage error (answered KAFKA_STORAGE_ERROR)."""


def is_transient(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in TRANSIENT_ERRNOS


class LogDirFailureChannel:
    def __init__(self, directory: str = "") -> None:
        self.directory = directory
        self.reason: str | None = None  # set once, when the directory goes offline
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], object]] = []

    @property
    def offline(self) -> bool:
        return self.reason is not None

    def add_listener(self, fn: Callable[[str], object]) -> None:
        """`fn(reason)` once, when the directory goes offline (possibly in a worker thread)."""
        self._listeners.append(fn)

    def fail(self, what: str, err: BaseException | None = None) -> None:
        """Take the directory offline because of `what` (idempotent: the first reason is kept)."""
        with self._lock:
            if self.reason is not None:
                return
            self.reason = f"{what}: {err!r}" if err is not None else what
        log.error("log directory offline after a storage error; no log in it appends, flushes or reads again",
                  dir=self.directory, reason=self.reason)
        for fn in self._listeners:
            try:
                fn(self.reason)
            except Exception:  # noqa: BLE001 - every listener must hear of it
                log.exception("log directory failure listener failed")

    def check(self) -> None:
        if self.reason is not None:
            raise KafkaStorageError(f"log directory {self.directory} is offline ({self.reason})")
