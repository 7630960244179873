"""Component `console`: the read-only share-group console (a page, one script, one stylesheet) and the JSON API it
polls, mounted on the metrics listener (`metrics.prometheus.listener`) when that listener is configured.

No second copy of state: every answer reads the broker's components at request time, on the event loop (the only
thread that changes them), as the metrics collectors do. The work per request is bounded: lists are capped (a
`truncated` flag says so), a share-partition's window is returned as its pieces (runs of offsets with one state,
owner, delivery count and lock deadline, `broker/share_partition/pieces.py`), never record by record, and at most
`MAX_RANGES` of them; the DLQ view reads a bounded tail of each DLQ partition and decodes it in a worker thread.
Nothing here loads a share-partition or changes any state.

API (JSON):
- `GET /api/topics`: topics with their partitions (log start offset, high watermark, end offset, size).
- `GET /api/groups`: classic, consumer, share and streams groups with members; consumer lag from committed
  offsets; for a share group its share-partitions loaded on this broker (state counts and lag) and its DLQ topic.
- `GET /api/share-groups/{group}/partitions/{topic}/{partition}`: one share-partition's in-flight window.
- `GET /api/share-groups/{group}/dlq`: the latest records of the group's dead-letter queue with their headers.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

from broker.config.group_config import GroupConfig
from broker.share_partition.inflight import STATE_NAMES
from protocol.records import iter_batch_views, iter_records

if TYPE_CHECKING:
    from aiohttp import web

    from broker.cluster.manager import TopicManager
    from broker.groups.runtime import GroupCoordinatorRuntime
    from broker.log import LogManager
    from broker.share_partition.manager import SharePartitionManager
    from broker.share_partition.partition import SharePartition

MAX_TOPICS = 500
MAX_PARTITIONS = 2000  # partitions over all topics in one answer
MAX_GROUPS = 500
MAX_MEMBERS = 200  # per group
MAX_OFFSETS = 1000  # committed offsets (lag rows) per group
MAX_SHARE_PARTITIONS = 200  # per share group
MAX_RANGES = 1000  # pieces of one share-partition window
DLQ_RECORDS = 20  # latest records per DLQ partition
DLQ_PARTITIONS = 16
DLQ_READ_BYTES = 256 * 1024  # per DLQ partition (more only for a single larger batch, as Fetch does)
DLQ_HEADER_PREFIX = "__dlq."
STATIC = {"console.js": "application/javascript", "console.css": "text/css"}


# The page runs only its own script and stylesheet, talks only to this listener, and is not framed elsewhere.
PAGE_HEADERS = {"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                                           "connect-src 'self'; img-src 'self'; frame-ancestors 'none'",
                "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def _json(body: Any, status: int = 200) -> web.Response:
    from aiohttp import web  # noqa: PLC0415 - aiohttp only once the metrics listener serves (start-up time)

    return web.json_response(body, status=status, headers={"Cache-Control": "no-store",
                                                           "X-Content-Type-Options": "nosniff"})


def _tasks(tasks: Mapping[str, Iterable[int]], kind: str) -> list[dict[str, Any]]:
    """A streams member's tasks in the shape the page shows an assignment in (a name and its partitions)."""
    return [{"topic": f"subtopology {s}{kind}", "partitions": sorted(tasks[s])} for s in sorted(tasks)]


def _decode_tail(data: bytes | memoryview, partition: int, keep: int) -> list[dict[str, Any]]:
    """The last `keep` data records of `data` (whole batches) with their DLQ context headers (`__dlq.` ones: a copied
    record's own headers, keys and values are the application's data and are not shown, only their sizes)."""
    out: list[dict[str, Any]] = []
    for _pos, header, view in iter_batch_views(data):
        if header.is_control:
            continue
        for r in iter_records(view):
            out.append({"partition": partition, "offset": r.offset,
                        "timestamp": r.timestamp if r.timestamp is not None else header.max_timestamp,
                        "headers": {k: (v.decode("utf-8", "replace") if v is not None else None)
                                    for k, v in r.headers if k.startswith(DLQ_HEADER_PREFIX)},
                        "key_bytes": None if r.key is None else len(r.key),
                        "value_bytes": None if r.value is None else len(r.value)})
    return out[-keep:]


class Console:
    def __init__(self, *, topics: TopicManager, logs: LogManager, group_coordinator: GroupCoordinatorRuntime,
                 share_partitions: SharePartitionManager,
                 group_configs: Callable[[str], GroupConfig]) -> None:
        self._topics = topics
        self._logs = logs
        self._groups = group_coordinator  # its coordinator is replaced when a partition reloads: read it per call
        self._share = share_partitions
        self._group_configs = group_configs

    # --- routes ----------------------------------------------------------------------------------------------
    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/", self._page)
        router.add_get("/static/{name}", self._static)
        router.add_get("/api/topics", lambda _r: self._answer(self.topics))
        router.add_get("/api/groups", lambda _r: self._answer(self.groups))
        router.add_get("/api/share-groups/{group}/partitions/{topic}/{partition}", self._share_partition)
        router.add_get("/api/share-groups/{group}/dlq", self._dlq)

    @staticmethod
    async def _answer(view: Callable[[], dict[str, Any]]) -> web.Response:
        return _json(view())

    @staticmethod
    def _asset(name: str) -> bytes:
        return resources.files("broker.console").joinpath("static", name).read_bytes()

    async def _page(self, _request: web.Request) -> web.Response:
        from aiohttp import web  # noqa: PLC0415 - as in _json

        return web.Response(body=self._asset("index.html"), content_type="text/html", charset="utf-8",
                            headers={"Cache-Control": "no-store", **PAGE_HEADERS})

    async def _static(self, request: web.Request) -> web.Response:
        from aiohttp import web  # noqa: PLC0415 - as in _json

        name = request.match_info["name"]
        if name not in STATIC:  # a fixed list: no path from the request reaches the file system
            raise web.HTTPNotFound()
        return web.Response(body=self._asset(name), content_type=STATIC[name], charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})

    async def _share_partition(self, request: web.Request) -> web.Response:
        try:
            partition = int(request.match_info["partition"])
        except ValueError:
            return _json({"error": "partition must be an integer"}, 400)
        view = self.share_partition(request.match_info["group"], request.match_info["topic"], partition)
        if view is None:
            return _json({"error": "share-partition not loaded on this broker"}, 404)
        return _json(view)

    async def _dlq(self, request: web.Request) -> web.Response:
        return _json(await self.dlq(request.match_info["group"]))

    # --- views (on the loop) -----------------------------------------------------------------------------------
    def topics(self) -> dict[str, Any]:
        infos = sorted(self._topics.registry.all(), key=lambda i: (i.internal, i.name))
        out, budget = [], MAX_PARTITIONS
        truncated = len(infos) > MAX_TOPICS
        for info in infos[:MAX_TOPICS]:
            if budget <= 0:
                truncated = True
                break
            partitions = []
            for p in range(min(info.num_partitions, budget)):
                plog = self._logs.find(info.name, p)
                partitions.append({"partition": p} if plog is None else {
                    "partition": p, "log_start_offset": plog.log_start_offset,
                    "high_watermark": plog.high_watermark, "log_end_offset": plog.log_end_offset,
                    "size_bytes": plog.size_bytes, "segments": len(plog.segments)})
            budget -= len(partitions)
            truncated = truncated or len(partitions) < info.num_partitions
            out.append({"name": info.name, "topic_id": str(info.topic_id), "internal": info.internal,
                        "num_partitions": info.num_partitions, "partitions": partitions})
        return {"topics": out, "truncated": truncated}

    def groups(self) -> dict[str, Any]:
        coordinator = self._groups.coordinator
        by_type = (("classic", coordinator.classic.groups), ("consumer", coordinator.consumer.groups),
                   ("share", coordinator.share.groups), ("streams", coordinator.streams.groups))
        # The first MAX_GROUPS by (type, id): rows are built for those only.
        chosen = sorted((kind, gid) for kind, groups in by_type for gid in groups)
        total = len(chosen)
        loaded: dict[str, list[SharePartition]] = {}
        for sp in self._share.loaded_partitions():
            loaded.setdefault(sp.key[0], []).append(sp)
        rows = []
        for kind, gid in chosen[:MAX_GROUPS]:
            if kind == "classic":
                rows.append(self._classic(gid, coordinator.classic.groups[gid]))
            elif kind == "consumer":
                rows.append(self._consumer(gid, coordinator.consumer.groups[gid]))
            elif kind == "streams":
                rows.append(self._streams(gid, coordinator.streams.groups[gid]))
            else:
                rows.append(self._share_group(gid, coordinator.share.groups[gid], loaded.get(gid, [])))
        return {"groups": rows, "truncated": total > MAX_GROUPS}

    def _classic(self, gid: str, g: Any) -> dict[str, Any]:
        offsets, truncated = self._consumer_lag(gid)
        return {"group_id": gid, "type": "classic", "state": g.state.value, "epoch": g.generation_id,
                "protocol_type": g.protocol_type, "member_count": len(g.members), "members": [
                    {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                     "instance_id": m.group_instance_id, "assignment": None}
                    for m in itertools.islice(g.members.values(), MAX_MEMBERS)],
                "offsets": offsets, "offsets_truncated": truncated}

    def _consumer(self, gid: str, g: Any) -> dict[str, Any]:
        offsets, truncated = self._consumer_lag(gid)
        return {"group_id": gid, "type": "consumer", "state": g.state().value, "epoch": g.group_epoch,
                "member_count": len(g.members), "members": [
                    {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                     "instance_id": m.instance_id, "member_epoch": m.member_epoch,
                     "assignment": self._assignment(m.assigned_partitions)}
                    for m in itertools.islice(g.members.values(), MAX_MEMBERS)],
                "offsets": offsets, "offsets_truncated": truncated}

    def _streams(self, gid: str, g: Any) -> dict[str, Any]:
        """A streams group (KIP-1071): its members' tasks shown as "subtopology S[partitions]" (standby tasks
        marked), and the lag of the offsets it commits on its source topics."""
        offsets, truncated = self._consumer_lag(gid)
        return {"group_id": gid, "type": "streams", "state": g.state().value, "epoch": g.group_epoch,
                "member_count": len(g.members), "members": [
                    {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                     "instance_id": m.instance_id, "member_epoch": m.member_epoch,
                     "assignment": _tasks(m.assigned.active_sets(), "") + _tasks(m.assigned.standby, " standby")}
                    for m in itertools.islice(g.members.values(), MAX_MEMBERS)],
                "offsets": offsets, "offsets_truncated": truncated}

    def _share_group(self, gid: str, g: Any, loaded: list[SharePartition]) -> dict[str, Any]:
        parts = sorted(loaded, key=lambda sp: (sp.topic, sp.key[2]))
        return {"group_id": gid, "type": "share", "state": g.state.value, "epoch": g.group_epoch,
                "member_count": len(g.members), "members": [
                    {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                     "member_epoch": m.member_epoch, "assignment": self._assignment(m.assigned_partitions)}
                    for m in itertools.islice(g.members.values(), MAX_MEMBERS)],
                "dlq_topic": self._group_configs(gid).errors_deadletterqueue_topic_name or None,
                "share_partitions": [self._share_summary(sp) for sp in parts[:MAX_SHARE_PARTITIONS]],
                "share_partitions_truncated": len(parts) > MAX_SHARE_PARTITIONS}

    def share_partition(self, group: str, topic: str, partition: int) -> dict[str, Any] | None:
        info = self._topics.registry.get(topic)
        if info is None:
            return None
        sp = next((s for s in self._share.loaded_partitions()
                   if s.key == (group, info.topic_id, partition) and not s.dead), None)
        if sp is None:
            return None
        f = sp.inflight
        ranges = [{"first": p.first, "last": p.last, "state": STATE_NAMES.get(p.state, str(p.state)),
                   "delivery_count": p.count, "member": p.owner,
                   "lock_deadline_ms": p.deadline if p.owner is not None else None}
                  for p in itertools.islice(f.iter_pieces(), MAX_RANGES)]
        return {**self._share_summary(sp), "now_ms": self._share.now_ms(),
                "delivery_count_limit": f.delivery_count_limit, "ranges": ranges,
                "ranges_truncated": f.piece_count > MAX_RANGES}

    async def dlq(self, group: str) -> dict[str, Any]:
        name = self._group_configs(group).errors_deadletterqueue_topic_name or None
        info = self._topics.registry.get(name) if name else None
        if info is None:
            return {"group": group, "topic": name, "exists": False, "records": []}
        reads = []
        for p in range(min(info.num_partitions, DLQ_PARTITIONS)):
            plog = self._logs.find(info.name, p)
            if plog is None:
                continue
            start = max(plog.log_start_offset, plog.high_watermark - DLQ_RECORDS)
            if start >= plog.high_watermark:
                continue
            data = plog.read(start, DLQ_READ_BYTES, min_one_batch=True).data  # whole batches, bounded
            reads.append((p, data))
        records: list[dict[str, Any]] = []
        for p, data in reads:
            records += await asyncio.to_thread(_decode_tail, data, p, DLQ_RECORDS)
        records.sort(key=lambda r: (r["timestamp"] or 0, r["partition"], r["offset"]), reverse=True)
        return {"group": group, "topic": name, "exists": True, "records": records[:DLQ_RECORDS]}

    # --- helpers -----------------------------------------------------------------------------------------------
    def _assignment(self, assignment: Any) -> list[dict[str, Any]]:
        out = []
        for tid, parts in assignment.items():
            info = self._topics.registry.by_id(tid)
            out.append({"topic": info.name if info is not None else str(tid), "partitions": sorted(parts)})
        return sorted(out, key=lambda a: a["topic"])

    def _consumer_lag(self, gid: str) -> tuple[list[dict[str, Any]], bool]:
        offsets = self._groups.coordinator.offsets.group_offsets(gid)
        out: list[dict[str, Any]] = []
        for topic, parts in offsets.items():
            for partition, om in parts.items():
                if len(out) >= MAX_OFFSETS:
                    return out, True
                plog = self._logs.find(topic, partition)
                hw = None if plog is None else plog.high_watermark
                out.append({"topic": topic, "partition": partition, "committed_offset": om.offset,
                            "high_watermark": hw, "lag": None if hw is None else max(0, hw - om.offset)})
        out.sort(key=lambda r: (r["topic"], r["partition"]))
        return out, False

    def _share_summary(self, sp: SharePartition) -> dict[str, Any]:
        f = sp.inflight
        plog = self._logs.find(sp.topic, sp.key[2])
        hw = None if plog is None else plog.high_watermark
        return {"group": sp.key[0], "topic": sp.topic, "partition": sp.key[2], "start_offset": f.start_offset,
                "end_offset": f.end_offset, "high_watermark": hw, "in_flight": f.in_flight_count,
                "available": f.available_count, "acquired": f.acquired_count,
                "acknowledged": f.acknowledged_count, "archived": f.archived_count,
                "lag": None if hw is None else max(0, hw - f.start_offset - f.acknowledged_count - f.archived_count),
                "state_epoch": f.state_epoch}
