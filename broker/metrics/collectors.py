"""Scrape-time collectors: they read the broker's components when Prometheus asks, so nothing is updated on the
request path. Each is given the components it reads (None: exports nothing for it).

Reading and building are split: `read()` copies the numbers into plain tuples and must run on the event loop (the
only thread that mutates the components); `build(rows)` makes the metric families (about 1 us per sample) and may
run anywhere. The endpoint reads every collector on the loop, puts the rows in `SNAPSHOTS` and lets the registry
collect and encode in a worker thread (contextvars follow `asyncio.to_thread`); `collect()` outside a scrape
(tests, `get_sample_value`) reads live, on the caller's thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from broker.groups.runtime import GroupCoordinatorRuntime
    from broker.log import GroupCommitFlusher, LogManager
    from broker.replica_manager import ReplicaManager
    from broker.server import Server
    from broker.share_partition.manager import SharePartitionManager
    from broker.txn.runtime import TransactionCoordinatorRuntime

# id(collector) -> rows read on the event loop, for the scrape in progress.
SNAPSHOTS: ContextVar[dict[int, Any] | None] = ContextVar("shoal_metrics_snapshots", default=None)

PARTITION = ["topic", "partition"]
SHARE_PARTITION = ["group", "topic", "partition"]
GROUP = ["group", "type"]


class LoopStateCollector:
    def read(self) -> Any:
        raise NotImplementedError

    def build(self, rows: Any) -> Iterable[Metric]:
        raise NotImplementedError

    def describe(self) -> Iterable[Metric]:
        return self.build(self.empty_rows())

    def empty_rows(self) -> Any:
        return []

    def collect(self) -> Iterable[Metric]:
        snapshots = SNAPSHOTS.get()
        if snapshots is None:
            return self.build(self.read())
        rows = snapshots.get(id(self))
        # Inside a threaded scrape without rows read on the loop: export nothing rather than read live state here.
        return self.build(rows if rows is not None else self.empty_rows())


class LogCollector(LoopStateCollector):
    """Per partition log (internal topics included): size, start and end offsets, segments (Kafka's kafka.log Log
    metrics Size, LogStartOffset, LogEndOffset, NumLogSegments)."""

    def __init__(self, logs: LogManager | None) -> None:
        self._logs = logs

    def read(self) -> list[tuple]:
        logs = self._logs
        if logs is None:
            return []
        return [(topic, partition, plog.size_bytes, plog.log_start_offset, plog.log_end_offset, len(plog.segments))
                for (topic, partition), plog in logs.logs()]

    def build(self, rows: list[tuple]) -> Iterator[Metric]:
        families = (
            GaugeMetricFamily("shoal_log_size_bytes", "Bytes in the partition's log segments.", labels=PARTITION),
            GaugeMetricFamily("shoal_log_start_offset", "First offset of the partition's log.", labels=PARTITION),
            GaugeMetricFamily("shoal_log_end_offset", "Offset the partition's next record gets.", labels=PARTITION),
            GaugeMetricFamily("shoal_log_segments", "Segments of the partition's log.", labels=PARTITION),
        )
        for topic, partition, *values in rows:
            labels = [topic, str(partition)]
            for family, value in zip(families, values, strict=True):
                family.add_metric(labels, value)
        yield from families


class SharePartitionCollector(LoopStateCollector):
    """Per share-partition loaded on this broker (group, topic, partition): the in-flight window and its states,
    the lag (KIP-1226: high watermark - start offset - records delivered-complete in the window), and counters
    since the share-partition was loaded: records acquired, acknowledged (accepted), archived and lock expiries."""

    def __init__(self, manager: SharePartitionManager | None, logs: LogManager | None) -> None:
        self._manager = manager
        self._logs = logs

    def read(self) -> list[tuple]:
        manager, logs = self._manager, self._logs
        if manager is None:
            return []
        rows = []
        for sp in manager.loaded_partitions():
            f = sp.inflight
            plog = logs.find(sp.topic, sp.key[2]) if logs is not None else None
            lag = None if plog is None else max(
                0, plog.high_watermark - f.start_offset - f.acknowledged_count - f.archived_count)
            rows.append((sp.key[0], sp.topic, sp.key[2], f.start_offset, f.in_flight_count, f.acquired_count,
                         f.available_count, lag, f.acquired_total, f.acknowledged_total, f.archived_total,
                         f.expired_total))
        return rows

    def build(self, rows: list[tuple]) -> Iterator[Metric]:
        def gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"shoal_share_partition_{name}", doc, labels=SHARE_PARTITION)

        def counter(name: str, doc: str) -> CounterMetricFamily:
            return CounterMetricFamily(f"shoal_share_partition_{name}", doc, labels=SHARE_PARTITION)

        families: tuple[GaugeMetricFamily | CounterMetricFamily, ...] = (
            gauge("start_offset", "Share-partition start offset (SPSO)."),
            gauge("in_flight_records", "Offsets between the start offset and the end offset (SPEO)."),
            gauge("acquired_records", "Records acquired by a consumer now (locked)."),
            gauge("available_records", "Records in the window available for delivery."),
            gauge("lag", "Records not yet delivered-complete: high watermark - start offset - acknowledged and "
                         "archived records in the window."),
            counter("acquisitions", "Records acquired (each delivery counts) since the share-partition loaded."),
            counter("acknowledged_records", "Records accepted since the share-partition loaded."),
            counter("archived_records", "Records archived (rejected, delivery limit, aborted, gaps) since the "
                                        "share-partition loaded."),
            counter("lock_expiries", "Acquired records whose acquisition lock expired since the share-partition "
                                     "loaded."),
        )
        for group, topic, partition, *values in rows:
            labels = [group, topic, str(partition)]
            for family, value in zip(families, values, strict=True):
                if value is not None:  # no lag without the partition's log (topic being deleted)
                    family.add_metric(labels, value)
        yield from families


class GroupCollector(LoopStateCollector):
    """Per group (classic, consumer, share and streams): members, and rebalances: the classic generation or the
    consumer/share/streams group epoch, which moves once per rebalance and survives restarts (it is replayed from
    __consumer_offsets); plus groups per type and state."""

    def __init__(self, runtime: GroupCoordinatorRuntime | None) -> None:
        self._runtime = runtime  # its coordinator is replaced when a partition reloads: read it at scrape time

    def read(self) -> list[tuple]:
        if self._runtime is None:
            return []
        coordinator = self._runtime.coordinator
        rows = [(gid, "classic", len(g.members), g.generation_id, g.state.value)
                for gid, g in coordinator.classic.groups.items()]
        rows += [(gid, "consumer", len(g.members), g.group_epoch, g.state().value)
                 for gid, g in coordinator.consumer.groups.items()]
        rows += [(gid, "share", len(g.members), g.group_epoch, g.state.value)
                 for gid, g in coordinator.share.groups.items()]
        rows += [(gid, "streams", len(g.members), g.group_epoch, g.state().value)
                 for gid, g in coordinator.streams.groups.items()]
        return rows

    def build(self, rows: list[tuple]) -> Iterator[Metric]:
        members = GaugeMetricFamily("shoal_group_members", "Members of the group.", labels=GROUP)
        rebalances = CounterMetricFamily("shoal_group_rebalances", "Rebalances of the group since it was created "
                                         "(classic: generation id; consumer, share and streams: group epoch).",
                                         labels=GROUP)
        groups = GaugeMetricFamily("shoal_groups", "Groups by type and state.", labels=["type", "state"])
        states: dict[tuple[str, str], int] = {}
        for gid, kind, count, epoch, state in rows:
            members.add_metric([gid, kind], count)
            rebalances.add_metric([gid, kind], epoch)
            states[(kind, state)] = states.get((kind, state), 0) + 1
        for (kind, state), count in sorted(states.items()):
            groups.add_metric([kind, state], count)
        yield members
        yield rebalances
        yield groups


class FlushCollector(LoopStateCollector):
    """Group commit: log flushes made (Kafka counts them in kafka.log LogFlushStats LogFlushRateAndTimeMs) and the
    waits they served (an acks=all produce, a marker, a coordinator write waits for its log's flush)."""

    def __init__(self, flusher: GroupCommitFlusher | None) -> None:
        self._flusher = flusher

    def empty_rows(self) -> Any:
        return 0, 0

    def read(self) -> Any:
        return (0, 0) if self._flusher is None else (self._flusher.flushes, self._flusher.waits)

    def build(self, rows: Any) -> Iterator[Metric]:
        flushes, waits = rows
        yield CounterMetricFamily("shoal_log_flushes", "Log flushes (fsyncs of one log's new data) made.",
                                  value=flushes)
        yield CounterMetricFamily("shoal_log_flush_waits", "Waits for a log flush; concurrent waits on one log share "
                                  "one flush (group commit).", value=waits)


class ServerCollector(LoopStateCollector):
    """Open connections per listener, share sessions, and per share group the records written to its dead-letter
    queue and the archived ones that got no DLQ copy (KIP-1191)."""

    def __init__(self, server: Server | None, share_partitions: SharePartitionManager | None) -> None:
        self._server = server
        self._manager = share_partitions

    def empty_rows(self) -> Any:
        return {}, 0, {}, {}

    def read(self) -> Any:
        per_listener: dict[str, int] = {}
        for conn in list(self._server.connections if self._server is not None else ()):
            per_listener[conn.info.listener] = per_listener.get(conn.info.listener, 0) + 1
        manager = self._manager
        if manager is None:
            return per_listener, 0, {}, {}
        return per_listener, len(manager.sessions), dict(manager.dlq.written), dict(manager.dlq.skipped)

    def build(self, rows: Any) -> Iterator[Metric]:
        per_listener, sessions, written, skipped = rows
        connections = GaugeMetricFamily("shoal_connections", "Open client connections.", labels=["listener"])
        for listener, count in sorted(per_listener.items()):
            connections.add_metric([listener], count)
        yield connections
        yield GaugeMetricFamily("shoal_share_sessions", "Share sessions open (KIP-932).", value=sessions)
        dlq = CounterMetricFamily("shoal_share_dlq_records", "Records written to the group's dead-letter queue.",
                                  labels=["group"])
        for group, count in sorted(written.items()):
            dlq.add_metric([group], count)
        yield dlq
        lost = CounterMetricFamily("shoal_share_dlq_skipped_records", "Records archived for the dead-letter queue "
                                   "that could not be written to it (no usable DLQ topic).", labels=["group"])
        for group, count in sorted(skipped.items()):
            lost.add_metric([group], count)
        yield lost


# Ids in these states have a transaction begun and not yet completed.
_OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


class TransactionCollector(LoopStateCollector):
    """The transaction coordinator's transactional ids, by state and open ones (Ongoing, PrepareCommit,
    PrepareAbort); and per partition the LSO lag (high watermark - last stable offset: what read_committed
    consumers cannot see yet) and the open transactions, only for partitions with an open transaction or a
    non-zero lag (whose transaction state is loaded), so the series stay few."""

    def __init__(self, coordinator: TransactionCoordinatorRuntime | None, replicas: ReplicaManager | None) -> None:
        self._coordinator = coordinator
        self._replicas = replicas

    def empty_rows(self) -> Any:
        return {}, []

    def read(self) -> Any:
        states = {} if self._coordinator is None else {
            state.display_name: count for state, count in self._coordinator.coordinator.state_counts().items()}
        partitions = [] if self._replicas is None else self._replicas.unstable_partitions()
        return states, partitions

    def build(self, rows: Any) -> Iterator[Metric]:
        states, partitions = rows
        yield GaugeMetricFamily("shoal_transactional_ids", "Transactional ids the transaction coordinator holds.",
                                value=sum(states.values()))
        yield GaugeMetricFamily("shoal_transactions_ongoing", "Transactions begun and not completed (Ongoing, "
                                "PrepareCommit, PrepareAbort).", value=sum(states.get(s, 0) for s in _OPEN_STATES))
        by_state = GaugeMetricFamily("shoal_transactions", "Transactional ids by transaction state.",
                                     labels=["state"])
        for state, count in sorted(states.items()):
            by_state.add_metric([state], count)
        yield by_state
        lag = GaugeMetricFamily("shoal_partition_lso_lag", "High watermark - last stable offset: records "
                                "read_committed consumers cannot read yet.", labels=PARTITION)
        open_txns = GaugeMetricFamily("shoal_partition_open_transactions", "Producers with a transaction open "
                                      "on the partition.", labels=PARTITION)
        for topic, partition, lag_records, open_count in sorted(partitions):
            lag.add_metric([topic, str(partition)], lag_records)
            open_txns.add_metric([topic, str(partition)], open_count)
        yield lag
        yield open_txns
