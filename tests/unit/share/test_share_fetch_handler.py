"""The ShareFetch/ShareAcknowledge handlers against a real share-partition manager and logs (no sockets)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from share_fakes import EARLIEST, broker_config, group_configs, make_manager

from broker.handlers.share_fetch import handle_share_acknowledge, handle_share_fetch
from broker.log.partition_log import PartitionLog
from protocol.codec import request_codec
from protocol.records import Record, build_batch
from tests.helpers.share_state import MemoryShareState

TOPIC_ID = uuid.uuid4()
CONFIG = {"group.share.max.share.sessions": 10, "group.share.partition.max.record.locks": 2000,
          "group.share.delivery.count.limit": 5, "group.share.record.lock.duration.ms": 30_000,
          "fetch.max.bytes": 57_671_680}


def make(tmp_path, store, partitions: int = 2):
    logs = [PartitionLog(tmp_path / f"t-{p}") for p in range(partitions)]
    info = SimpleNamespace(name="t", topic_id=TOPIC_ID, num_partitions=partitions)
    broker = SimpleNamespace(
        config=broker_config(CONFIG),
        topics=SimpleNamespace(registry=SimpleNamespace(by_id=lambda tid: info if tid == TOPIC_ID else None),
                               log=lambda name, p: logs[p]),
        share_state=store, node=SimpleNamespace(node_id=1, host="127.0.0.1", port=9092, rack=None),
        # no client quotas: MaxBytes as asked, never throttled
        quotas=SimpleNamespace(fetch_max_bytes=lambda _ctx: float("inf"), share_fetch_throttle=lambda *_a: 0))
    broker.share_partitions = make_manager(config=broker.config, topics=broker.topics, persister=store,
                                           group_configs=group_configs(broker_config(CONFIG), EARLIEST))
    return broker, logs


def ctx(broker, version: int = 1):
    # No authorizer: every ACL check passes (RequestContext.authorize without a security component).
    return SimpleNamespace(broker=broker, node=broker.node, api_version=version, connection=SimpleNamespace(id=1),
                           authorize=lambda *_args: True)


def request(api_key: int, body: dict, version: int = 1):
    codec = request_codec(api_key, version)
    return codec.decode(codec.encode(body))


def fetch_body(epoch: int, acks: dict[int, list[tuple[int, int, int]]] | None = None) -> dict:
    acks = acks or {}
    return {"group_id": "g", "member_id": "m", "share_session_epoch": epoch, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
            "topics": [{"topic_id": TOPIC_ID, "partitions": [
                {"partition_index": p, "acknowledgement_batches": [
                    {"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in acks.get(p, [])]}
                for p in (0, 1)]}],
            "forgotten_topics_data": []}


async def _both_writes_start_together(store: MemoryShareState, call) -> None:
    store.gating = True
    task = asyncio.get_running_loop().create_task(call)
    deadline = asyncio.get_running_loop().time() + 2
    while len(store.started) < 2 and asyncio.get_running_loop().time() < deadline and not task.done():
        await asyncio.sleep(0.01)
    started = sorted(store.started)
    store.gate.set()
    await task
    assert started == [0, 1], started  # the second write did not wait for the first one's fsync


def test_share_fetch_persists_acknowledgements_of_several_partitions_together(tmp_path):
    """Regression: acknowledgements riding on one ShareFetch were written one partition after another."""
    async def run():
        store = MemoryShareState()
        broker, logs = make(tmp_path, store)
        for plog in logs:
            plog.append(build_batch([Record(value=b"x")] * 3))
        # The first fetch loads the share-partitions one at a time and answers with the first that has records
        # (as Kafka); the second one serves the other.
        first = await handle_share_fetch(ctx(broker), request(78, fetch_body(0)))
        second = await handle_share_fetch(ctx(broker), request(78, fetch_body(1)))
        assert [sum(len(p["acquired_records"]) for t in r["responses"] for p in t["partitions"])
                for r in (first, second)] == [1, 1]
        await _both_writes_start_together(
            store, handle_share_fetch(ctx(broker), request(78, fetch_body(2, {0: [(0, 2, 1)], 1: [(0, 2, 1)]}))))

    asyncio.run(run())


def test_share_acknowledge_persists_several_partitions_together(tmp_path):
    async def run():
        store = MemoryShareState()
        broker, logs = make(tmp_path, store)
        for plog in logs:
            plog.append(build_batch([Record(value=b"x")] * 3))
        await handle_share_fetch(ctx(broker), request(78, fetch_body(0)))
        await handle_share_fetch(ctx(broker), request(78, fetch_body(1)))
        body = {"group_id": "g", "member_id": "m", "share_session_epoch": 2, "topics": [
            {"topic_id": TOPIC_ID, "partitions": [
                {"partition_index": p, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}]} for p in (0, 1)]}]}
        await _both_writes_start_together(store, handle_share_acknowledge(ctx(broker), request(79, body)))

    asyncio.run(run())
