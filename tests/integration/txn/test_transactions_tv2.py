"""Transaction version 2 (KIP-890 part 2) over TCP: ApiVersions features field by field, a full TV2 transaction
with raw requests (Produce v12 adding the partition implicitly, EndTxn v5 bumping the epoch, the next transaction
at the new epoch, a zombie at the old epoch fenced, read_committed Fetch), TxnOffsetCommit v5 without
AddOffsetsToTxn; the TV2 versions not served at transaction.version 1; and real clients against a TV2 broker:
confluent-kafka (commit and abort), kafka-python and aiokafka (transactions v1)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from protocol import records as rec
from protocol.control_records import ControlRecordType, parse_control_key
from protocol.errors import ErrorCode
from tests.helpers.raw_client import RawClient
from tests.helpers.txn_clients import aiokafka_commit_abort_commit, init_producer
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

PRODUCE, FETCH, API_VERSIONS = 0, 1, 18
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT, FIND_COORDINATOR = 24, 25, 26, 28, 10
OFFSET_FETCH = 9


@pytest.fixture(scope="module")
def tv2_broker(broker_module):
    admin = AdminClient({"bootstrap.servers": broker_module.bootstrap})
    topics = ["tv2-raw", "tv2-fenced", "tv2-offsets", "tv2-confluent", "tv2-kafka-python", "tv2-aiokafka"]
    for f in admin.create_topics([NewTopic(t, num_partitions=1) for t in topics]).values():
        f.result(timeout=30)
    return broker_module


def api_versions(raw: RawClient, version: int):
    r = raw.call(API_VERSIONS, version, {"client_software_name": "shoal-test", "client_software_version": "1.0"})
    assert r.error_code == 0
    return r


def max_versions(r) -> dict[int, int]:
    return {k.api_key: k.max_version for k in r.api_keys}


def produce_v12(raw: RawClient, topic: str, tid: str, pid: int, epoch: int, seq: int, values: list[bytes]):
    batch = rec.build_batch([rec.Record(None, v) for v in values], producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, transactional=True)
    r = raw.call(PRODUCE, 12, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


def produce_next(raw: RawClient, topic: str, tid: str, pid: int, epoch: int, seq: int, values: list[bytes]):
    """Produce v12 as a client right after an EndTxn: while the previous transaction's markers are written the
    coordinator answers CONCURRENT_TRANSACTIONS, which the partition leader turns into NOT_ENOUGH_REPLICAS (a
    retriable error, as Kafka); retried like a client does."""
    def attempt():
        p = produce_v12(raw, topic, tid, pid, epoch, seq, values)
        return None if p.error_code == ErrorCode.NOT_ENOUGH_REPLICAS else p
    return wait_until(attempt, timeout=30, what="the produce is accepted once the markers are written")


def end_v5(raw: RawClient, tid: str, pid: int, epoch: int, commit: bool):
    return raw.call(END_TXN, 5, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                 "committed": commit})


def read_committed(raw: RawClient, topic: str) -> tuple[int, list[bytes]]:
    r = raw.call(FETCH, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                             "isolation_level": 1, "session_id": 0, "session_epoch": -1,
                             "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                         "partition_max_bytes": 1 << 20}]}]})
    part = r.responses[0].partitions[0]
    assert part.error_code == 0
    # TV2 keeps the producer id from one transaction to the next: a batch's fate is its next marker's
    values: list[bytes] = []
    pending: list[bytes] = []
    for _pos, header, view in rec.iter_batch_views(part.records or b""):
        records = rec.decode_records(view)
        if not header.is_control:
            pending += [r.value for r in records]
            continue
        if parse_control_key(records[0].key) is ControlRecordType.COMMIT:
            values += pending
        pending = []
    return part.last_stable_offset, values


def test_api_versions_advertise_transaction_version_2(tv2_broker) -> None:
    with RawClient(tv2_broker.port) as raw:
        r = api_versions(raw, 4)
        supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
        assert supported == {"metadata.version": (7, 25), "kraft.version": (0, 1), "transaction.version": (0, 2),
                             "group.version": (0, 1), "share.version": (0, 1), "streams.version": (0, 1)}
        finalized = {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features}
        # levels 0 are left out (kraft.version: a static quorum), as Kafka
        assert finalized == {"metadata.version": (25, 25), "transaction.version": (2, 2), "group.version": (1, 1),
                             "share.version": (1, 1), "streams.version": (1, 1)}
        assert r.finalized_features_epoch > 0
        versions = max_versions(r)
        assert (versions[PRODUCE], versions[END_TXN], versions[ADD_PARTITIONS_TO_TXN],
                versions[TXN_OFFSET_COMMIT]) == (13, 5, 5, 6)
        # v3: the supported features with minimum 0 are left out (KAFKA-17492), the finalized ones are not
        r3 = api_versions(raw, 3)
        assert [(f.name, f.min_version, f.max_version) for f in r3.supported_features] == [
            ("metadata.version", 7, 25)]
        assert {f.name for f in r3.finalized_features} == set(finalized)
        assert r3.finalized_features_epoch == r.finalized_features_epoch


def test_tv2_transaction_with_raw_requests(tv2_broker) -> None:
    topic, tid = "tv2-raw", f"tv2-{uuid.uuid4().hex[:8]}"
    with RawClient(tv2_broker.port) as raw:
        pid, epoch = init_producer(raw, tid, version=5)
        # no AddPartitionsToTxn: Produce v12 adds the partition
        p = produce_v12(raw, topic, tid, pid, epoch, 0, [b"one", b"two"])
        assert (p.error_code, p.base_offset) == (0, 0)
        assert read_committed(raw, topic) == (0, [])  # open transaction
        r = end_v5(raw, tid, pid, epoch, commit=True)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
        # the next transaction at the bumped epoch, its sequence restarting at 0; then aborted
        p = produce_next(raw, topic, tid, pid, epoch + 1, 0, [b"aborted"])
        assert p.error_code == 0, p
        r = end_v5(raw, tid, pid, epoch + 1, commit=False)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 2)
        # a third one committed
        assert produce_next(raw, topic, tid, pid, epoch + 2, 0, [b"three"]).error_code == 0
        r = end_v5(raw, tid, pid, epoch + 2, commit=True)
        assert (r.error_code, r.producer_epoch) == (0, epoch + 3)

        # a zombie at an old epoch is fenced, on the partition and by the coordinator
        p = produce_v12(raw, topic, tid, pid, epoch + 1, 1, [b"zombie"])
        assert p.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        r = end_v5(raw, tid, pid, epoch + 1, commit=True)
        assert r.error_code == ErrorCode.PRODUCER_FENCED
        assert (r.producer_id, r.producer_epoch) == (-1, -1)

        def committed() -> tuple[int, list[bytes]]:
            return read_committed(raw, topic)

        wait_until(lambda: committed()[1] == [b"one", b"two", b"three"], timeout=30,
                   what="read_committed sees the committed transactions only")


def test_tv2_zombie_on_a_fresh_partition_is_fenced(tv2_broker) -> None:
    """The old epoch on a partition the transaction never touched: the coordinator's implicit add refuses it."""
    tid = f"tv2-z-{uuid.uuid4().hex[:8]}"
    with RawClient(tv2_broker.port) as raw:
        pid, epoch = init_producer(raw, tid, version=5)
        assert produce_v12(raw, "tv2-raw", tid, pid, epoch, 0, [b"x"]).error_code == 0
        assert end_v5(raw, tid, pid, epoch, commit=True).producer_epoch == epoch + 1
        p = produce_v12(raw, "tv2-fenced", tid, pid, epoch, 0, [b"zombie"])
        assert p.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert read_committed(raw, "tv2-fenced")[1] == []


def test_add_partitions_to_txn_v5_adds_the_tv2_way(tv2_broker) -> None:
    """The brokers' batched form at v5 (verify_only false): a TV2 add, so EndTxn v5 ends it with a bumped epoch."""
    tid = f"tv2-a-{uuid.uuid4().hex[:8]}"
    with RawClient(tv2_broker.port) as raw:
        pid, epoch = init_producer(raw, tid, version=5)
        r = raw.call(ADD_PARTITIONS_TO_TXN, 5, {"transactions": [
            {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": False,
             "topics": [{"name": "tv2-fenced", "partitions": [0]}]}]})
        assert r.error_code == 0
        [txn] = r.results_by_transaction
        assert [(t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition])
                for t in txn.topic_results] == [("tv2-fenced", [(0, 0)])]
        r = end_v5(raw, tid, pid, epoch, commit=False)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)


def test_txn_offset_commit_v5_adds_the_offsets_partition(tv2_broker) -> None:
    tid, group = f"tv2-o-{uuid.uuid4().hex[:8]}", f"tv2-group-{uuid.uuid4().hex[:8]}"
    with RawClient(tv2_broker.port) as raw:
        pid, epoch = init_producer(raw, tid, version=5)
        assert produce_v12(raw, "tv2-offsets", tid, pid, epoch, 0, [b"a"]).error_code == 0
        r = raw.call(TXN_OFFSET_COMMIT, 5, {
            "transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "tv2-offsets", "partitions": [
                {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        assert r.topics[0].partitions[0].error_code == 0, r  # no AddOffsetsToTxn
        assert end_v5(raw, tid, pid, epoch, commit=True).error_code == 0

        def committed_offset() -> int:
            f = raw.call(OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
                {"name": "tv2-offsets", "partition_indexes": [0]}]}], "require_stable": True})
            return f.groups[0].topics[0].partitions[0].committed_offset

        wait_until(lambda: committed_offset() == 7, timeout=30, what="the transaction's offset is committed")


def test_tv1_broker_serves_no_tv2_versions(broker_factory) -> None:
    broker = broker_factory({"transaction.version": "1"})
    with RawClient(broker.port) as raw:
        r = api_versions(raw, 4)
        finalized = {f.name: f.max_version_level for f in r.finalized_features}
        assert finalized["transaction.version"] == 1
        versions = max_versions(r)
        assert (versions[PRODUCE], versions[END_TXN], versions[ADD_PARTITIONS_TO_TXN],
                versions[TXN_OFFSET_COMMIT]) == (11, 4, 4, 4)
        pid, epoch = init_producer(raw, "tv1-only", version=5)
        with pytest.raises(ConnectionError):  # an unsupported version closes the connection, as Kafka
            end_v5(raw, "tv1-only", pid, epoch, commit=True)


def confluent_transaction(bootstrap: str, topic: str, tid: str, values: list[bytes], commit: bool) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for v in values:
        p.produce(topic, v, partition=0)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)


def consume_committed(bootstrap: str, topic: str, expected: int, timeout_s: float = 20) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
        return out
    finally:
        c.close()


def test_confluent_transactional_producer_against_tv2(tv2_broker) -> None:
    topic, bootstrap = "tv2-confluent", tv2_broker.bootstrap
    confluent_transaction(bootstrap, topic, "tv2-cf-1", [b"c1", b"c2"], commit=True)
    confluent_transaction(bootstrap, topic, "tv2-cf-1", [b"aborted"], commit=False)
    confluent_transaction(bootstrap, topic, "tv2-cf-1", [b"c3"], commit=True)
    assert consume_committed(bootstrap, topic, 3) == [b"c1", b"c2", b"c3"]


def test_kafka_python_tv1_transactions_against_tv2(tv2_broker) -> None:
    from kafka import KafkaProducer

    topic = "tv2-kafka-python"
    p = KafkaProducer(bootstrap_servers=tv2_broker.bootstrap, transactional_id="tv2-kp-1")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"k1", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"k-aborted", partition=0)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"k2", partition=0)
        p.commit_transaction()
    finally:
        p.close(timeout=10)
    assert consume_committed(tv2_broker.bootstrap, topic, 2) == [b"k1", b"k2"]


def test_aiokafka_tv1_transactions_against_tv2(tv2_broker) -> None:
    topic = "tv2-aiokafka"
    asyncio.run(aiokafka_commit_abort_commit(tv2_broker.bootstrap, "tv2-aio-1", topic, 0, [b"a1"], b"a-aborted",
                                             b"a2"))
    assert consume_committed(tv2_broker.bootstrap, topic, 2) == [b"a1", b"a2"]
