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
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.share_partition.partition import Acquired, ShareError, SharePartition
from broker.share_partition.requests import ShareFetchParams, TopicPartition
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.topics import TopicInfo

# Kafka's DelayedShareFetch splits MaxBytes over the partitions it acquires with PartitionMaxBytesStrategy, whose
# checkValidArguments throws IllegalArgumentException for MaxBytes <= 0; the fetch completes at once with that
# exception for each of those partitions, i.e. UNKNOWN_SERVER_ERROR (no message on the wire), and acquires
# nothing. MaxBytes 0 is answered at once with no partition (SharePartitionManager.processShareFetch).


class SharePartitions(Protocol):
    """What the long poll asks of the share-partition leader (SharePartitionManager, which runs it)."""

    def loaded(self, group: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None: ...

    async def partition(self, group: str, topic_id: uuid.UUID, partition: int) -> SharePartition: ...

    def load_later(self, group: str, tps: Sequence[TopicPartition]) -> None: ...

    def resolve(self, topic_id: uuid.UUID, partition: int) -> TopicInfo: ...

    def read_committed(self, group: str) -> bool: ...

    async def ensure_txn_state(self, partitions: Sequence[SharePartition]) -> None: ...

    def membership(self, group: str, member: str) -> tuple[bool, Mapping[uuid.UUID, Collection[int]] | None]: ...

    def available_bytes(self, sp: SharePartition, enough: int) -> int: ...

    async def wait(self, partitions: Sequence[SharePartition], timeout_s: float) -> bool: ...

    def acquire(self, sp: SharePartition, member: str, max_records: int, max_bytes: int, *, min_one: bool,
                strict: bool = False) -> Acquired | None: ...


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
    def __init__(self, manager: SharePartitions, group: str, member: str, params: ShareFetchParams) -> None:
        self._mgr = manager
        self._group = group
        self._member = member
        self._params = params
        # Results in the order they were found (the response lists partitions in that order).
        self.results: dict[TopicPartition, PartitionFetch] = {}
        # The partitions the last acquisition went through: a full (epoch 0) request lists them all, records
        # or not, as Kafka's answer lists every share-partition its fetch read.
        self.visited: list[TopicPartition] = []

    async def run(self, tps: list[TopicPartition]) -> dict[TopicPartition, PartitionFetch]:
        """Fetch from `tps` (the session's partitions the member may read); returns the partitions that
        answer something: an error, or acquired records."""
        self._pending: list[TopicPartition] = []
        try:
            return await self._run(tps)
        finally:
            if self._pending:  # answered before loading them all: they go on loading for the next fetch
                self._mgr.load_later(self._group, self._pending)

    async def _run(self, tps: list[TopicPartition]) -> dict[TopicPartition, PartitionFetch]:
        mgr, params = self._mgr, self._params
        if params.max_records == 0 or params.max_bytes == 0:
            # Kafka's SharePartitionManager.processShareFetch completes such a fetch at once, with no partition.
            return self.results
        tps = rotate(tps, params.session_epoch)
        # Share-partitions not loaded yet are loaded one at a time, and the fetch is answered as soon as the ones
        # loaded so far have records to acquire: Kafka initializes share-partitions asynchronously (their state
        # comes from the share coordinator), and a share fetch is completed by the first one that is ready, so
        # the first fetch of a session over several new share-partitions serves only one of them.
        partitions: list[SharePartition] = []
        pending = self._pending
        for tp in tps:
            sp = mgr.loaded(self._group, tp[0], tp[1])
            if sp is not None:
                partitions.append(sp)
                continue
            try:
                mgr.resolve(tp[0], tp[1])  # unknown or offline: answered at once, as Kafka's processShareFetch
            except ShareError as err:
                self.results[tp] = PartitionFetch(error=err.code, message=err.message)
                continue
            pending.append(tp)
        read_committed = mgr.read_committed(self._group)
        if read_committed and partitions:
            await mgr.ensure_txn_state(partitions)
        # the monotonic clock the event loop's timers use too (no loop lookup: a getpid syscall on 3.11)
        deadline = time.monotonic() + max(params.max_wait_ms, 0) / 1000
        min_bytes = max(params.min_bytes, 1)
        while True:
            if not partitions and pending:
                await self._load_next(pending, partitions, tps, read_committed)
                continue
            if not partitions:
                return self.results
            left = deadline - time.monotonic()
            member_of, assignment = mgr.membership(self._group, self._member)
            if not member_of:
                return self.results
            serving = partitions if assignment is None else [
                sp for sp in partitions if sp.key[2] in assignment.get(sp.key[1], ())]
            if params.max_bytes <= 0:
                for sp in serving:
                    # Kafka's answer carries the error code only (its exception's message stays in its log)
                    self.results[(sp.key[1], sp.key[2])] = PartitionFetch(error=ErrorCode.UNKNOWN_SERVER_ERROR)
                return self.results
            # MinBytes: wait without acquiring until enough is there. With MinBytes 1 the acquisition below tells
            # as much (it waits when it finds nothing), so the log is not scanned twice.
            short = left > 0 and min_bytes > 1 and \
                sum(mgr.available_bytes(sp, min_bytes) for sp in serving) < min_bytes
            if short and pending:
                await self._load_next(pending, partitions, tps, read_committed)
                continue
            if short and await mgr.wait(partitions, left):
                continue
            self.visited = [(sp.key[1], sp.key[2]) for sp in serving]
            total_bytes, failed = self._acquire_round(self._order(serving), partitions)
            if total_bytes > 0 or failed or not partitions:
                return self.results
            if pending:
                await self._load_next(pending, partitions, tps, read_committed)
                continue
            left = deadline - time.monotonic()
            if left <= 0 or not await mgr.wait(partitions, left):
                return self.results

    async def _load_next(self, pending: list[TopicPartition], partitions: list[SharePartition],
                         order: list[TopicPartition], read_committed: bool) -> None:
        """Load the next share-partition of `pending` into `partitions`, kept in the request's (rotated) order;
        one that cannot be loaded is answered with its error."""
        tp = pending.pop(0)
        try:
            sp = await self._mgr.partition(self._group, tp[0], tp[1])
        except ShareError as err:
            self.results[tp] = PartitionFetch(error=err.code, message=err.message)
            return
        if read_committed:
            await self._mgr.ensure_txn_state([sp])
        rank = {t: i for i, t in enumerate(order)}
        partitions.append(sp)
        partitions.sort(key=lambda p: rank[(p.key[1], p.key[2])])

    @staticmethod
    def _order(serving: list[SharePartition]) -> list[SharePartition]:
        """The order of one acquisition round, as Kafka's DelayedShareFetch comes to it: share-partitions whose
        next fetch offset is where the previous look found it come first, those that moved since (served by the
        previous fetch, records released, just loaded) after them, each group in the session's rotated order.
        (Kafka reads the log of the moved ones first to learn their position, and acquires from the others
        first.) Under a MaxRecords or MaxBytes budget, partitions not served lately go first."""
        still: list[SharePartition] = []
        moved: list[SharePartition] = []
        for sp in serving:
            at = sp.inflight.next_fetch_offset
            (still if sp.probed_at == at else moved).append(sp)
            sp.probed_at = at
        return still + moved if still and moved else serving

    def _acquire_round(self, order: list[SharePartition], partitions: list[SharePartition]) -> tuple[int, bool]:
        """Acquire from `order` within the request's budgets; (bytes acquired, some partition failed). A
        partition whose log directory is offline is answered with the error and dropped from `partitions`."""
        mgr, params = self._mgr, self._params
        total_bytes = 0
        failed = False
        remaining_records = params.max_records
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
