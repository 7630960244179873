"""partition_for reproduces Kafka's Utils.abs(String.hashCode()) % n over "group:topicId:partition"."""

from __future__ import annotations

import uuid

import pytest

from broker.config import BrokerConfig
from broker.share_coordinator import ShareCoordinatorConfig, SharePartitionKey, partition_for
from broker.share_coordinator.keys import kafka_uuid_str, partition_for_coordinator_key
from protocol.java_hash import java_abs, java_string_hash

ZERO = uuid.UUID(int=0)
SOME = uuid.UUID("12345678-9abc-def0-0fed-cba987654321")

# Values printed by jshell (String.hashCode, then Utils.abs(h) % 50).
JAVA = [
    ("polygenelubricants", -2147483648, 0),  # hashCode == Integer.MIN_VALUE: Utils.abs maps it to 0
    ("hello", 99162322, 22),
    ("g1:AAAAAAAAAAAAAAAAAAAAAA:0", -1506055834, 34),
    ("my-group:EjRWeJq83vAP7cuph2VDIQ:7", 157799656, 6),
    ("grüppe-😀:AAAAAAAAAAAAAAAAAAAAAA:3", -2071191593, 43),  # non-BMP: hashed as two UTF-16 units
]


@pytest.mark.parametrize(("s", "h", "p"), JAVA)
def test_java_string_hash_and_partition(s: str, h: int, p: int) -> None:
    assert java_string_hash(s) == h
    assert partition_for_coordinator_key(s, 50) == p


def test_small_hashes_by_hand() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("ab") == 97 * 31 + 98
    assert java_abs(-5) == 5 and java_abs(-(1 << 31)) == 0


def test_topic_id_printed_as_kafka_uuid() -> None:
    assert kafka_uuid_str(ZERO) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert kafka_uuid_str(SOME) == "EjRWeJq83vAP7cuph2VDIQ"
    assert SharePartitionKey("g1", ZERO, 0).coordinator_key() == "g1:AAAAAAAAAAAAAAAAAAAAAA:0"


def test_partition_for_key() -> None:
    assert partition_for(SharePartitionKey("g1", ZERO, 0), 50) == 34
    assert partition_for(SharePartitionKey("my-group", SOME, 7), 50) == 6
    assert partition_for(SharePartitionKey("my-group", SOME, 7), 1) == 0
    assert all(0 <= partition_for(SharePartitionKey(f"g{i}", uuid.uuid4(), i), 7) < 7 for i in range(200))


def test_config_from_properties() -> None:
    assert ShareCoordinatorConfig.from_properties({}) == ShareCoordinatorConfig(50, 500)
    cfg = ShareCoordinatorConfig.from_properties({
        "share.coordinator.state.topic.num.partitions": "3",
        "share.coordinator.snapshot.update.records.per.snapshot": "10"})
    assert cfg == ShareCoordinatorConfig(3, 10)
    config = BrokerConfig({"share.coordinator.state.topic.num.partitions": "5"})
    assert ShareCoordinatorConfig.from_config(config).state_topic_num_partitions == 5
    with pytest.raises(ValueError):
        ShareCoordinatorConfig(snapshot_update_records_per_snapshot=501)
    with pytest.raises(ValueError):
        ShareCoordinatorConfig(state_topic_num_partitions=0)
