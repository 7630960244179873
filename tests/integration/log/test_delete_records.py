"""DeleteRecords (api 21) end to end: confluent-kafka's AdminClient.delete_records over TCP moves the log start
offset; consumers from earliest, consumer groups whose committed offset fell below it (auto.offset.reset) and
share groups resume at the new start; Kafka's errors; every version over raw requests; a kill -9 keeps it."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from protocol.errors import ErrorCode
from tests.helpers import share_consumers as share
from tests.helpers.broker_process import start_broker
from tests.helpers.confluent_clients import admin_client, create_topic, produce_all
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import LIST_OFFSETS, fetch_body
from tests.helpers.waiting import wait_until

DELETE_RECORDS = 21
SMALL_SEGMENTS = {"internal.segment.bytes": "1500"}  # ~20 records per segment: deletions drop whole ones


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    proc = start_broker(tmp_path_factory.mktemp("delrec"))
    try:
        yield proc
    finally:
        proc.stop()


def _values(n: int) -> list[bytes]:
    return [f"value-{i:04d}-".encode() * 4 for i in range(n)]


def _topic(node, name: str, n: int = 100, partitions: int = 1, config: dict | None = None) -> None:
    create_topic(node.bootstrap, name, partitions, config or SMALL_SEGMENTS)
    for p in range(partitions):
        # batch.size small: many batches, so a delete point falls inside a segment, not only on a boundary
        assert len(produce_all(node.bootstrap, name, _values(n), partition=p, **{"batch.size": 600})) == n


def _admin_delete(node, topic: str, offsets: dict[int, int]) -> dict[int, object]:
    admin = admin_client(node.bootstrap)
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in offsets.items()])
    return {tp.partition: f.result(timeout=30) for tp, f in futures.items()}


def _raw_delete(port: int, version: int, topics: dict[str, dict[int, int]]):
    with RawClient(port) as raw:
        resp = raw.call(DELETE_RECORDS, version, {"timeout_ms": 5000, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "offset": o} for p, o in parts.items()]}
            for t, parts in topics.items()]})
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in resp.topics for p in t.partitions}


def _earliest(port: int, topic: str, partition: int = 0) -> int:
    with RawClient(port) as raw:
        resp = raw.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -2}]}]})
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset


def _consume_offsets(node, topic: str, want: int, **conf) -> list[int]:
    c = Consumer({"bootstrap.servers": node.bootstrap, "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    got: list[int] = []
    end = time.monotonic() + 30
    try:
        while len(got) < want and time.monotonic() < end:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append(m.offset())
    finally:
        c.close()
    return got


def test_admin_delete_records_moves_the_start_and_drops_segments(node):
    _topic(node, "dr-admin")
    seg_dir = node.data_dir / "dr-admin-0"
    def below(offset: int) -> list[int]:
        return [int(p.stem) for p in seg_dir.glob("*.log") if int(p.stem) < offset]

    assert len(below(57)) > 2
    result = _admin_delete(node, "dr-admin", {0: 57})
    assert result[0].low_watermark == 57
    assert _earliest(node.port, "dr-admin") == 57
    # segments wholly below 57 are gone (unlinked off the event loop, so polled for)
    wait_until(lambda: len(below(57)) <= 1, 30, "segments below the new start deleted")
    # a consumer from earliest starts at the new start
    offsets = _consume_offsets(node, "dr-admin", 43, **{"group.id": "dr-fresh", "auto.offset.reset": "earliest"})
    assert offsets[0] == 57 and sorted(offsets) == list(range(57, 100))
    # a smaller offset changes nothing; -1 is the high watermark
    assert _admin_delete(node, "dr-admin", {0: 20})[0].low_watermark == 57
    assert _raw_delete(node.port, 2, {"dr-admin": {0: -1}}) == {("dr-admin", 0): (0, 100)}
    assert _earliest(node.port, "dr-admin") == 100


def test_committed_offset_below_the_start_resets(node):
    _topic(node, "dr-commit")
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "dr-g", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("dr-commit", 0, 10)], asynchronous=False)
    c.close()
    assert _admin_delete(node, "dr-commit", {0: 70})[0].low_watermark == 70
    # Fetch at 10 answers OFFSET_OUT_OF_RANGE; auto.offset.reset=earliest moves the consumer to 70
    with RawClient(node.port) as raw:
        part = raw.call(1, 12, fetch_body("dr-commit", 10)).responses[0].partitions[0]
    # (as Kafka, an out-of-range answer carries no offsets: -1)
    assert (part.error_code, part.log_start_offset, part.high_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1)
    assert _earliest(node.port, "dr-commit") == 70
    offsets = _consume_offsets(node, "dr-commit", 30, **{"group.id": "dr-g", "auto.offset.reset": "earliest"})
    assert offsets[0] == 70 and sorted(offsets) == list(range(70, 100))


def test_share_group_resumes_at_the_new_start(node):
    _topic(node, "dr-share")
    share.earliest(node, "dr-sg")
    first = share.consumer(node, "dr-sg", "dr-share")
    seen: list[tuple[int, int]] = []
    try:
        share.drain(first, 100, 30, seen)  # implicit acknowledgement: all accepted, SPSO moves to 100
    finally:
        first.close()
    assert sorted(o for _p, o in seen) == list(range(100))
    assert len(produce_all(node.bootstrap, "dr-share", _values(100), **{"batch.size": 600})) == 100
    assert _admin_delete(node, "dr-share", {0: 150})[0].low_watermark == 150
    second = share.consumer(node, "dr-sg", "dr-share")
    seen = []
    try:
        share.drain(second, 50, 30, seen)
    finally:
        second.close()
    assert sorted(o for _p, o in seen) == list(range(150, 200))  # 100-149 went with the deleted records


def test_errors_as_kafka(node):
    create_topic(node.bootstrap, "dr-compact", 1, {"cleanup.policy": "compact"})
    _topic(node, "dr-errors", n=10, partitions=2)
    for version in (0, 1, 2):
        got = _raw_delete(node.port, version, {
            "dr-errors": {0: 11, 1: -5, 2: 1},
            "dr-missing": {0: 1},
            "dr-compact": {0: 0},
            "__consumer_offsets": {0: 0},
        })
        assert got == {
            ("dr-errors", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),  # above the high watermark
            ("dr-errors", 1): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
            ("dr-errors", 2): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
            ("dr-missing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
            ("dr-compact", 0): (ErrorCode.POLICY_VIOLATION, -1),
            ("__consumer_offsets", 0): (ErrorCode.INVALID_TOPIC_EXCEPTION, -1),
        }, version
        assert _raw_delete(node.port, version, {"dr-errors": {1: version + 1}}) == {
            ("dr-errors", 1): (0, version + 1)}
    assert _raw_delete(node.port, 2, {"dr-errors": {0: 10}}) == {("dr-errors", 0): (0, 10)}  # == the high watermark


def test_python_admin_clients_delete_records(node):
    """kafka-python's and aiokafka's admin clients speak DeleteRecords too."""
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient

    _topic(node, "dr-python", n=30)
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        got = admin.delete_records({KafkaTopicPartition("dr-python", 0): 10})
    finally:
        admin.close()
    assert [(r["error_code"], r["low_watermark"]) for r in got.values()] == [(0, 10)]

    async def aio() -> dict:
        client = AIOKafkaAdminClient(bootstrap_servers=node.bootstrap)
        await client.start()
        try:
            return await client.delete_records({AioTopicPartition("dr-python", 0): RecordsToDelete(before_offset=20)})
        finally:
            await client.close()

    assert list(asyncio.run(aio()).values()) == [20]
    assert _earliest(node.port, "dr-python") == 20


def test_kill9_after_delete_records_keeps_the_start(tmp_path):
    proc = start_broker(tmp_path)
    try:
        _topic(proc, "dr-crash")
        assert _admin_delete(proc, "dr-crash", {0: 63})[0].low_watermark == 63
        assert not (proc.data_dir / "dr-crash-0" / f"{63:020d}.log").exists()  # mid-segment: the checkpoint holds it
        proc.kill9()
        proc.start()
        assert _earliest(proc.port, "dr-crash") == 63
        with RawClient(proc.port) as raw:
            part = raw.call(1, 12, fetch_body("dr-crash", 62)).responses[0].partitions[0]
        assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    finally:
        proc.stop()
