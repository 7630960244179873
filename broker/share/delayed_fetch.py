"""The ShareFetch long poll (Kafka's DelayedShareFetch): acquire records for one member from the share-partitions
of its share session, waiting up to MaxWaitMs while there is less than MinBytes to acquire.

It waits without acquiring (acquired records would sit locked while the fetch waits) and is woken by appends
(transaction markers too: they move the LSO a read_committed group reads up to) and by records becoming available
again (SharePartitionManager.wait). Only partitions assigned to the member
are served, looked up each round since a rebalance may move them; the others stay in the session and are
served again once assigned.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import NamedTuple

from broker.share.manager import Acquired, ShareError, SharePartition, SharePartitionManager
from protocol.errors import ErrorCode

TopicPartition = tuple[uuid.UUID, int]  # (topic id, partition)
DEFAULT_MAX_RECORDS = 500  # when the request leaves MaxRecords unset (0)
# Kafka's DelayedShareFetch splits MaxBytes over the partitions it acquires with PartitionMaxBytesStrategy, whose
# checkValidArguments throws IllegalArgumentException for MaxBytes <= 0; the fetch completes at once with that
# exception for each of those partitions, i.e. UNKNOWN_SERVER_ERROR and this message, and acquires nothing.
MAX_BYTES_ERROR = "Request max bytes must be greater than 0"


class ShareFetchParams(NamedTuple):  # built per ShareFetch: a tuple builds faster than a frozen dataclass
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # must be > 0 (see MAX_BYTES_ERROR)
    max_records: int  # 0: DEFAULT_MAX_RECORDS
    strict: bool = False  # record_limit acquire mode (v2): MaxRecords is a hard limit
    session_epoch: int = 0  # the request's ShareSessionEpoch: where the partition order is rotated to


@dataclass(slots=True)
class PartitionFetch:
    """What one share-partition answers: acquired records, or an error."""

    acquired: Acquired | None = None
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


def rotate(tps: list[TopicPartition], session_epoch: int) -> list[TopicPartition]:
    """Kafka's PartitionRotateStrategy (round robin, applied by SharePartitionManager.fetchMessages): the
    partitions of the request start at `session_epoch % n`, so that when MaxRecords or MaxBytes runs out before
    the last partition, the next request of the session starts with another one and none starves. The initial
    (0) and final (-1) epochs keep the order."""
    if len(tps) < 2 or session_epoch < 1:
        return tps
    at = session_epoch % len(tps)
    return tps[at:] + tps[:at]


class DelayedShareFetch:
    def __init__(self, manager: SharePartitionManager, group: str, member: str, params: ShareFetchParams) -> None:
        self._mgr = manager
        self._group = group
        self._member = member
        self._params = params
        # Results in the order they were found (the response lists partitions in that order).
        self.results: dict[TopicPartition, PartitionFetch] = {}

    async def run(self, tps: list[TopicPartition]) -> dict[TopicPartition, PartitionFetch]:
        """Fetch from `tps` (the session's partitions the member may read); returns the partitions that
        answer something: an error, or acquired records."""
        mgr, params = self._mgr, self._params
        tps = rotate(tps, params.session_epoch)
        partitions: list[SharePartition] = []
        for tp in tps:
            try:
                sp = mgr.loaded(self._group, tp[0], tp[1]) or await mgr.partition(self._group, tp[0], tp[1])
                partitions.append(sp)
            except ShareError as err:
                self.results[tp] = PartitionFetch(error=err.code, message=err.message)
        if not partitions:
            return self.results
        if mgr.read_committed(self._group):
            await mgr.ensure_txn_state(partitions)
        # the monotonic clock the event loop's timers use too (no loop lookup: a getpid syscall on 3.11)
        deadline = time.monotonic() + max(params.max_wait_ms, 0) / 1000
        min_bytes = max(params.min_bytes, 1)
        while True:
            left = deadline - time.monotonic()
            member_of, assignment = mgr.membership(self._group, self._member)
            if not member_of:
                return self.results
            serving = partitions if assignment is None else [
                sp for sp in partitions if sp.key[2] in assignment.get(sp.key[1], ())]
            if params.max_bytes <= 0:
                for sp in serving:
                    self.results[(sp.key[1], sp.key[2])] = PartitionFetch(
                        error=ErrorCode.UNKNOWN_SERVER_ERROR, message=MAX_BYTES_ERROR)
                return self.results
            # MinBytes: wait without acquiring until enough is there. With MinBytes 1 the acquisition below tells
            # as much (it waits when it finds nothing), so the log is not scanned twice.
            short = left > 0 and min_bytes > 1 and \
                sum(mgr.available_bytes(sp, min_bytes) for sp in serving) < min_bytes
            if short and await mgr.wait(partitions, left):
                continue
            total_bytes, failed = self._acquire_round(serving, partitions)
            if total_bytes > 0 or failed or not partitions:
                return self.results
            left = deadline - time.monotonic()
            if left <= 0 or not await mgr.wait(partitions, left):
                return self.results

    def _acquire_round(self, order: list[SharePartition], partitions: list[SharePartition]) -> tuple[int, bool]:
        """Acquire from `order` within the request's budgets; (bytes acquired, some partition failed). A
        partition whose log directory is offline is answered with the error and dropped from `partitions`."""
        mgr, params = self._mgr, self._params
        total_bytes = 0
        failed = False
        remaining_records = params.max_records if params.max_records > 0 else DEFAULT_MAX_RECORDS
        remaining_bytes = params.max_bytes
        for sp in order:
            if remaining_records <= 0 or remaining_bytes <= 0:
                break
            tp = (sp.key[1], sp.key[2])
            try:
                got = mgr.acquire(sp, self._member, remaining_records, remaining_bytes, min_one=total_bytes == 0,
                                  strict=params.strict)
            except ShareError as err:
                self.results[tp] = PartitionFetch(error=err.code, message=err.message)
                partitions.remove(sp)
                failed = True
                continue
            if got is None:
                continue
            self.results[tp] = PartitionFetch(acquired=got)
            total_bytes += len(got.records)
            remaining_bytes -= len(got.records)
            for r in got.ranges:
                remaining_records -= r.last_offset - r.first_offset + 1
        return total_bytes, failed
