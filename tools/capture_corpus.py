"""Capture real clients' request frames against a real Shoal broker, as the fuzz corpus.

Starts `python -m broker` on a free 127.0.0.1 port behind a recording TCP proxy (the broker advertises the
proxy, so every connection of every client goes through it), drives confluent-kafka (AdminClient, idempotent and
acks=0/1 Producers with each compression codec, Consumer, ShareConsumer with explicit acknowledgements, group
consumers of the classic and the KIP-848 protocol, group admin), kafka-python (admin, producer, consumer, group
consumer) and aiokafka (older non-flexible versions), SASL clients on a SASL_PLAINTEXT listener (SCRAM credentials
altered and described, confluent SCRAM-SHA-256 and SCRAM-SHA-512, kafka-python PLAIN), adds seeds for served APIs
no client sends, and writes the frames (size prefix excluded) to
tests/fuzz/corpus.txt, one `client api_key api_version hex` line each, at most a few per (client, api, version).

    python tools/capture_corpus.py [--out PATH] [--per-api 4]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers.broker_process import BrokerProcess  # noqa: E402

TOPIC, OTHER, SHARED = "cap-a", "cap-b", "cap-share"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')
SCRAM_USER, SCRAM_PASSWORD = "cap-scram", "cap-scram-secret"


class RecordingProxy:
    """Forwards client connections to the broker and records each client->broker frame under `self.label`."""

    def __init__(self) -> None:
        self.label = "?"
        self.frames: list[tuple[str, bytes]] = []
        self.broker_port = 0
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        label = self.label
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.broker_port)
        except OSError:
            writer.close()
            return

        async def upstream() -> None:
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                while True:
                    head = await reader.readexactly(4)
                    frame = await reader.readexactly(int.from_bytes(head, "big", signed=True))
                    self.frames.append((label, frame))
                    up_writer.write(head + frame)
                    await up_writer.drain()
            up_writer.close()

        async def downstream() -> None:
            with contextlib.suppress(ConnectionError):
                while data := await up_reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            writer.close()

        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(upstream(), downstream(), return_exceptions=True)


def drive_confluent(bootstrap: str) -> None:
    from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    common: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap, "client.id": "capture-confluent"}
    admin = AdminClient(common)
    for fut in admin.create_topics([NewTopic(TOPIC, 2, 1, config={"retention.ms": "86400000"}),
                                    NewTopic(OTHER, 1, 1), NewTopic(SHARED, 2, 1)]).values():
        with contextlib.suppress(Exception):
            fut.result(20)
    for fut in admin.describe_configs([ConfigResource(ResourceType.TOPIC, TOPIC),
                                       ConfigResource(ResourceType.BROKER, "1")]).values():
        with contextlib.suppress(Exception):
            fut.result(20)
    group = ConfigResource(ResourceType.GROUP, "cap-share-group", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    topic = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([group, topic]).values():
        with contextlib.suppress(Exception):
            fut.result(20)
    for fut in admin.create_partitions([NewPartitions(OTHER, 2)]).values():
        with contextlib.suppress(Exception):
            fut.result(20)
    admin.list_topics(timeout=10)
    with contextlib.suppress(Exception):
        admin.describe_cluster().result(10)
    with contextlib.suppress(Exception):
        for fut in admin.list_offsets({TopicPartition(TOPIC, 0): OffsetSpec.latest(),
                                       TopicPartition(TOPIC, 1): OffsetSpec.earliest()}).values():
            fut.result(10)

    extras: list[dict[str, str | int | float | bool]] = [{"enable.idempotence": True, "acks": "all"},
                                                         {"acks": "1", "compression.type": "gzip"},
                                                         {"acks": "1", "compression.type": "snappy"},
                                                         {"acks": "1", "compression.type": "lz4"},
                                                         {"acks": "all", "compression.type": "zstd"},
                                                         {"acks": "0"}]
    for i, extra in enumerate(extras):
        p = Producer({**common, "linger.ms": 5, **extra})
        for n in range(20):
            p.produce(TOPIC if n % 2 else SHARED, key=f"k{n}".encode(), value=f"value {i} {n}".encode() * 3,
                      headers=[("h", b"v")] if n % 3 == 0 else None)
        p.flush(20)

    c = Consumer({**common, "group.id": "cap-unused", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])
    end = time.monotonic() + 5
    got = 0
    while got < 40 and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.close()

    sc = ShareConsumer({**common, "group.id": "cap-share-group", "share.acknowledgement.mode": "explicit"})
    sc.subscribe([SHARED])
    kinds = [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT]
    end = time.monotonic() + 15
    acked = 0
    while acked < 30 and time.monotonic() < end:
        for m in sc.poll(1.0):
            if m.error() is None:
                sc.acknowledge(m, kinds[acked % 3])
                acked += 1
        with contextlib.suppress(Exception):
            sc.commit_sync()
    sc.close()
    for fut in admin.delete_topics([OTHER]).values():
        with contextlib.suppress(Exception):
            fut.result(20)


def drive_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="capture-kafka-python")
    with contextlib.suppress(Exception):
        admin.create_topics([NewTopic("cap-kp", 1, 1)])
    with contextlib.suppress(Exception):
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    with contextlib.suppress(Exception):
        admin.list_topics()
    p = KafkaProducer(bootstrap_servers=bootstrap, client_id="capture-kafka-python", acks="all",
                      compression_type="gzip")
    for n in range(10):
        p.send("cap-kp", key=b"k", value=f"kafka-python {n}".encode(), headers=[("h", b"v")])
    p.flush(10)
    p.close(5)
    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id="capture-kafka-python", enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    c.assign([TopicPartition("cap-kp", 0)])
    for _ in c:
        pass
    c.close()
    with contextlib.suppress(Exception):
        admin.delete_topics(["cap-kp"])
    admin.close()


def drive_aiokafka(bootstrap: str) -> None:
    """aiokafka 0.14 speaks the older, non-flexible versions (Produce v8, Fetch v11, Metadata v5...)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="capture-aiokafka", acks="all",
                                    compression_type="gzip", enable_idempotence=True)
        await producer.start()
        try:
            for n in range(10):
                await producer.send_and_wait(TOPIC, f"aiokafka {n}".encode(), key=b"k", partition=n % 2)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="capture-aiokafka",
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
            await consumer.getmany(timeout_ms=2000)
            await consumer.end_offsets([TopicPartition(TOPIC, 0)])
        finally:
            await consumer.stop()

    asyncio.run(run())


def _poll_group(consumer, wanted: int, seconds: float) -> int:
    """Poll a subscribed consumer until it read `wanted` records or the time is up (joining takes a while)."""
    got = 0
    end = time.monotonic() + seconds
    while got < wanted and time.monotonic() < end:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    return got


def drive_confluent_groups(bootstrap: str) -> None:
    """Subscribed consumers of both group protocols: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup
    (classic), ConsumerGroupHeartbeat (KIP-848), OffsetCommit, OffsetFetch; then the group admin requests."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    common = {"bootstrap.servers": bootstrap, "client.id": "capture-confluent", "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    for group, protocol, extra in (("cap-classic", "classic", {"session.timeout.ms": 6000,
                                                                "heartbeat.interval.ms": 300}),
                                   ("cap-848", "consumer", {})):
        c = Consumer({**common, "group.id": group, "group.protocol": protocol, **extra})
        c.subscribe([TOPIC])
        _poll_group(c, 10, 20)
        with contextlib.suppress(Exception):
            c.commit(asynchronous=False)
        with contextlib.suppress(Exception):
            c.commit(offsets=[TopicPartition(TOPIC, 0, 3), TopicPartition(TOPIC, 1, 2)], asynchronous=False)
        with contextlib.suppress(Exception):
            c.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=10)
        time.sleep(1.0)  # a few heartbeats
        c.close()
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "capture-confluent"})
    with contextlib.suppress(Exception):
        admin.list_consumer_groups().result(10)
    with contextlib.suppress(Exception):
        for fut in admin.describe_consumer_groups(["cap-classic", "cap-848"]).values():
            fut.result(10)
    with contextlib.suppress(Exception):
        for fut in admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("cap-classic")]).values():
            fut.result(10)
    with contextlib.suppress(Exception):
        for fut in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                "cap-classic", [TopicPartition(TOPIC, 0, 1)])]).values():
            fut.result(10)


def drive_kafka_python_group(bootstrap: str) -> None:
    """kafka-python's classic group consumer (its own JoinGroup/SyncGroup/Heartbeat/OffsetCommit versions), on a
    topic of its own (it cannot read the snappy batches of the confluent producers)."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="capture-kafka-python")
    with contextlib.suppress(Exception):
        admin.create_topics([NewTopic("cap-kp-group", 2, 1)])
    p = KafkaProducer(bootstrap_servers=bootstrap, client_id="capture-kafka-python", acks="all")
    for n in range(10):
        p.send("cap-kp-group", value=f"kafka-python group {n}".encode())
    p.flush(10)
    p.close(5)
    c = KafkaConsumer("cap-kp-group", bootstrap_servers=bootstrap, client_id="capture-kafka-python",
                      group_id="cap-kp-group", enable_auto_commit=False, auto_offset_reset="earliest",
                      consumer_timeout_ms=4000, heartbeat_interval_ms=300, session_timeout_ms=6000)
    for n, _ in enumerate(c, 1):
        if n == 5:
            c.commit()
    with contextlib.suppress(Exception):
        c.commit()
    c.close()
    with contextlib.suppress(Exception):
        admin.delete_topics(["cap-kp-group"])
    admin.close()


def drive_sasl(bootstrap: str, sasl_bootstrap: str) -> None:
    """SCRAM credentials through the admin API (plaintext listener), then clients authenticating on the SASL
    listener: SaslHandshake and SaslAuthenticate frames of confluent (SCRAM) and kafka-python (PLAIN)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )
    from kafka import KafkaProducer

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "capture-confluent"})
    # One request per mechanism: Kafka's controller refuses two changes of one user in a request.
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upsert = UserScramCredentialUpsertion(SCRAM_USER, ScramCredentialInfo(mechanism, 4096),
                                              SCRAM_PASSWORD.encode())
        with contextlib.suppress(Exception):
            admin.alter_user_scram_credentials([upsert])[SCRAM_USER].result(20)
    with contextlib.suppress(Exception):
        # named users: a future per user (the answer is a single future only when no user is named)
        described = admin.describe_user_scram_credentials([SCRAM_USER, "nobody"])
        concurrent.futures.wait(list(described.values()) if isinstance(described, dict) else [described], 10)
    for sasl_mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        p = Producer({"bootstrap.servers": sasl_bootstrap, "client.id": "capture-confluent", "acks": "all",
                      "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": sasl_mechanism,
                      "sasl.username": SCRAM_USER, "sasl.password": SCRAM_PASSWORD})
        for n in range(3):
            p.produce(TOPIC, f"sasl {sasl_mechanism} {n}".encode())
        p.flush(20)
    kp = KafkaProducer(bootstrap_servers=sasl_bootstrap, client_id="capture-kafka-python", acks="all",
                       security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username="admin",
                       sasl_plain_password="admin-secret")
    for n in range(3):
        kp.send(TOPIC, f"sasl plain {n}".encode())
    kp.flush(10)
    kp.close(5)
    with contextlib.suppress(Exception):
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            SCRAM_USER, ScramMechanism.SCRAM_SHA_512)])[SCRAM_USER].result(10)


def synthetic_frames() -> list[tuple[str, bytes]]:
    """Seeds for served APIs no client above sends (share-state RPCs, ShareGroupDescribe, DescribeCluster,
    PushTelemetry, ListConfigResources, DeleteRecords, OffsetForLeaderEpoch, AlterConfigs, the log dir, delegation
    token, election, reassignment, client quota, quorum, feature, DescribeTopicPartitions, transaction, marker,
    ACL and group offset admin APIs), encoded
    with our codecs; topic ids are placeholders the fuzzer replaces with live ones."""
    import uuid

    from protocol.codec import request_codec
    from protocol.compression import GZIP, compress
    from protocol.framing import RequestHeader, encode_request
    from tests.helpers.telemetry import metrics_payload

    tid = uuid.UUID("0b7ad1d8-5b32-4c8e-9d36-6f2f0a3a8e11")
    bodies: list[tuple[int, int, dict[str, Any]]] = [
        (60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}),
        (77, 1, {"group_ids": ["cap-share-group", "nope"], "include_authorized_operations": True}),
        (83, 0, {"group_id": "cap-share-group", "topics": [
            {"topic_id": tid, "partitions": [{"partition": 0, "state_epoch": 1, "start_offset": 0}]}]}),
        (84, 0, {"group_id": "cap-share-group", "topics": [
            {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}),
        (85, 1, {"group_id": "cap-share-group", "topics": [{"topic_id": tid, "partitions": [
            {"partition": 0, "state_epoch": 1, "leader_epoch": 0, "start_offset": 0, "delivery_complete_count": 1,
             "state_batches": [{"first_offset": 0, "last_offset": 3, "delivery_state": 2, "delivery_count": 1}]}]}]}),
        (86, 0, {"group_id": "cap-share-group", "topics": [{"topic_id": tid, "partitions": [{"partition": 0}]}]}),
        (87, 1, {"group_id": "cap-share-group", "topics": [
            {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}),
        # client telemetry (KIP-714): a push of a gzip'd OTLP payload, and ListConfigResources v1
        (71, 0, {"client_instance_id": uuid.UUID(int=0)}),
        (72, 0, {"client_instance_id": tid, "subscription_id": 1, "terminating": False, "compression_type": 1,
                 "metrics": compress(GZIP, metrics_payload())}),
        (74, 1, {"resource_types": [16, 2]}),
        # APIs no driven client sends (confluent-kafka has no call for them, or only librdkafka internals do), at
        # their lowest and highest versions where the encoding changes (flexible versions, added fields); values
        # the broker refuses or that change nothing a later client needs (validate-only, a missing log dir)
        (21, 0, {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 1}]}], "timeout_ms": 1000}),
        (21, 2, {"topics": [{"name": OTHER, "partitions": [{"partition_index": 0, "offset": -1}]}],
                 "timeout_ms": 1000}),
        (23, 2, {"topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]}),
        (23, 4, {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
            {"partition": 1, "current_leader_epoch": 0, "leader_epoch": 5}]}]}),
        (33, 0, {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": [
            {"name": "retention.ms", "value": "86400000"}]}], "validate_only": True}),
        (33, 2, {"resources": [{"resource_type": 2, "resource_name": OTHER, "configs": [
            {"name": "cleanup.policy", "value": "delete"}, {"name": "max.message.bytes", "value": None}]}],
                 "validate_only": True}),
        (34, 1, {"dirs": [{"path": "/nonexistent-log-dir", "topics": [{"name": TOPIC, "partitions": [0, 1]}]}]}),
        (34, 2, {"dirs": [{"path": "/nonexistent-log-dir", "topics": [{"name": OTHER, "partitions": [0]}]}]}),
        (35, 1, {"topics": None}),
        (35, 5, {"topics": [{"topic": TOPIC, "partitions": [0, 1]}, {"topic": "nope", "partitions": [0]}]}),
        (38, 1, {"renewers": [{"principal_type": "User", "principal_name": "alice"}], "max_lifetime_ms": -1}),
        (38, 3, {"owner_principal_type": "User", "owner_principal_name": "bob", "renewers": [],
                 "max_lifetime_ms": 3_600_000}),
        (39, 1, {"hmac": bytes(range(32)), "renew_period_ms": -1}),
        (39, 2, {"hmac": bytes(32), "renew_period_ms": 60_000}),
        (40, 1, {"hmac": bytes(range(32)), "expiry_time_period_ms": -1}),
        (40, 2, {"hmac": bytes(32), "expiry_time_period_ms": 60_000}),
        (41, 1, {"owners": None}),
        (41, 3, {"owners": [{"principal_type": "User", "principal_name": "alice"}]}),
        (43, 0, {"topic_partitions": [{"topic": TOPIC, "partitions": [0]}], "timeout_ms": 1000}),
        (43, 2, {"election_type": 1, "topic_partitions": None, "timeout_ms": 1000}),
        (45, 0, {"timeout_ms": 1000, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "replicas": [1]}, {"partition_index": 1, "replicas": None}]}]}),
        (45, 1, {"timeout_ms": 1000, "allow_replication_factor_change": False, "topics": [
            {"name": OTHER, "partitions": [{"partition_index": 0, "replicas": [1, 2]}]}]}),
        (46, 0, {"timeout_ms": 1000, "topics": None}),
        (46, 0, {"timeout_ms": 1000, "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]}),
        (48, 0, {"components": [{"entity_type": "user", "match_type": 1, "match": None}], "strict": False}),
        (48, 1, {"components": [{"entity_type": "client-id", "match_type": 0, "match": "capture-synthetic"}],
                 "strict": True}),
        (49, 0, {"entries": [{"entity": [{"entity_type": "user", "entity_name": "cap-user"}], "ops": [
            {"key": "consumer_byte_rate", "value": 1048576.0, "remove": False}]}], "validate_only": True}),
        (49, 1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "cap-client"}], "ops": [
            {"key": "request_percentage", "value": 50.0, "remove": False},
            {"key": "producer_byte_rate", "value": 0.0, "remove": True}]}], "validate_only": True}),
        (55, 0, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}),
        (55, 2, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}),
        (57, 0, {"timeout_ms": 1000, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 2, "allow_downgrade": False}]}),
        (57, 2, {"timeout_ms": 1000, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1}], "validate_only": True}),
        (74, 0, {}),
        (75, 0, {"topics": [{"name": TOPIC}, {"name": OTHER}], "response_partition_limit": 2000, "cursor": None}),
        (75, 0, {"topics": [], "response_partition_limit": 1,
                 "cursor": {"topic_name": TOPIC, "partition_index": 1}}),
        # transactions of an id that does not exist (the drivers run no transactional producer), ACLs on a broker
        # without an authorizer, group and share-group offset admin of absent groups, producer and transaction
        # listings
        (24, 3, {"v3_and_below_transactional_id": "cap-txn", "v3_and_below_producer_id": 1000,
                 "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": TOPIC, "partitions": [0, 1]}]}),
        (24, 5, {"transactions": [{"transactional_id": "cap-txn", "producer_id": 1000, "producer_epoch": 0,
                                   "verify_only": True, "topics": [{"name": TOPIC, "partitions": [0]}]}]}),
        (25, 0, {"transactional_id": "cap-txn", "producer_id": 1000, "producer_epoch": 0, "group_id": "cap-none"}),
        (25, 4, {"transactional_id": "cap-txn", "producer_id": 1000, "producer_epoch": 0, "group_id": "cap-none"}),
        (26, 0, {"transactional_id": "cap-txn", "producer_id": 1000, "producer_epoch": 0, "committed": False}),
        (26, 5, {"transactional_id": "cap-txn", "producer_id": 1000, "producer_epoch": 0, "committed": True}),
        (28, 0, {"transactional_id": "cap-txn", "group_id": "cap-none", "producer_id": 1000, "producer_epoch": 0,
                 "topics": [{"name": TOPIC, "partitions": [
                     {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]}),
        (28, 5, {"transactional_id": "cap-txn", "group_id": "cap-none", "producer_id": 1000, "producer_epoch": 0,
                 "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                 "topics": [{"name": TOPIC, "partitions": [
                     {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                      "committed_metadata": None}]}]}),
        (29, 1, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                 "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}),
        (29, 3, {"resource_type_filter": 2, "resource_name_filter": TOPIC, "pattern_type_filter": 3,
                 "principal_filter": "User:alice", "host_filter": "*", "operation": 3, "permission_type": 3}),
        (30, 1, {"creations": [{"resource_type": 2, "resource_name": "cap-acl", "resource_pattern_type": 3,
                                "principal": "User:cap-acl", "host": "*", "operation": 3, "permission_type": 3}]}),
        (30, 3, {"creations": [{"resource_type": 3, "resource_name": "cap-", "resource_pattern_type": 4,
                                "principal": "User:cap-acl", "host": "127.0.0.1", "operation": 2,
                                "permission_type": 3}]}),
        (31, 1, {"filters": [{"resource_type_filter": 2, "resource_name_filter": "cap-acl", "pattern_type_filter": 3,
                              "principal_filter": "User:cap-acl", "host_filter": None, "operation": 1,
                              "permission_type": 1}]}),
        (31, 3, {"filters": [{"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 2,
                              "principal_filter": "User:cap-acl", "host_filter": None, "operation": 1,
                              "permission_type": 1}]}),
        (42, 0, {"groups_names": ["cap-none", "cap-none-2"]}),
        (42, 3, {"groups_names": ["cap-none"]}),
        (47, 0, {"group_id": "cap-none", "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}]}),
        (61, 0, {"topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]}),
        (65, 0, {"transactional_ids": ["cap-txn", ""]}),
        (66, 0, {"state_filters": [], "producer_id_filters": []}),
        (66, 2, {"state_filters": ["Ongoing"], "producer_id_filters": [1000], "duration_filter": -1,
                 "transactional_id_pattern": "cap-.*"}),
        (90, 0, {"groups": [{"group_id": "cap-share-group", "topics": None}]}),
        (90, 1, {"groups": [{"group_id": "cap-none", "topics": [{"topic_name": TOPIC, "partitions": [0, 1]}]}]}),
        (91, 0, {"group_id": "cap-none", "topics": [{"topic_name": TOPIC, "partitions": [
            {"partition_index": 0, "start_offset": 0}]}]}),
        (92, 0, {"group_id": "cap-none", "topics": [{"topic_name": TOPIC}]}),
        # an abort marker of a producer with no transaction (Kafka writes it all the same)
        (27, 1, {"markers": [{"producer_id": 1000, "producer_epoch": 0, "transaction_result": False,
                              "topics": [{"name": OTHER, "partition_indexes": [0]}], "coordinator_epoch": 0}]}),
        (27, 2, {"markers": [{"producer_id": 1000, "producer_epoch": 0, "transaction_result": False,
                              "topics": [{"name": OTHER, "partition_indexes": [0]}], "coordinator_epoch": 0,
                              "transaction_version": 2}]}),
        # streams groups (KIP-1071): a join with a topology (a repartition and a changelog topic), its leave, a
        # describe
        (88, 1, {"group_id": "cap-streams", "member_id": "cap-streams-member", "member_epoch": 0,
                 "endpoint_information_epoch": 0, "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                 "topology": {"epoch": 1, "subtopologies": [
                     {"subtopology_id": "0", "source_topics": [TOPIC], "source_topic_regex": [],
                      "state_changelog_topics": [], "repartition_sink_topics": ["cap-streams-repartition"],
                      "repartition_source_topics": [], "copartition_groups": []},
                     {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [],
                      "state_changelog_topics": [{"name": "cap-streams-changelog", "partitions": 0,
                                                  "replication_factor": 0, "topic_configs": []}],
                      "repartition_sink_topics": [],
                      "repartition_source_topics": [{"name": "cap-streams-repartition", "partitions": 0,
                                                     "replication_factor": 0, "topic_configs": []}],
                      "copartition_groups": [{"source_topics": [], "source_topic_regex": [],
                                              "repartition_source_topics": [0]}]}]},
                 "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": "cap-process",
                 "user_endpoint": {"host": "localhost", "port": 8080}, "client_tags": [{"key": "az", "value": "a"}],
                 "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}),
        (88, 0, {"group_id": "cap-streams", "member_id": "cap-streams-member", "member_epoch": -1,
                 "endpoint_information_epoch": 0, "instance_id": None, "rack_id": None, "rebalance_timeout_ms": -1,
                 "topology": None, "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
                 "process_id": None, "user_endpoint": None, "client_tags": None, "task_offsets": None,
                 "task_end_offsets": None, "shutdown_application": False}),
        (89, 1, {"group_ids": ["cap-streams", "cap-none"], "include_authorized_operations": True,
                 "include_topology_description": False}),
    ]
    out = []
    for n, (api_key, version, body) in enumerate(bodies):
        frame = encode_request(RequestHeader(api_key, version, 100 + n, "capture-synthetic"),
                               request_codec(api_key, version).encode(body))
        out.append(("synthetic", frame[4:]))
    return out


async def capture(out: Path, per_api: int) -> int:
    from protocol.framing import decode_request_header

    proxy = RecordingProxy()
    srv = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    proxy.port = srv.sockets[0].getsockname()[1]
    sasl_proxy = RecordingProxy()  # in front of the SASL_PLAINTEXT listener; its frames are labelled "sasl"
    sasl_proxy.label = "sasl"
    sasl_proxy.frames = proxy.frames
    sasl_srv = await asyncio.start_server(sasl_proxy.handle, "127.0.0.1", 0)
    sasl_proxy.port = sasl_srv.sockets[0].getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="shoal-capture-") as tmp:
        # The port file holds the advertised (proxy) port, so the broker listens on ports chosen here.
        for p in (proxy, sasl_proxy):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                p.broker_port = probe.getsockname()[1]
        broker = BrokerProcess(Path(tmp) / "data", Path(tmp) / "broker.log", overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{proxy.broker_port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{sasl_proxy.broker_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port},"
                                    f"SASL_PLAINTEXT://127.0.0.1:{sasl_proxy.port}",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
        broker.start()
        bootstrap, sasl_bootstrap = f"127.0.0.1:{proxy.port}", f"127.0.0.1:{sasl_proxy.port}"
        try:
            for label, driver in (("confluent", drive_confluent), ("confluent", drive_confluent_groups),
                                  ("kafka-python", drive_kafka_python), ("kafka-python", drive_kafka_python_group),
                                  ("aiokafka", drive_aiokafka), ("confluent", drive_sasl)):
                proxy.label = label
                done = threading.Event()
                errors: list[BaseException] = []

                def run(driver=driver, errors=errors, done=done) -> None:
                    try:
                        if driver is drive_sasl:
                            driver(bootstrap, sasl_bootstrap)
                        else:
                            driver(bootstrap)
                    except BaseException as err:  # keep what was captured; report it
                        errors.append(err)
                    finally:
                        done.set()

                threading.Thread(target=run, daemon=True).start()
                while not done.is_set():
                    await asyncio.sleep(0.05)
                if errors:
                    print(f"{label} ({driver.__name__}): {errors[0]!r}", file=sys.stderr)
        finally:
            broker.stop()
            srv.close()
            sasl_srv.close()
    kept: dict[tuple[str, int, int], list[bytes]] = {}
    for label, frame in proxy.frames + synthetic_frames():
        try:
            header, _ = decode_request_header(frame)
        except Exception:  # noqa: BLE001 - not a request we can file
            continue
        bucket = kept.setdefault((label, header.api_key, header.api_version), [])
        if frame in bucket:
            continue
        if len(bucket) < per_api:
            bucket.append(frame)
        else:  # the first ones and the last one: a member's last heartbeat (its leave) matters too
            bucket[-1] = frame
    kept_frames = {frame for frames in kept.values() for frame in frames}
    lines = []
    for label, frame in proxy.frames + synthetic_frames():  # capture order: replayed, it recreates members
        if frame in kept_frames:
            kept_frames.discard(frame)
            header, _ = decode_request_header(frame)
            lines.append(f"{label} {header.api_key} {header.api_version} {frame.hex()}")
    out.write_text("\n".join(lines) + "\n")
    for (label, api, version), frames in sorted(kept.items()):
        print(f"{label} api {api} v{version}: {len(frames)}", file=sys.stderr)
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fuzz" / "corpus.txt")
    ap.add_argument("--per-api", type=int, default=6, help="frames kept per (client, api, version)")
    args = ap.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    n = asyncio.run(capture(args.out, args.per_api))
    print(f"wrote {n} frames to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
