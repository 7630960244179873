"""Raw requests for tests (RawClient): API keys, Produce, Metadata's topic id, Fetch bodies and a consumer's Fetch,
the log end offset, IncrementalAlterConfigs, classic JoinGroup."""

from __future__ import annotations

import uuid

from protocol.codec import message_codec
from tests.helpers.raw_client import RawClient

PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, CREATE_TOPICS, INIT_PRODUCER_ID = 0, 1, 2, 3, 10, 19, 22


def create_topic(client: RawClient, topic: str, partitions: int = 1) -> None:
    resp = client.call(CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": partitions,
                                                      "replication_factor": -1}], "timeout_ms": 30_000})
    assert resp.topics[0].error_code == 0, resp.topics[0]


def produce(client: RawClient, topic: str, records: bytes, partition: int = 0, acks: int = -1):
    resp = client.call(PRODUCE, 9, {"acks": acks, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


INCREMENTAL_ALTER_CONFIGS = 44
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # config resource types


def alter_config(client: RawClient, resource_type: int, name: str, key: str, value: str | None) -> None:
    """IncrementalAlterConfigs SET (DELETE when `value` is None) of one config; a broker named "" is the
    cluster-wide default, which the confluent AdminClient cannot name."""
    resp = client.call(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": resource_type, "resource_name": name, "configs": [
            {"name": key, "config_operation": 0 if value is not None else 1, "value": value}]}],
        "validate_only": False})
    assert resp.responses[0].error_code == 0, resp


def topic_id(client: RawClient, topic: str) -> uuid.UUID:
    meta = client.call(METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return meta.topics[0].topic_id


def fetch_body(topic: str, offset: int, *, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, partition_max=1 << 20,
               partitions=(0,)) -> dict:
    return {"max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes, "topics": [
        {"topic": topic, "partitions": [
            {"partition": p, "fetch_offset": offset, "partition_max_bytes": partition_max} for p in partitions]}]}

def fetch_partition(client: RawClient, topic: str, offset: int = 0, *, version: int = 12, **body):
    """Partition 0 of a consumer's sessionless read_uncommitted Fetch of `topic` (`body`: see fetch_body)."""
    resp = client.call(FETCH, version, {**fetch_body(topic, offset, **body), "replica_id": -1, "isolation_level": 0,
                                        "session_id": 0, "session_epoch": -1})
    return resp.responses[0].partitions[0]


def end_offset(client: RawClient, topic: str, partition: int = 0) -> int:
    """The partition's log end offset (ListOffsets, LATEST)."""
    resp = client.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
    return resp.topics[0].partitions[0].offset


OFFSET_COMMIT, OFFSET_FETCH, JOIN, HEARTBEAT, LEAVE, SYNC = 8, 9, 11, 12, 13, 14
DESCRIBE, LIST, DELETE, OFFSET_DELETE = 15, 16, 42, 47


def subscription(*topics: str) -> bytes:
    return b"\x00\x00" + message_codec("ConsumerProtocolSubscription", 0).encode({"topics": list(topics)})


def join(c: RawClient, v: int, group: str, member: str = "", instance: str | None = None):
    return c.call(JOIN, v, {"group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
                            "member_id": member, "group_instance_id": instance, "protocol_type": "consumer",
                            "protocols": [{"name": "range", "metadata": subscription("raw")}], "reason": "test"})
