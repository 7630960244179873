"""Raw-protocol checks of Fetch, Produce idempotence, ListOffsets, FindCoordinator and DescribeCluster."""

from __future__ import annotations

import base64
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer

from protocol.errors import ErrorCode
from protocol.records import Record, build_batch, iter_batches
from tests.helpers.confluent_clients import admin_client, create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import (
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    fetch_body,
    produce,
    topic_id,
)

pytestmark = pytest.mark.integration


def test_fetch_long_poll_is_woken_by_an_append(broker):
    create_topic(broker.bootstrap, "poll")
    result = {}

    def park():
        with RawClient(broker.port) as client:
            start = time.monotonic()
            resp = client.call(FETCH, 11, fetch_body("poll", 0, max_wait_ms=25_000))
            result["elapsed"] = time.monotonic() - start
            result["records"] = resp.responses[0].partitions[0].records

    waiter = threading.Thread(target=park)
    waiter.start()
    # Time for the Fetch to park (nothing outside the broker shows it). Not needed for correctness: an append
    # that came first would be returned at once, which the assertions accept too; it makes the test exercise
    # the wake-up.
    time.sleep(0.5)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("poll", b"wake", partition=0)
    assert producer.flush(30) == 0
    waiter.join(30)
    assert result["records"], "the parked fetch returned no records"
    # Well below MaxWaitMs (25 s): the bound leaves a loaded machine time for the producer's start-up.
    assert result["elapsed"] < 20, "the fetch was not woken by the append"


def test_fetch_waits_max_wait_when_nothing_arrives(broker):
    create_topic(broker.bootstrap, "quiet")
    with RawClient(broker.port) as client:
        start = time.monotonic()
        resp = client.call(FETCH, 11, fetch_body("quiet", 0, max_wait_ms=400))
        assert time.monotonic() - start >= 0.35
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0 and not part.records and part.high_watermark == 0


def test_fetch_limits_offsets_and_topic_ids(broker):
    create_topic(broker.bootstrap, "limits", partitions=2)
    big = build_batch([Record(key=None, value=b"x" * 10_000)])
    with RawClient(broker.port) as client:
        for p in (0, 1):
            assert produce(client, "limits", big, partition=p).error_code == 0
            assert produce(client, "limits", big, partition=p).error_code == 0
        # KIP-74: the first partition returns one whole batch even though it exceeds both limits; the next
        # partition gets nothing because the response is already over MaxBytes.
        resp = client.call(FETCH, 11, fetch_body("limits", 0, max_bytes=100, partition_max=100, partitions=(0, 1)))
        first, second = resp.responses[0].partitions
        assert [h.base_offset for _, h in iter_batches(first.records)] == [0]
        assert len(first.records) == len(big) and not second.records
        assert first.high_watermark == 2 and first.log_start_offset == 0 and first.last_stable_offset == 2
        # Partition limit below the total: whole batches up to the limit, at least one.
        resp = client.call(FETCH, 11, fetch_body("limits", 0, partition_max=len(big) + 10))
        assert len(resp.responses[0].partitions[0].records) == len(big)
        resp = client.call(FETCH, 11, fetch_body("limits", 5))
        assert resp.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert client.call(FETCH, 11, fetch_body("nope", 0)).responses[0].partitions[0].error_code == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # v13+ names topics by id.
        tid = topic_id(client, "limits")
        assert tid != uuid.UUID(int=0)
        body = fetch_body("limits", 1)
        body["topics"][0]["topic_id"] = tid
        resp = client.call(FETCH, 13, body)
        assert resp.responses[0].topic_id == tid
        assert [h.base_offset for _, h in iter_batches(resp.responses[0].partitions[0].records)] == [1]
        body["topics"][0]["topic_id"] = uuid.uuid4()
        assert client.call(FETCH, 13, body).responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_idempotent_produce_sequence_checks(broker):
    create_topic(broker.bootstrap, "idem")
    with RawClient(broker.port) as client:
        init = client.call(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert init.error_code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
        pid = init.producer_id

        def batch(seq: int, n: int = 2, epoch: int = 0) -> bytes:
            return build_batch([Record(key=None, value=f"{seq}-{i}".encode()) for i in range(n)],
                               producer_id=pid, producer_epoch=epoch, base_sequence=seq)

        assert produce(client, "idem", batch(0)).base_offset == 0
        assert produce(client, "idem", batch(2)).base_offset == 2
        duplicate = produce(client, "idem", batch(0))
        assert (duplicate.error_code, duplicate.base_offset) == (0, 0)
        assert produce(client, "idem", batch(7)).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(client, "idem", batch(4)).base_offset == 4
        # KIP-360: an idempotent producer naming its id and epoch gets a new producer id, as from Kafka (nothing on
        # the broker could check a bump of an id it names)
        renewed = client.call(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                    "producer_id": pid, "producer_epoch": 0})
        assert renewed.error_code == 0 and renewed.producer_id != pid and renewed.producer_epoch == 0
        # a producer bumping its own epoch starts its sequences again; then the old epoch is fenced
        assert produce(client, "idem", batch(0, epoch=1)).base_offset == 6
        assert produce(client, "idem", batch(6, epoch=0)).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        resp = client.call(FETCH, 11, fetch_body("idem", 0))
        offsets = [h.base_offset for _, h in iter_batches(resp.responses[0].partitions[0].records)]
        assert offsets == [0, 2, 4, 6]  # the duplicate was not stored twice
    # Idempotence state survives a restart: the retried batch is still recognised.
    broker.restart()
    with RawClient(broker.port) as client:
        again = produce(client, "idem", build_batch([Record(key=None, value=b"0-0"), Record(key=None, value=b"0-1")],
                                                    producer_id=pid, producer_epoch=1, base_sequence=0))
        assert (again.error_code, again.base_offset) == (0, 6)


def test_list_offsets_every_spec(broker):
    create_topic(broker.bootstrap, "times")
    with RawClient(broker.port) as client:
        for ts in (1000, 3000, 2000):
            produce(client, "times", build_batch([Record(key=None, value=b"v")], timestamp=ts))

        def lookup(timestamp: int, version: int = 7):
            resp = client.call(LIST_OFFSETS, version, {"replica_id": -1, "topics": [
                {"name": "times", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
            part = resp.topics[0].partitions[0]
            return part.error_code, part.offset, part.timestamp

        assert lookup(-2) == (0, 0, -1)  # earliest
        assert lookup(-1) == (0, 3, -1)  # latest
        assert lookup(1500) == (0, 1, 3000)  # first record with timestamp >= 1500
        assert lookup(2500) == (0, 1, 3000)
        assert lookup(-3) == (0, 1, 3000)  # max timestamp
        assert lookup(5000) == (0, -1, -1)
        assert lookup(-3, version=6)[0] == ErrorCode.UNSUPPORTED_VERSION
        resp = client.call(LIST_OFFSETS, 7, {"replica_id": -1, "topics": [
            {"name": "missing", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert resp.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_find_coordinator_versions(broker):
    with RawClient(broker.port) as client:
        for version in range(4):
            resp = client.call(FIND_COORDINATOR, version, {"key": "group-a", "key_type": 0})
            assert (resp.error_code, resp.node_id, resp.port) == (0, 1, broker.port)
        resp = client.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b", ""]})
        # Kafka gives even an empty group id a coordinator (tests/differential/test_groups_classic.py)
        assert [(c.key, c.error_code, c.port) for c in resp.coordinators] == [
            ("a", 0, broker.port), ("b", 0, broker.port), ("", 0, broker.port)]
        share_key = "group-a:" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=") + ":0"
        resp = client.call(FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [share_key, "bad-key"]})
        assert [c.error_code for c in resp.coordinators] == [0, ErrorCode.INVALID_REQUEST]
        resp = client.call(FIND_COORDINATOR, 5, {"key_type": 2, "coordinator_keys": [share_key]})
        assert resp.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


def test_describe_cluster_and_metadata(broker):
    admin = admin_client(broker.bootstrap)
    cluster = admin.describe_cluster().result(timeout=30)
    assert cluster.cluster_id and [(n.id, n.port) for n in cluster.nodes] == [(1, broker.port)]
    assert cluster.controller.id == 1
    with RawClient(broker.port) as client:
        meta = client.call(METADATA, 0, {"topics": []})  # v0: empty list means every topic
        assert {t.name for t in meta.topics} >= {"__consumer_offsets", "__share_group_state"}
        meta = client.call(METADATA, 1, {"topics": []})  # v1+: empty list means none
        assert meta.topics == []
        meta = client.call(METADATA, 12, {"topics": [{"name": "auto-made"}], "allow_auto_topic_creation": True})
        assert meta.topics[0].error_code == 0 and len(meta.topics[0].partitions) == 1
        meta = client.call(METADATA, 12, {"topics": [{"name": "not-made"}], "allow_auto_topic_creation": False})
        assert meta.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        meta = client.call(METADATA, 12, {"topics": [{"name": None, "topic_id": uuid.uuid4()}]})
        assert meta.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        meta = client.call(METADATA, 12, {"topics": [{"name": "bad name!"}]})
        assert meta.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_acks0_and_log_append_time(broker):
    create_topic(broker.bootstrap, "appendtime", config={"message.timestamp.type": "LogAppendTime"})
    with RawClient(broker.port) as client:
        before = int(time.time() * 1000)
        result = produce(client, "appendtime", build_batch([Record(key=None, value=b"v")], timestamp=1))
        assert result.error_code == 0 and result.log_append_time_ms >= before
        resp = client.call(FETCH, 11, fetch_body("appendtime", 0))
        (_, header), = iter_batches(resp.responses[0].partitions[0].records)
        assert header.is_log_append_time and header.max_timestamp == result.log_append_time_ms
        # acks=0: no response; the next request's answer is the next frame on the wire.
        client.send(PRODUCE, 9, {"acks": 0, "timeout_ms": 5000, "topic_data": [
            {"name": "appendtime", "partition_data": [{"index": 0, "records": build_batch([Record(None, b"w")])}]}]})
        assert topic_id(client, "appendtime") != uuid.UUID(int=0)
        # acks=0 with an error: the broker closes the connection, as Kafka does.
        client.send(PRODUCE, 9, {"acks": 0, "timeout_ms": 5000, "topic_data": [
            {"name": "no-such-topic", "partition_data": [{"index": 0, "records": build_batch([Record(None, b"w")])}]}]})
        with pytest.raises(ConnectionError):
            client.call(METADATA, 12, {"topics": []})
    with RawClient(broker.port) as client:
        resp = client.call(FETCH, 11, fetch_body("appendtime", 0))
        assert len(list(iter_batches(resp.responses[0].partitions[0].records))) == 2
