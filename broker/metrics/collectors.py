"""Scrape-time collectors: they read the broker's components when Prometheus asks, so nothing is updated on the
request path. Each looks its component up on the broker at collect time (a broker built without it, or before
it exists, exports nothing for it). Collect runs on the event loop (see http.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

PARTITION = ["topic", "partition"]
SHARE_PARTITION = ["group", "topic", "partition"]
GROUP = ["group", "type"]


class LogCollector:
    """Per partition log (internal topics included): size, start and end offsets, segments (Kafka's kafka.log Log
    metrics Size, LogStartOffset, LogEndOffset, NumLogSegments)."""

    def __init__(self, broker: Any) -> None:
        self._broker = broker

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily("shoal_log_size_bytes", "Bytes in the partition's log segments.", labels=PARTITION),
            GaugeMetricFamily("shoal_log_start_offset", "First offset of the partition's log.", labels=PARTITION),
            GaugeMetricFamily("shoal_log_end_offset", "Offset the partition's next record gets.", labels=PARTITION),
            GaugeMetricFamily("shoal_log_segments", "Segments of the partition's log.", labels=PARTITION),
        )

    def describe(self) -> tuple[Metric, ...]:
        return self._families()

    def collect(self) -> Iterator[Metric]:
        size, start, end, segments = families = self._families()
        logs = getattr(self._broker, "logs", None)
        if logs is not None:
            for (topic, partition), plog in logs.logs():
                labels = [topic, str(partition)]
                size.add_metric(labels, plog.size_bytes)
                start.add_metric(labels, plog.log_start_offset)
                end.add_metric(labels, plog.log_end_offset)
                segments.add_metric(labels, len(plog.segments))
        yield from families


class SharePartitionCollector:
    """Per share-partition loaded on this broker (group, topic, partition): the in-flight window and its states,
    the lag (KIP-1226: high watermark - start offset - records delivered-complete in the window), and counters
    since the share-partition was loaded: records acquired, acknowledged (accepted), archived and lock expiries."""

    def __init__(self, broker: Any) -> None:
        self._broker = broker

    @staticmethod
    def _families() -> tuple[Metric, ...]:
        def gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"shoal_share_partition_{name}", doc, labels=SHARE_PARTITION)

        def counter(name: str, doc: str) -> CounterMetricFamily:
            return CounterMetricFamily(f"shoal_share_partition_{name}", doc, labels=SHARE_PARTITION)

        return (
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

    def describe(self) -> tuple[Metric, ...]:
        return self._families()

    def collect(self) -> Iterator[Metric]:
        families = self._families()
        (start, in_flight, acquired, available, lag, acquired_total, acknowledged_total, archived_total,
         expiries) = families
        manager = getattr(self._broker, "share_partitions", None)
        logs = getattr(self._broker, "logs", None)
        if manager is not None:
            for sp in manager.loaded_partitions():
                inflight = sp.inflight
                labels = [sp.key[0], sp.topic, str(sp.key[2])]
                start.add_metric(labels, inflight.start_offset)
                in_flight.add_metric(labels, inflight.in_flight_count)
                acquired.add_metric(labels, inflight.acquired_count)
                available.add_metric(labels, inflight.available_count)
                plog = logs.find(sp.topic, sp.key[2]) if logs is not None else None
                if plog is not None:
                    done = inflight.acknowledged_count + inflight.archived_count
                    lag.add_metric(labels, max(0, plog.high_watermark - inflight.start_offset - done))
                acquired_total.add_metric(labels, inflight.acquired_total)
                acknowledged_total.add_metric(labels, inflight.acknowledged_total)
                archived_total.add_metric(labels, inflight.archived_total)
                expiries.add_metric(labels, inflight.expired_total)
        yield from families


class GroupCollector:
    """Per group (classic, consumer and share): members, and rebalances: the classic generation or the
    consumer/share group epoch, which moves once per rebalance and survives restarts (it is replayed from
    __consumer_offsets); plus groups per type and state."""

    def __init__(self, broker: Any) -> None:
        self._broker = broker

    @staticmethod
    def _families() -> tuple[Metric, ...]:
        return (
            GaugeMetricFamily("shoal_group_members", "Members of the group.", labels=GROUP),
            CounterMetricFamily("shoal_group_rebalances", "Rebalances of the group since it was created (classic: "
                                "generation id; consumer and share: group epoch).", labels=GROUP),
            GaugeMetricFamily("shoal_groups", "Groups by type and state.", labels=["type", "state"]),
        )

    def describe(self) -> tuple[Metric, ...]:
        return self._families()

    def collect(self) -> Iterator[Metric]:
        families = members, rebalances, groups = self._families()
        runtime = getattr(self._broker, "group_coordinator", None)
        coordinator = getattr(runtime, "coordinator", None)
        if coordinator is not None:
            states: dict[tuple[str, str], int] = {}
            kinds = (
                ("classic", coordinator.classic.groups, lambda g: g.generation_id, lambda g: g.state.value),
                ("consumer", coordinator.consumer.groups, lambda g: g.group_epoch, lambda g: g.state().value),
                ("share", coordinator.share.groups, lambda g: g.group_epoch, lambda g: g.state.value),
            )
            for kind, by_id, epoch, state in kinds:
                for gid, group in list(by_id.items()):
                    labels = [gid, kind]
                    members.add_metric(labels, len(group.members))
                    rebalances.add_metric(labels, epoch(group))
                    key = (kind, state(group))
                    states[key] = states.get(key, 0) + 1
            for (kind, state_name), count in sorted(states.items()):
                groups.add_metric([kind, state_name], count)
        yield from families
