"""Coordinator records on an internal topic: replay on load, durable appends, per-partition ordering.

The coordinator runtime's loader and partition writer (broker.coordinator.runtime) for `__consumer_offsets`,
`__share_group_state` and `__transaction_state`. It puts an operation's records in the log as one batch per
partition, and hands out a future done once they are fsynced (or, with a deferred fsync, once written:
`fsync_interval_ms`).

Ordering: records are appended synchronously, in the same loop step as the coordinator call that produced
them, so log order is memory order. An answer without records may still show state whose fsync is in flight,
so it waits for the partition's last pending flush (`barrier`) — Kafka completes coordinator operations in
log order the same way.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import structlog

from broker.txn.results import TxnMarker
from protocol import records as rec
from protocol.control_records import read_end_txn_marker
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.log import PartitionLog
    from broker.replica_manager import ReplicaManager

log = structlog.get_logger(__name__)
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# on_marker(producer_id, producer_epoch, commit, coordinator_epoch): a COMMIT/ABORT control batch on replay
MarkerApply = Callable[[int, int, bool, int], object]
# apply(offset, producer_id, producer_epoch, key, value): one record on replay
RecordApply = Callable[[int, int, int, bytes | memoryview, bytes | memoryview | None], object]
KeyValue = tuple[bytes, bytes | None]
_SIZE_ERRORS = frozenset({"MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_FETCH_SIZE"})

READ_CHUNK = 1 << 20


class AppendFailed(Exception):
    """The coordinator records could not be appended; memory is ahead of the log (reload the partition)."""


class CoordinatorLog:
    """The records of one internal topic: read through the topic manager, appended and made durable through the
    replica manager (which owns the group-commit flusher)."""

    def __init__(self, topics: TopicManager, replicas: ReplicaManager, topic: str, *,
                 fsync_interval_ms: int = 0) -> None:
        """`fsync_interval_ms` 0: an append's future is done once its records are fsynced. Above 0: once they are
        written to the log file (the page cache: they survive the broker's kill -9, not the machine's power loss),
        and the partitions written are fsynced together at most that long after; `barrier` still fsyncs."""
        self._topics: TopicManager = topics
        self._replicas: ReplicaManager = replicas
        self.topic: str = topic
        self._pending: dict[int, asyncio.Future[None]] = {}
        self._fsync_interval_s = fsync_interval_ms / 1000
        self._unsynced: dict[int, PartitionLog] = {}  # partition -> its log, written since the last deferred fsync
        self._sync_handle: asyncio.TimerHandle | None = None
        self._ready: asyncio.Future[None] | None = None  # one already-done future, handed to every caller with no wait

    def _done_future(self) -> asyncio.Future[None]:
        """An already-done future (shared: a done future can be neither cancelled nor completed again by a caller,
        and awaiting it does not suspend)."""
        done = self._ready
        # Its loop still running is the loop we run on (a coordinator log serves one loop), found without
        # get_running_loop, which costs a getpid system call on 3.11 (hot: every deferred-fsync state write).
        if done is None or not done.get_loop().is_running():
            done = asyncio.get_running_loop().create_future()
            done.set_result(None)
            self._ready = done
        return done

    @property
    def num_partitions(self) -> int:
        info = self._topics.registry.get(self.topic)
        return info.num_partitions if info is not None else 0

    def replay(self, partition: int, apply: RecordApply, on_marker: MarkerApply | None = None) -> int:
        """Feed every record of `partition` to `apply(offset, producer_id, producer_epoch, key, value)` (the ids of
        a transactional batch, -1 for any other), in offset order; returns the count. Keyless records are
        skipped; control batches are skipped too (Kafka's coordinator loader does the same), unless `on_marker`
        is given: then each transaction marker (COMMIT/ABORT) calls `on_marker(producer_id, producer_epoch,
        commit, coordinator_epoch)` in log order, as Kafka's loader calls replayEndTransactionMarker."""
        plog = self._topics.log(self.topic, partition)
        offset, end, count = plog.log_start_offset, plog.log_end_offset, 0
        while offset < end:
            data = plog.read(offset, READ_CHUNK, min_one_batch=True).data
            if not data:
                break
            for _pos, header, view in rec.iter_batch_views(data):
                if header.last_offset < offset:
                    continue
                offset = header.next_offset
                if header.is_control:
                    if on_marker is not None and header.base_offset >= plog.log_start_offset:
                        marker = read_end_txn_marker(view)
                        if marker is not None:
                            on_marker(header.producer_id, header.producer_epoch, marker.commit,
                                      marker.coordinator_epoch)
                    continue
                pid, epoch = ((header.producer_id, header.producer_epoch) if header.is_transactional
                              else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
                for record in rec.iter_records(view):
                    if record.offset < plog.log_start_offset or record.key is None:
                        continue
                    apply(record.offset, pid, epoch, record.key, record.value)
                    count += 1
        return count

    def end_offset(self, partition: int) -> int:
        """Where `partition`'s log ends: the offset of the next record appended."""
        end: int = self._topics.log(self.topic, partition).log_end_offset
        return end

    def append(self, partition: int, records: Sequence[KeyValue]) -> asyncio.Future[None]:
        """Append `records` now (one batch) and return a future done when they are durable. Raises
        AppendFailed if the append is refused. The future is the caller's own (a shield): a request cancelled
        while awaiting it (its client went away) cannot cancel the durability wait other requests share."""
        return self.append_at(partition, records)[1]

    def append_transactional(self, partition: int, records: Sequence[KeyValue], *,
                             producer_id: int, producer_epoch: int) -> asyncio.Future[None]:
        """As `append`, as one transactional batch of `producer_id`/`producer_epoch` (no sequence), as Kafka's
        coordinator runtime writes a transactional offset commit: its records stay pending until the
        transaction's marker (`append_marker`) is written to the partition."""
        return self.append_at(partition, records, producer_id=producer_id, producer_epoch=producer_epoch)[1]

    def append_at(self, partition: int, records: Sequence[KeyValue], *,
                  producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
                  ) -> tuple[int, asyncio.Future[None]]:
        """As `append`, also returning the offset of the first record (-1 when there are none)."""
        if not records:
            return -1, self.barrier_future(partition)
        info = self._topics.registry.get(self.topic)
        if info is None:
            raise AppendFailed(f"{self.topic}-{partition}: the topic does not exist")
        if producer_id < 0:
            batch, header = rec.build_keyed_batch(records)
        else:
            batch, header = rec.build_keyed_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                                                  transactional=True)
        # built here: the replica manager need not parse every record back (client batches it still checks)
        result, plog = self._replicas.append(info, partition, batch, allow_internal=True, built=header)
        if plog is None or result.error:
            # Too large a batch is the request's doing (a member with huge metadata): Kafka's coordinators answer
            # it without an error log; anything else is the storage's.
            name = getattr(result.error, "name", result.error)
            report = log.warning if name in _SIZE_ERRORS else log.error
            report("coordinator records not appended", topic=self.topic, partition=partition, error=name,
                   message=result.error_message)
            raise AppendFailed(f"{self.topic}-{partition}: {result.error!r} {result.error_message or ''}")
        return result.base_offset, self._durable(partition, plog)

    def append_marker(self, partition: int, *, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int) -> tuple[ErrorCode, asyncio.Future[None] | None]:
        """Append the COMMIT/ABORT control batch ending `producer_id`'s transaction on `partition` now, through the
        replica manager's marker path (so the partition's transaction state, LSO and aborted-transaction index
        follow it), and return NONE with a future done when durable, or the error of a refused marker; raises
        AppendFailed when the log could not take it. Call `load_transaction_state` first (the partition's
        transaction state is loaded in worker threads there, not on the loop here)."""
        code, plog = self._replicas.append_marker(TxnMarker(
            "", self.topic, partition, producer_id, producer_epoch, commit, coordinator_epoch, 0))
        if code == ErrorCode.KAFKA_STORAGE_ERROR or (code == ErrorCode.NONE and plog is None):
            raise AppendFailed(f"{self.topic}-{partition}: transaction marker not appended ({code.name})")
        if code != ErrorCode.NONE or plog is None:
            return code, None
        return code, self._durable(partition, plog)

    def has_ongoing_transaction(self, partition: int, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer, at this epoch, has a transaction open on `partition` (load its transaction state
        first)."""
        table = self._replicas.txn_table(self.topic, partition)
        return bool(table.has_ongoing_transaction(producer_id, producer_epoch))

    async def load_transaction_state(self, partitions: Iterable[int]) -> None:
        """Load the transaction state of `partitions` (worker threads) before markers are appended to them."""
        await self._replicas.ensure_loaded((self.topic, p) for p in partitions)

    def _durable(self, partition: int, plog: PartitionLog) -> asyncio.Future[None]:
        if self._fsync_interval_s > 0:
            return self._written(partition, plog)
        return self._sync(partition, plog)

    def _sync(self, partition: int, plog: PartitionLog) -> asyncio.Future[None]:
        fut = asyncio.ensure_future(self._replicas.make_durable([plog]))
        self._pending[partition] = fut
        fut.add_done_callback(functools.partial(self._done, partition))
        return asyncio.shield(fut)

    def _written(self, partition: int, plog: PartitionLog) -> asyncio.Future[None]:
        """Deferred fsync: done now (the append's os.write has returned); the fsync follows within the interval."""
        self._unsynced[partition] = plog
        if self._sync_handle is None:
            self._sync_handle = asyncio.get_running_loop().call_later(self._fsync_interval_s, self._sync_unsynced)
        return self._done_future()

    def _sync_unsynced(self) -> None:
        self._sync_handle = None
        unsynced, self._unsynced = self._unsynced, {}
        for partition, plog in unsynced.items():
            self._sync(partition, plog)

    def _sync_now(self, partition: int) -> None:
        """A barrier on a partition written since the last deferred fsync: fsync it now."""
        plog = self._unsynced.pop(partition, None)
        if plog is not None:
            self._sync(partition, plog)

    def partition_log(self, partition: int) -> PartitionLog:
        plog: PartitionLog = self._topics.log(self.topic, partition)
        return plog

    def offline(self, partition: int) -> bool:
        """The partition's log directory failed: its log can no longer be read (the broker is stopping), so a
        coordinator cannot reload from it and must answer errors instead. A log already closed by the broker's
        stop counts as offline too: a request that waited on the failed flush may resume after the stop closed
        the logs (it answered KeyError from the log lookup before)."""
        plog = self._topics.find_log(self.topic, partition)
        if plog is None:
            return True
        return bool(plog.failures.offline)

    def _done(self, partition: int, fut: asyncio.Future[None]) -> None:
        if self._pending.get(partition) is fut:
            del self._pending[partition]
        if not fut.cancelled():
            fut.exception()  # retrieved: callers that stopped waiting must not log "never retrieved"

    def barrier_future(self, partition: int) -> asyncio.Future[None]:
        """Done once what was appended to `partition` is as durable as an append's answer: fsynced, or with a
        deferred fsync written already (nothing to wait for: an answer without records, such as a share-partition
        load's ReadShareGroupState, need not start an fsync its writes would not have waited for; `barrier`,
        before the prune drops records, still fsyncs)."""
        if self._fsync_interval_s > 0:
            return self._done_future()
        fut = self._pending.get(partition)
        if fut is None:
            return self._done_future()
        return asyncio.shield(fut)

    async def barrier(self, partitions: Iterable[int]) -> None:
        """Wait until everything appended so far to `partitions` is fsynced (with a deferred fsync, fsync now)."""
        wanted = set(partitions)
        for p in wanted:
            self._sync_now(p)
        futs = [self._pending[p] for p in wanted if p in self._pending]
        if futs:
            await asyncio.shield(asyncio.gather(*futs))
