"""The streaming reader: the driver-side runner process is the share group's only member for this query.

Offsets are micro-batch sequence numbers ({"seq": n}), not Kafka offsets: the share group, not Spark, decides
which records a batch gets. Where PySpark 4.3 calls what, and why the protocol below is at-least-once (why it is
built this way: docs/spark-source.md):

- `latestOffset(start, limit)` (runner): joins the group the first time (heartbeat thread, SIGTERM handler),
  ACCEPTs every held batch with seq <= start (Spark calls latestOffset(start) only once batch `start` is in the
  commit log), then acquires up to the read limit and maxBytesPerTrigger, keeps it as batch start+1 and returns
  {"seq": start+1}; nothing acquired -> returns `start` (no batch). The first fetch long-polls pollTimeoutMs.
- `partitions(start, end)` (runner): the held data of the batch as InputPartitions; a batch that is not held
  (replayed from the checkpoint after a restart) is empty: the broker redelivers its records, whose old session
  died with the old process.
- `read(partition)` (executor): decodes the raw record batches into Arrow.
- `commit(end)` (runner): ACCEPTs held batches <= end again, idempotently (Spark calls it one batch late and never
  for the last batch; after a restart it may name a batch of the previous process, which is simply not held).
- Acquiring ahead (option acquireAhead, default on): once latestOffset has handed Spark batch n, a background
  thread acquires the records of batch n+1 (and sends the ACCEPTs of batch n-1, which Spark has committed), so
  the next latestOffset finds them there instead of waiting for a ShareFetch while the executors idle. Those
  records are held like a batch in progress (renewed, released by stop(), redelivered by the broker after a
  crash); the thread gets only what the broker's per-partition lock limit leaves beside batch n.
- A keeper thread RENEWs the locks of held batches every lockRenewIntervalMs (default: a third of the broker's
  acquisition lock timeout), so a micro-batch slower than the lock duration is not redelivered to another member.
- `stop()` (runner, only reached through the SIGTERM handler or after an error): RELEASEs what is held, ends the
  share session and leaves the group.
- availableNow: the end offsets at `prepareForTriggerAvailableNow` bound the run; records acquired beyond them are
  released at once and their partitions no longer fetched; the run ends when a fetch returns nothing more.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from dataclasses import dataclass, field

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from shoal_client import ACCEPT, RELEASE, RENEW, Acquired, ConnectionLost, ShareGroupMember, TopicIdPartition
from shoal_client.member import AckKey
from shoal_spark import partitions as parts
from shoal_spark.ahead import AcquireAhead
from shoal_spark.options import SourceOptions

log = logging.getLogger("shoal_spark")

_UNBOUNDED_RECORDS = 2**31 - 1


@dataclass
class HeldBatch:
    acquired: list[Acquired]
    renewed_at: float = field(default_factory=time.monotonic)

    def ranges(self, kind: int) -> dict[AckKey, list[tuple[int, int, int]]]:
        out: dict[AckKey, list[tuple[int, int, int]]] = {}
        for a in self.acquired:  # each to the broker that acquired it
            out.setdefault(a.ack_key, []).extend((first, last, kind) for first, last, _ in a.ranges)
        return out


def _merge(into: dict[AckKey, list], more: dict[AckKey, list]) -> None:
    for tp, ranges in more.items():
        into.setdefault(tp, []).extend(ranges)


def _seq(offset: dict | None) -> int:
    return int(offset["seq"]) if offset else 0


class ShareStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        # No I/O here: the reader is also built (and pickled) in planner and executor processes.
        options.check_for("stream")
        self.options = options
        self._member: ShareGroupMember | None = None
        self._held: dict[int, HeldBatch] = {}
        self._lock: threading.Lock | None = None
        self._keeper: threading.Thread | None = None
        self._stopping: threading.Event | None = None
        self._available_now = False
        self._end_offsets: dict[TopicIdPartition, int] | None = None
        self._exhausted: set[TopicIdPartition] = set()
        self._ahead: AcquireAhead | None = None

    def __getstate__(self) -> dict:
        # Executors get copies for read(); runtime state never travels.
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        type(self).__init__(self, state["options"])

    # ------------------------------------------------------------------ runner-side state
    def _connect(self) -> ShareGroupMember:
        if self._member is not None:
            return self._member
        o = self.options
        member = ShareGroupMember(o.bootstrap_servers, o.group_id, o.topics, client_id=o.client_id,
                                  request_timeout_s=o.request_timeout_ms / 1000)
        member.start()
        # A new member's first heartbeat answers no partition (they are assigned once initialized): wait for
        # them, or an availableNow run would take the end offsets of nothing and stop at once.
        member.wait_for_assignment(o.request_timeout_ms / 1000)
        self._member = member
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        if self.options.acquire_ahead:
            self._ahead = AcquireAhead(self._acquire_ahead, lambda a: not member.still_held(a))
        self._keeper = threading.Thread(target=self._keep_locks, name="shoal-lock-keeper", daemon=True)
        self._keeper.start()
        _install_sigterm_handler()
        return member

    def _keep_locks(self) -> None:
        """RENEW the locks of held batches before they expire (runs between the engine's calls, too)."""
        assert self._stopping is not None and self._lock is not None
        while not self._stopping.wait(0.2):
            member = self._member
            if member is None:
                return
            interval = self._renew_interval_s(member)
            now = time.monotonic()
            with self._lock:
                due = [h for h in self._held.values() if now - h.renewed_at >= interval]
                renew: dict[AckKey, list] = {}
                for h in due:
                    _merge(renew, h.ranges(RENEW))
            ahead = self._ahead
            ahead_due = ahead is not None and now - ahead.renewed_at >= interval
            if ahead_due:
                assert ahead is not None
                _merge(renew, HeldBatch(ahead.held()).ranges(RENEW))
            if not renew:
                continue
            try:
                errors = member.acknowledge(renew, renew=True)
            except Exception as err:  # keep renewing; the next attempt may work
                log.warning("shoal: renewing record locks failed: %r", err)
                continue
            if errors:
                log.warning("shoal: record locks could not be renewed for %s (the broker may redeliver them)",
                            errors)
            for h in due:
                h.renewed_at = now
            if ahead_due:
                assert ahead is not None
                ahead.renewed_at = now

    def _renew_interval_s(self, member: ShareGroupMember) -> float:
        if self.options.lock_renew_interval_ms is not None:
            return self.options.lock_renew_interval_ms / 1000
        return (member.lock_timeout_ms or 30_000) / 3000

    def _take_done(self, upto: int) -> dict[AckKey, list]:
        """Remove and return (as ACCEPT acknowledgements) every held batch with seq <= upto."""
        acks: dict[AckKey, list] = {}
        if self._lock is None:
            return acks
        with self._lock:
            for seq in [s for s in self._held if s <= upto]:
                _merge(acks, self._held.pop(seq).ranges(ACCEPT))
        return acks

    # ------------------------------------------------------------------ engine calls (runner process)
    def initialOffset(self) -> dict:
        return {"seq": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_records_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        seq = _seq(start)
        try:
            member = self._connect()
            if self._available_now and self._end_offsets is None:
                self._end_offsets = member.end_offsets()
        except ConnectionLost as err:
            if self._available_now:
                raise  # "nothing new" would end the run as if the topics were drained
            # The broker may come (back) later: no new data this trigger, try again at the next one.
            log.warning("shoal: cannot reach the broker yet (%s); no new data this trigger", err)
            time.sleep(self.options.poll_timeout_ms / 1000)
            return {"seq": seq}
        acks = self._take_done(seq)
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else _UNBOUNDED_RECORDS
        max_bytes = self.options.max_bytes_per_trigger
        ahead = self._ahead
        acquired: list[Acquired] = []
        if ahead is not None:
            try:
                acquired = ahead.take(max_records)
            except Exception as err:  # acquire now instead; a lasting failure raises there
                log.warning("shoal: acquiring ahead failed (%r); acquiring now", err)
        if acquired:
            # The ACCEPTs of the committed batches go with the next acquisition, in the background.
            self._hold(seq + 1, acquired)
            ahead.start(acks, max_records - ahead.count, max_bytes - ahead.bytes)  # type: ignore[union-attr]
            return {"seq": seq + 1}
        acquired = self._acquire(member, acks, max_records, max_bytes)
        if not acquired:
            return {"seq": seq}
        self._hold(seq + 1, acquired)
        if ahead is not None:
            ahead.start({}, max_records - ahead.count, max_bytes - ahead.bytes)
        return {"seq": seq + 1}

    def _hold(self, seq: int, acquired: list[Acquired]) -> None:
        assert self._lock is not None
        with self._lock:
            self._held[seq] = HeldBatch(acquired)

    def _acquire_ahead(self, acks: dict, max_records: int, max_bytes: int) -> list[Acquired]:
        """AcquireAhead's acquisition (background thread): send `acks`, take what is there without waiting."""
        member = self._member
        if member is None:  # stopped meanwhile
            return []
        # Whole batches even under a row limit: AcquireAhead.take hands Spark at most the limit and holds the rest
        # for the next micro-batch.
        return self._acquire(member, acks, max_records, max_bytes, wait_ms=0, whole_batches=True)

    def _acquire(self, member: ShareGroupMember, acks: dict, max_records: int, max_bytes: int,
                 wait_ms: int | None = None, whole_batches: bool = False) -> list[Acquired]:
        got: list[Acquired] = []
        count = size = 0
        if wait_ms is None:
            wait_ms = self.options.poll_timeout_ms
        # A row limit (Spark's ReadMaxRows: never more rows) needs each fetch to stop at the rows left
        # (record_limit), unless the caller splits what comes back. Otherwise whole batches (batch_optimized): a
        # record_limit fetch cut by the share-partition's lock limit splits a batch, whose bytes then travel again
        # with the next fetch.
        whole_batches = whole_batches or max_records >= _UNBOUNDED_RECORDS
        mode = "batch_optimized" if whole_batches else "record_limit"
        while count < max_records and size < max_bytes:
            wanted = None
            if self._end_offsets is not None:
                wanted = [tp for tp in member.assignment() if tp not in self._exhausted]
                if not wanted:
                    break
            want_records, want_bytes = max_records - count, max_bytes - size
            result = member.fetch(max_records=want_records, max_bytes=want_bytes, max_wait_ms=wait_ms,
                                  acknowledgements=acks, partitions=wanted, acquire_mode=mode)
            if acks and result.ack_errors:
                log.warning("shoal: acknowledgements failed for %s: their records will be delivered again",
                            result.ack_errors)
            acks = {}
            fresh, released = self._bound_to_end(member, result.acquired)
            if not result.acquired:
                break
            got += fresh
            count += sum(a.count for a in fresh)
            size += sum(len(a.records) for a in fresh)
            if not released and result.count < want_records and result.bytes < want_bytes:
                # The broker handed out all it could (no limit was reached): asking again at once finds nothing.
                # (After an availableNow release, partitions changed: ask again.)
                break
            wait_ms = 0  # more only if it is there already
        if acks:  # no fetch carried them (nothing to fetch: limits reached, availableNow partitions exhausted)
            errors = member.acknowledge(acks)
            if errors:
                log.warning("shoal: acknowledgements failed for %s: their records will be delivered again", errors)
        return got

    def _bound_to_end(self, member: ShareGroupMember, acquired: list[Acquired]) -> tuple[list[Acquired], bool]:
        """availableNow: release what lies beyond the end offsets taken at the start, stop fetching there.
        Returns what is kept and whether anything was released."""
        ends = self._end_offsets
        if ends is None:
            return acquired, False
        keep: list[Acquired] = []
        release: dict[AckKey, list] = {}
        for a in acquired:
            end = ends.get(a.key, 0)
            inside = [(f, min(last, end - 1), d) for f, last, d in a.ranges if f < end]
            beyond = [(max(f, end), last, RELEASE) for f, last, _ in a.ranges if last >= end]
            if beyond:
                release.setdefault(a.ack_key, []).extend(beyond)
                self._exhausted.add(a.key)
            if inside:
                keep.append(dataclasses.replace(a, ranges=inside))
        if release:
            errors = member.acknowledge(release)
            if errors:
                log.warning("shoal: releasing records past the availableNow end failed for %s", errors)
        return keep, bool(release)

    def partitions(self, start: dict, end: dict) -> list:
        chunks: list[parts.Chunk] = []
        lock = self._lock or threading.Lock()
        with lock:
            for seq in range(_seq(start) + 1, _seq(end) + 1):
                held = self._held.get(seq)
                if held is None:
                    log.info("shoal: batch %d is not held by this process (replayed after a restart): empty; the "
                             "broker delivers its records again", seq)
                    continue
                chunks += [parts.Chunk(a.topic, a.partition, a.records, tuple(a.ranges)) for a in held.acquired]
        o = self.options
        max_partitions = o.max_partitions or parts.default_max_partitions(chunks, o.min_partitions)
        return parts.plan(chunks, o.min_partitions, max_partitions)

    def read(self, partition):
        return parts.read(partition)

    def commit(self, end: dict) -> None:
        acks = self._take_done(_seq(end))
        if acks and self._member is not None:
            errors = self._member.acknowledge(acks)
            if errors:
                log.warning("shoal: acknowledgements failed for %s: their records will be delivered again", errors)

    def stop(self) -> None:
        member = self._member
        if self._stopping is not None:
            self._stopping.set()
        if member is None:
            return
        release: dict[AckKey, list] = {}
        if self._ahead is not None:
            # Let an acquisition in progress finish first: what it gets is released with the rest (closing the
            # member under it would leave its records to lock expiry).
            if not self._ahead.wait(self.options.request_timeout_ms / 1000):
                log.warning("shoal: an acquisition still runs at stop; the broker frees its records when the "
                            "session ends")
            _merge(release, HeldBatch(self._ahead.clear()).ranges(RELEASE))
        self._member = None
        if self._lock is not None:
            with self._lock:
                for held in self._held.values():
                    _merge(release, held.ranges(RELEASE))
                self._held.clear()
        member.close(release)


def _on_sigterm(signum, frame) -> None:
    # PySpark stops the runner with SIGTERM and does not call stop(); SystemExit unwinds to the runner's
    # `finally: reader.stop()`, which releases what the query holds. A second SIGTERM (PySpark sends more than
    # one) must not interrupt that clean-up.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(0)


def _install_sigterm_handler() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
