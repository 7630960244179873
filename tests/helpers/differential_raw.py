"""Raw requests for the differential suite's produce, fetch and offsets scenarios (our codecs, one broker at a time).

`new_topic(target, base, configs, partitions)` creates a topic and waits until its partitions serve requests: Kafka
lists a new partition's leader in Metadata a moment before its replica manager leads it (a Produce meanwhile is
NOT_LEADER_OR_FOLLOWER), so readiness is a ListOffsets answered without error on every partition.
`produce`, `fetch`, `list_offsets` take a version and return the partition's decoded answer; `batches` decodes
fetched records into plain data (headers without the CRC, records with key, value, headers, timestamp and offset).
`probe(port, data)` sends raw bytes on a fresh socket and reports what came back (a response, its correlation id
and body, or a closed connection), for frames our codecs cannot build; `request_frame` builds such frames.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from protocol import records as rec
from protocol.codec import response_codec
from protocol.framing import decode_response_header, response_header_version
from tests.helpers.differential import Target
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 10, 22, 24, 26
DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 21, 23
ZERO_UUID = uuid.UUID(int=0)


def new_topic(target: Target, base: str, configs: dict[str, str] | None = None, partitions: int = 1) -> str:
    name = target.unique(base)
    admin = AdminClient({**target.client_config(), "log_level": 0})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(timeout=30)
    with target.raw() as raw:
        def ready() -> bool:
            answer = raw.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": name, "partitions": [{"partition_index": p, "timestamp": -1, "current_leader_epoch": -1}
                                              for p in range(partitions)]}]})
            return all(p.error_code == 0 for t in answer.topics for p in t.partitions)
        wait_until(ready, 30, f"the partitions of {name} to serve requests")
    return name


def topic_id(raw: RawClient, topic: str) -> uuid.UUID:
    answer = raw.call(METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return answer.topics[0].topic_id


def produce_request(raw: RawClient, version: int, topic_data: list[dict], *, acks: int = -1,
                    transactional_id: str | None = None):
    return raw.call(PRODUCE, version, {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 5000,
                                       "topic_data": topic_data})


def produce(raw: RawClient, topic: str, records: bytes | None, *, version: int = 9, partition: int = 0,
            acks: int = -1, transactional_id: str | None = None):
    """The partition's answer to a Produce of `records`."""
    answer = produce_request(raw, version, [{"name": topic, "partition_data": [
        {"index": partition, "records": records}]}], acks=acks, transactional_id=transactional_id)
    return answer.responses[0].partition_responses[0]


def produce_apart(raw: RawClient, topic: str, records: bytes, **kwargs):
    """`produce`, then wait until the clock has moved past the batch's LogAppendTime: on a LogAppendTime topic each
    batch then has a timestamp of its own on both brokers (what MAX_TIMESTAMP and timestamp lookups find)."""
    answer = produce(raw, topic, records, **kwargs)
    stamped = answer.log_append_time_ms
    if stamped >= 0:
        wait_until(lambda: now_ms() > stamped + 1, 5, "the clock to pass a LogAppendTime")
    return answer


def fetch_request(topics: list[dict], *, max_bytes: int = 1 << 20, isolation_level: int = 0, session_id: int = 0,
                  session_epoch: int = -1) -> dict:
    return {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "replica_id": -1,
            "isolation_level": isolation_level, "session_id": session_id, "session_epoch": session_epoch,
            "topics": topics, "forgotten_topics_data": [], "rack_id": ""}


def fetch_partition(topic: str, offset: int, *, partition: int = 0, partition_max_bytes: int = 1 << 20,
                    current_leader_epoch: int = -1, topic_id_: uuid.UUID = ZERO_UUID) -> dict:
    return {"topic": topic, "topic_id": topic_id_, "partitions": [{
        "partition": partition, "fetch_offset": offset, "partition_max_bytes": partition_max_bytes,
        "log_start_offset": -1, "current_leader_epoch": current_leader_epoch}]}


def fetch(raw: RawClient, topic: str, offset: int = 0, *, version: int = 12, **kwargs):
    """Partition 0's answer to a Fetch (`kwargs`: fetch_request's and fetch_partition's)."""
    part_args = {k: kwargs.pop(k) for k in ("partition", "partition_max_bytes", "current_leader_epoch",
                                            "topic_id_") if k in kwargs}
    answer = raw.call(FETCH, version, fetch_request([fetch_partition(topic, offset, **part_args)], **kwargs))
    return answer.responses[0].partitions[0]


def fetched(part) -> dict:
    """A fetched partition as plain data, its records decoded (`batches`)."""
    out = {k: v for k, v in part.items() if k != "records"}
    out["batches"] = None if part.records is None else batches(part.records)
    return out


def batches(records: bytes | None) -> list[dict]:
    """Every whole batch of fetched records: its header (without the CRC) and its records."""
    out = []
    data = bytes(records or b"")
    for pos, header in rec.iter_batches(data):
        view = data[pos:pos + header.size]
        fields = header._asdict()
        del fields["crc"]
        fields["records"] = [{"key": r.key, "value": r.value, "headers": r.headers, "timestamp": r.timestamp,
                              "offset": r.offset} for r in rec.decode_records(view)]
        out.append(fields)
    return out


def list_offsets(raw: RawClient, topic: str, timestamp: int, *, version: int = 10, partition: int = 0,
                 isolation_level: int = 0, current_leader_epoch: int = -1):
    answer = raw.call(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": isolation_level,
                                              "timeout_ms": 1000, "topics": [{"name": topic, "partitions": [
                                                  {"partition_index": partition, "timestamp": timestamp,
                                                   "current_leader_epoch": current_leader_epoch}]}]})
    return answer.topics[0].partitions[0]


def init_producer_id(raw: RawClient, transactional_id: str | None = None):
    """InitProducerId, retried while the coordinator is not ready (Kafka creates __transaction_state when a
    transaction coordinator is first looked up)."""
    def attempt():
        if transactional_id is not None:
            raw.call(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [transactional_id]})
        answer = raw.call(INIT_PRODUCER_ID, 4, {"transactional_id": transactional_id, "transaction_timeout_ms": 60000,
                                               "producer_id": -1, "producer_epoch": -1})
        return answer if answer.error_code == 0 else None
    return wait_until(attempt, 60, "InitProducerId to succeed", interval=0.2)


def probe(port: int, data: bytes, *, api_key: int | None = None, version: int = 0, wait_s: float = 5.0) -> dict:
    """Send `data` on a fresh connection. Returns {"outcome": "closed"} when the broker closes the connection
    without answering, or {"outcome": "response", "correlation_id", "body" (decoded with the response codec of
    api_key/version, header v0, when api_key is given), "then": "closed" | "open"}."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        sock.sendall(data)
        buf = b""
        try:
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    return {"outcome": "closed"}
                buf += chunk
        except ConnectionResetError:
            return {"outcome": "closed"}
        size = struct.unpack(">i", buf[:4])[0]
        frame = buf[4:4 + size]
        out: dict[str, Any] = {"outcome": "response", "correlation_id": struct.unpack(">i", frame[:4])[0]}
        if api_key is not None:
            _, at = decode_response_header(frame, response_header_version(api_key, version))
            out["body"] = response_codec(api_key, version).decode(frame[at:])
        try:
            sock.settimeout(0.3)
            out["then"] = "closed" if sock.recv(1) == b"" else "open"
        except TimeoutError:
            out["then"] = "open"
        except ConnectionResetError:
            out["then"] = "closed"
        return out


def request_frame(api_key: int, version: int, body: bytes = b"", *, correlation_id: int = 7,
                  client_id: bytes | None = b"raw", client_id_length: int | None = None,
                  flexible: bool = False) -> bytes:
    """A request frame built by hand (size prefix included): header v1, or v2 with `flexible` (no tags)."""
    head = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        head += struct.pack(">h", -1)
    else:
        head += struct.pack(">h", len(client_id) if client_id_length is None else client_id_length) + client_id
    if flexible:
        head += b"\x00"
    payload = head + body
    return struct.pack(">i", len(payload)) + payload


def wait_for(what: str, condition, timeout: float = 30.0):
    return wait_until(condition, timeout, what)


def now_ms() -> int:
    return int(time.time() * 1000)
