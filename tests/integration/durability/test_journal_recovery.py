"""The metadata journal is never truncated or dropped past something unreadable: start-up stops with a clear error
and every topic directory stays where it was."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from protocol import records as rec
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.confluent_clients import admin_client

pytestmark = pytest.mark.integration

TOPICS = [f"t{i}" for i in range(6)]


def _journal_file(data_dir: Path) -> Path:
    return data_dir / "__cluster_metadata-0" / "00000000000000000000.log"


def _batch_creating(data: bytes, topic: str) -> tuple[int, rec.BatchHeader]:
    for pos, header in rec.iter_batches(data):
        batch = data[pos:pos + header.size]
        if any(r.value and topic.encode() in r.value for r in rec.decode_records(batch)):
            return pos, header
    raise AssertionError(f"no journal batch creates {topic}")


def _populate(broker: BrokerProcess) -> None:
    admin = admin_client(broker.bootstrap)
    for name in TOPICS:  # one journal batch each
        admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for name in TOPICS:
        producer.produce(name, b"acknowledged")
    assert producer.flush(30) == 0
    assert broker.stop() == 0


def _snapshot(data_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data_dir)): p.read_bytes() for p in sorted(data_dir.rglob("*.log"))}


@pytest.mark.parametrize("damage", ["bad_crc", "unreadable_frame"])
def test_corrupt_middle_journal_frame_stops_start_up(tmp_path: Path, damage: str) -> None:
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir, tmp_path / "broker.log")
    broker.start()
    try:
        _populate(broker)
        journal = _journal_file(data_dir)
        data = bytearray(journal.read_bytes())
        pos, header = _batch_creating(bytes(data), "t2")  # t3..t5 come after it
        if damage == "bad_crc":
            data[pos + header.size - 1] ^= 0xFF
        else:
            # the TopicRecord's metadata frame version becomes 101, and the batch gets a valid CRC again
            batch = bytes(data[pos:pos + header.size])
            value = rec.decode_records(batch)[0].value
            at = pos + batch.index(value)
            data[at] = 101
            struct.pack_into(">I", data, pos + 17, rec.batch_crc(data, pos, header.size))
        journal.write_bytes(bytes(data))
        before = _snapshot(data_dir)

        with pytest.raises(RuntimeError) as err:
            broker.start()
        assert "metadata journal" in str(err.value) or "refusing to truncate" in str(err.value)
        assert _snapshot(data_dir) == before  # nothing truncated, no topic directory removed
        for name in TOPICS:
            assert (data_dir / f"{name}-0").is_dir()
    finally:
        broker.stop()
