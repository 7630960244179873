"""Partition-level APIs on a log whose directory is offline answer KAFKA_STORAGE_ERROR (56), as Kafka's
ReplicaManager.getPartitionOrException makes every one of them do (Produce, Fetch, ListOffsets, ShareFetch).

The broker runs in-process and is spoken to over TCP with raw requests. Its directory is taken offline through
the failure channel (what a failed fsync does); the broker's own stop on that failure is held back, so that the
requests answered in the window between the failure and the stop (those in flight) can be checked one by one.
"""

from __future__ import annotations

import asyncio

from broker.app import Broker
from broker.config import load_config
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import fetch_body, produce, topic_id
from tests.helpers.share_raw import acquired, fetch, join_until_assigned, part

FETCH, LIST_OFFSETS = 1, 2
LATEST, EARLIEST = -1, -2


def batch(n: int) -> bytes:
    return build_batch([Record(value=f"v{i}".encode(), timestamp=1000 + i) for i in range(n)])


def list_offsets(client: RawClient, topic: str, timestamp: int, version: int = 8):
    resp = client.call(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": timestamp}]}]})
    return resp.topics[0].partitions[0]


def test_every_partition_api_answers_storage_error_for_an_offline_log(tmp_path):
    async def run() -> None:
        config = load_config(None, [
            "listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path / 'data'}",
            "share.coordinator.state.topic.num.partitions=1", "offsets.topic.num.partitions=1",
            "group.share.min.heartbeat.interval.ms=50", "group.share.heartbeat.interval.ms=100"])
        broker = Broker(config)
        await broker.start()
        stops: list[str] = []
        broker._log_dir_failed = stops.append  # hold the broker's stop back: the window is what is tested
        try:
            await broker.topics.create_topic("t", num_partitions=2, replication_factor=-1, assignments=[],
                                             configs={}, validate_only=False)
            client = RawClient(broker.node.port)

            def before() -> None:
                tid = topic_id(client, "t")
                join_until_assigned(client, "g", "m", "t", 2)
                assert fetch(client, "g", "m", 0, tid, join=False).error_code == 0  # t-0's share-partition loads
                assert produce(client, "t", batch(3)).error_code == 0
                assert list_offsets(client, "t", LATEST).offset == 3

            await asyncio.to_thread(before)
            broker.topics.log("t", 0).failures.fail("injected fsync failure")
            deadline = asyncio.get_running_loop().time() + 10
            while not stops:  # the broker hears of it on its loop (and would stop once these are answered)
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.01)

            def after() -> None:
                tid = topic_id(client, "t")
                for ts in (LATEST, EARLIEST, 0):
                    p = list_offsets(client, "t", ts)
                    assert (p.error_code, p.offset, p.timestamp) == (ErrorCode.KAFKA_STORAGE_ERROR, -1, -1), (ts, p)
                p = list_offsets(client, "t", -3, version=7)  # max timestamp
                assert p.error_code == ErrorCode.KAFKA_STORAGE_ERROR, p
                f = client.call(FETCH, 12, fetch_body("t", 0)).responses[0].partitions[0]
                assert f.error_code == ErrorCode.KAFKA_STORAGE_ERROR and f.records in (None, b""), f
                assert produce(client, "t", batch(1)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
                # t-0's share-partition is in memory, t-1's is not loaded yet: both answer the storage error, with
                # Kafka's message, and nothing is acquired from the offline log.
                resp = fetch(client, "g", "m", 1, tid, partitions=(0, 1), max_wait_ms=200)
                assert resp.error_code == 0, resp
                for p in (0, 1):
                    x = part(resp, p)
                    assert x.error_code == ErrorCode.KAFKA_STORAGE_ERROR, (p, x)
                    assert x.error_message == f"Partition t-{p} is in an offline log directory"
                    assert acquired(resp, p) == []

            await asyncio.to_thread(after)
            client.close()
        finally:
            await asyncio.wait_for(broker.stop(), 30)

    asyncio.run(run())
