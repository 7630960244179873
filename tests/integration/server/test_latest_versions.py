"""The newest versions of the served APIs against a real broker, by raw requests of each new version (no installed
client speaks them: librdkafka 2.16 sends Produce v10, Fetch v16, ListOffsets v7, ApiVersions v3, InitProducerId
v4; kafka-python 3.0 caps Produce at v9 and Fetch at v12), with the answers decoded by our codecs and, where short,
compared byte for byte with Kafka's definitions; and real clients negotiating down from them.

- Produce v13 / Fetch v18: topics by id (KIP-516), UNKNOWN_TOPIC_ID for an id the broker does not know; Fetch
  v18 carries the follower's HighWatermark (KIP-1166), a tagged request field a consumer's fetch may send too.
- ListOffsets v11: EARLIEST_PENDING_UPLOAD (-6, KIP-1023) answers no offset, as Kafka without tiered storage.
- ApiVersions v5 (KIP-1242): ClusterId/NodeId of another cluster or node get REBOOTSTRAP_REQUIRED, a NodeId
  without a ClusterId INVALID_REQUEST.
- InitProducerId v6 (KIP-939, latestVersionUnstable): only with unstable.api.versions.enable; Enable2Pc and
  KeepPreparedTxn are refused as by Kafka with 2PC disabled.
"""

from __future__ import annotations

import logging
import re
import struct
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from protocol import records as rec
from protocol.errors import ErrorCode
from protocol.framing import decode_response_header, response_header_version
from tests.helpers.broker_process import start_broker
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import (
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    create_topic,
    topic_id,
)
from tests.helpers.record_batches import batch, batches_in
from tests.helpers.txn_clients import describe_txn, end_txn, init_producer, offsets

pytestmark = pytest.mark.integration

API_VERSIONS, CREATE_ACLS = 18, 30
SOFTWARE = {"client_software_name": "latest-versions", "client_software_version": "1.0"}


@pytest.fixture(scope="module")
def unstable_broker(tmp_path_factory: pytest.TempPathFactory):
    """unstable.api.versions.enable, and the authorizer on with everything allowed that no ACL names."""
    tmp: Path = tmp_path_factory.mktemp("unstable")
    proc = start_broker(tmp, {
        "unstable.api.versions.enable": "true", "allow.everyone.if.no.acl.found": "true",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    try:
        yield proc
    finally:
        proc.stop()


def raw_body(c: RawClient, api_key: int, version: int, body: dict) -> bytes:
    """The response body's bytes (after its header)."""
    corr = c.send(api_key, version, body)
    size = struct.unpack(">i", c._recv_exact(4))[0]
    frame = c._recv_exact(size)
    got, offset = decode_response_header(frame, response_header_version(api_key, version))
    assert got == corr
    return frame[offset:]


def advertised(c: RawClient) -> dict[int, tuple[int, int]]:
    resp = c.call(API_VERSIONS, 5, SOFTWARE)
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def test_advertised_versions(broker_module, unstable_broker):
    with RawClient(broker_module.port) as c:
        keys = advertised(c)
    assert {k: keys[k] for k in (PRODUCE, FETCH, LIST_OFFSETS, API_VERSIONS, INIT_PRODUCER_ID)} == {
        PRODUCE: (0, 13), FETCH: (4, 18), LIST_OFFSETS: (1, 11), API_VERSIONS: (0, 5), INIT_PRODUCER_ID: (0, 5)}
    # (Produce v0 is listed as Kafka lists it, KAFKA-18659; v0-v2 requests close the connection)
    with RawClient(unstable_broker.port) as c:
        assert advertised(c)[INIT_PRODUCER_ID] == (0, 6)


def test_api_versions_v5_checks_cluster_and_node(broker_module):
    with RawClient(broker_module.port) as c:
        meta = c.call(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        cluster, node = meta.cluster_id, meta.brokers[0].node_id
        ok = c.call(API_VERSIONS, 5, {**SOFTWARE, "cluster_id": cluster, "node_id": node})
        assert ok.error_code == 0 and any(k.api_key == API_VERSIONS and k.max_version == 5 for k in ok.api_keys)
        # ErrorCode 129, ApiKeys [] (compact: 1), ThrottleTimeMs 0, no tagged fields: Kafka's error answer.
        rebootstrap = b"\x00\x81" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
        assert raw_body(c, API_VERSIONS, 5, {**SOFTWARE, "cluster_id": "another-cluster", "node_id": node}) \
            == rebootstrap
        assert raw_body(c, API_VERSIONS, 5, {**SOFTWARE, "cluster_id": cluster, "node_id": node + 1}) == rebootstrap
        assert raw_body(c, API_VERSIONS, 5, {**SOFTWARE, "cluster_id": cluster, "node_id": -1}) == rebootstrap
        assert c.call(API_VERSIONS, 5, SOFTWARE).error_code == 0  # no cluster named, nothing checked
        # A node named without its cluster: INVALID_REQUEST (as Kafka 4.4), no api keys.
        assert raw_body(c, API_VERSIONS, 5, {**SOFTWARE, "cluster_id": None, "node_id": node}) \
            == b"\x00\x2a" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
        # The connection keeps serving: the client decides whether to rebootstrap.
        assert c.call(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}).cluster_id == cluster


def produce_v13(c: RawClient, tid: uuid.UUID, records: bytes, version: int = 13):
    return c.call(PRODUCE, version, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"topic_id": tid, "partition_data": [{"index": 0, "records": records}]}]})


def test_produce_v13_and_fetch_v18_by_topic_id(broker_module):
    with RawClient(broker_module.port) as c:
        create_topic(c, "latest-ids")
        tid = topic_id(c, "latest-ids")
        resp = produce_v13(c, tid, batch(3))
        (topic,) = resp.responses
        assert topic.topic_id == tid
        (part,) = topic.partition_responses
        assert (part.index, part.error_code, part.base_offset, part.log_start_offset) == (0, 0, 0, 0)
        # v12 still names the topic.
        v12 = c.call(PRODUCE, 12, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "latest-ids", "partition_data": [{"index": 0, "records": batch(2)}]}]})
        assert v12.responses[0].partition_responses[0].base_offset == 3

        fetch = c.call(FETCH, 18, {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
            {"topic_id": tid, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                              "high_watermark": 5}]}]})
        assert fetch.error_code == 0
        (ft,) = fetch.responses
        assert ft.topic_id == tid
        (fp,) = ft.partitions
        assert (fp.error_code, fp.high_watermark, fp.last_stable_offset, fp.log_start_offset) == (0, 5, 5, 0)
        assert [(h.base_offset, h.records_count) for h in batches_in(fp.records)] == [(0, 3), (3, 2)]


def test_produce_v13_idempotent_and_transactional(broker_module):
    """The producer state and the transaction checks find partitions named by id."""
    with RawClient(broker_module.port) as c:
        create_topic(c, "latest-eos")
        tid = topic_id(c, "latest-eos")
        pid = c.call(INIT_PRODUCER_ID, 5, {"transactional_id": None, "transaction_timeout_ms": 0,
                                           "producer_id": -1, "producer_epoch": -1})
        assert pid.error_code == 0

        def idempotent(seq: int):
            records = rec.build_batch([rec.Record(None, b"i")], producer_id=pid.producer_id,
                                      producer_epoch=pid.producer_epoch, base_sequence=seq)
            p = produce_v13(c, tid, records).responses[0].partition_responses[0]
            return p.error_code, p.base_offset

        assert idempotent(0) == (0, 0)
        assert idempotent(0) == (0, 0)  # a retried batch: the duplicate's offset, not a second copy
        assert idempotent(5)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

        # transaction.version 2: Produce v12+ adds the partition to the transaction (no AddPartitionsToTxn).
        txn_pid, epoch = init_producer(c, "latest-eos-txn", version=5)
        records = rec.build_batch([rec.Record(None, b"t")], producer_id=txn_pid, producer_epoch=epoch,
                                  base_sequence=0, transactional=True)
        resp = c.call(PRODUCE, 13, {"transactional_id": "latest-eos-txn", "acks": -1, "timeout_ms": 5000,
                                    "topic_data": [{"topic_id": tid, "partition_data": [{"index": 0,
                                                                                        "records": records}]}]})
        assert resp.responses[0].partition_responses[0].error_code == 0
        assert [(t.topic, list(t.partitions)) for t in describe_txn(c, "latest-eos-txn").topics] == [
            ("latest-eos", [0])]
        assert offsets(c, "latest-eos", 1, committed=True) == [1]  # the open transaction holds the LSO
        assert end_txn(c, "latest-eos-txn", txn_pid, epoch, commit=True, version=5) == 0


def test_produce_v13_authorizes_the_topic_of_the_id(unstable_broker):
    """WRITE is checked on the topic an id names; an id no topic has is UNKNOWN_TOPIC_ID, as Kafka (no name to
    authorize)."""
    with RawClient(unstable_broker.port) as c:
        create_topic(c, "latest-denied")
        tid = topic_id(c, "latest-denied")
        acl = c.call(CREATE_ACLS, 3, {"creations": [{
            "resource_type": 2, "resource_name": "latest-denied", "resource_pattern_type": 3,
            "principal": "User:ANONYMOUS", "host": "*", "operation": 4, "permission_type": 2}]})  # DENY WRITE
        assert [r.error_code for r in acl.results] == [0]
        assert produce_v13(c, tid, batch(1)).responses[0].partition_responses[0].error_code \
            == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert produce_v13(c, uuid.uuid4(), batch(1)).responses[0].partition_responses[0].error_code \
            == ErrorCode.UNKNOWN_TOPIC_ID


def test_produce_v13_unknown_topic_id(broker_module):
    unknown = uuid.uuid4()
    with RawClient(broker_module.port) as c:
        body = raw_body(c, PRODUCE, 13, {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"topic_id": unknown, "partition_data": [{"index": 0, "records": batch(1)}]}]})
        # Responses [1] (compact: 2): TopicId, PartitionResponses [1]: Index 0, ErrorCode 100, BaseOffset -1,
        # LogAppendTimeMs -1, LogStartOffset -1, RecordErrors [] (1), ErrorMessage null (0), tags; topic tags;
        # ThrottleTimeMs 0; tags.
        assert body == (b"\x02" + unknown.bytes + b"\x02" + struct.pack(">ih", 0, 100) + struct.pack(">qqq", -1, -1, -1)
                        + b"\x01" + b"\x00" + b"\x00" + b"\x00" + struct.pack(">i", 0) + b"\x00")
        fetch = c.call(FETCH, 18, {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
            {"topic_id": unknown, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}]})
        assert fetch.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_list_offsets_v11_earliest_pending_upload(broker_module):
    with RawClient(broker_module.port) as c:
        create_topic(c, "latest-offsets")
        produce_v13(c, topic_id(c, "latest-offsets"), batch(4))

        def lookup(timestamp: int, version: int = 11):
            resp = c.call(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 5000,
                                                  "topics": [{"name": "latest-offsets", "partitions": [
                                                      {"partition_index": 0, "timestamp": timestamp}]}]})
            p = resp.topics[0].partitions[0]
            return p.error_code, p.timestamp, p.offset, p.leader_epoch

        # No tiered storage: nothing uploaded, nothing pending upload (Kafka: offset -1, epoch -1).
        assert lookup(-6) == (0, -1, -1, -1)
        assert lookup(-5) == (0, -1, -1, -1)
        assert lookup(-1) == (0, -1, 4, 0)
        assert lookup(-2) == (0, -1, 0, 0)
        assert lookup(-6, version=10)[0] == ErrorCode.UNSUPPORTED_VERSION  # -6 needs v11
        body = raw_body(c, LIST_OFFSETS, 11, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 5000, "topics": [
            {"name": "latest-offsets", "partitions": [{"partition_index": 0, "timestamp": -6}]}]})
        # ThrottleTimeMs, Topics [1]: Name, Partitions [1]: PartitionIndex, ErrorCode, Timestamp, Offset,
        # LeaderEpoch, tags; topic tags; tags.
        name = b"latest-offsets"
        assert body == (struct.pack(">i", 0) + b"\x02" + bytes([len(name) + 1]) + name + b"\x02"
                        + struct.pack(">ihqqi", 0, 0, -1, -1, -1) + b"\x00" + b"\x00" + b"\x00")


def init_pid_v6(c: RawClient, tid: str | None, *, enable2pc: bool = False, keep: bool = False):
    return c.call(INIT_PRODUCER_ID, 6, {"transactional_id": tid, "transaction_timeout_ms": 60_000,
                                        "producer_id": -1, "producer_epoch": -1, "enable2_pc": enable2pc,
                                        "keep_prepared_txn": keep})


def test_init_producer_id_v6_needs_unstable_versions(broker_module):
    with RawClient(broker_module.port) as c, pytest.raises(ConnectionError):
        init_pid_v6(c, "latest-txn")  # an unadvertised version: the connection is closed, as Kafka does


def test_init_producer_id_v6_refuses_two_phase_commit(unstable_broker):
    with RawClient(unstable_broker.port) as c:
        body = raw_body(c, INIT_PRODUCER_ID, 6, {"transactional_id": "latest-2pc", "transaction_timeout_ms": 60_000,
                                                 "producer_id": -1, "producer_epoch": -1, "enable2_pc": True,
                                                 "keep_prepared_txn": False})
        # ThrottleTimeMs 0, ErrorCode 53, ProducerId -1, ProducerEpoch -1, OngoingTxnProducerId -1,
        # OngoingTxnProducerEpoch -1, tags.
        assert body == struct.pack(">ihqhqh", 0, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1, -1, -1) \
            + b"\x00"
        plain = init_pid_v6(c, "latest-2pc")
        assert plain.error_code == 0 and plain.producer_id >= 0 and plain.producer_epoch >= 0
        assert (plain.ongoing_txn_producer_id, plain.ongoing_txn_producer_epoch) == (-1, -1)
        # Keeping a prepared transaction: Kafka's coordinator answers UNSUPPORTED_VERSION (not implemented there).
        kept = init_pid_v6(c, "latest-2pc", keep=True)
        assert (kept.error_code, kept.producer_id, kept.ongoing_txn_producer_id) == (
            ErrorCode.UNSUPPORTED_VERSION, -1, -1)
        again = init_pid_v6(c, "latest-2pc")  # refusals change nothing: the next epoch of the same producer
        assert (again.error_code, again.producer_id) == (0, plain.producer_id)
        assert again.producer_epoch > plain.producer_epoch
        idempotent = init_pid_v6(c, None, enable2pc=True, keep=True)  # no transactional id: no 2PC to refuse
        assert idempotent.error_code == 0 and idempotent.producer_id >= 0


def test_real_clients_negotiate_down(broker_module):
    """librdkafka picks min(ours, its own) for each API: everything still works end to end."""
    sent: set[tuple[str, int]] = set()

    class Sent(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            for m in re.finditer(r"Sent (\w+)Request \(v(\d+)", record.getMessage()):
                sent.add((m.group(1), int(m.group(2))))

    log = logging.getLogger("latest-versions-rdkafka")
    log.setLevel(logging.DEBUG)
    log.addHandler(Sent())
    producer = Producer({"bootstrap.servers": broker_module.bootstrap, "enable.idempotence": True,
                         "debug": "protocol"}, logger=log)
    for i in range(3):
        producer.produce("latest-real", b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker_module.bootstrap, "group.id": "latest-real",
                         "auto.offset.reset": "earliest", "debug": "protocol"}, logger=log)
    try:
        consumer.subscribe(["latest-real"])
        got = []
        deadline = time.monotonic() + 60  # a group join first: slow on a loaded machine
        while len(got) < 3 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [b"v0", b"v1", b"v2"]
    finally:
        consumer.close()
    versions = {api: v for api, v in sent}
    assert versions["Produce"] <= 13 and versions["Fetch"] <= 18 and versions["InitProducerId"] <= 5
    assert versions["ApiVersion"] <= 5 and versions["ListOffsets"] <= 11
