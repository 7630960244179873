"""What a restart finds on disk, with real broker processes: a lost meta.properties next to existing logs stops
start-up with how to repair it (never a new cluster id), and a clean restart leaves sealed segments' index files
as they were."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.helpers.broker_process import start_broker
from tests.helpers.confluent_clients import create_topic, read_partition

SEALED_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def produce_with_timestamps(bootstrap: str, topic: str, timestamps: list[int]) -> None:
    """One batch per record (flushed one by one), acks=all, with the given CreateTime timestamps."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors: list[object] = []
    for i, ts in enumerate(timestamps):
        producer.produce(topic, key=b"k%d" % i, value=b"v" * 300, partition=0, timestamp=ts,
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
        assert producer.flush(30) == 0
    assert errors == []


def offsets_for_times(bootstrap: str, topic: str, timestamps: list[int]) -> list[int]:
    """ListOffsets by timestamp as a client asks it (-1: no record at or after the timestamp)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "times", "enable.auto.commit": False})
    try:
        return [consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=30)[0].offset
                for ts in timestamps]
    finally:
        consumer.close()


def error_lines(log_path: Path) -> list[dict]:
    out = []
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("level") == "error":
            out.append(entry)
    return out


@pytest.mark.parametrize("damage", ["empty", "missing"])
def test_a_lost_meta_properties_next_to_logs_stops_start_up_until_repaired(tmp_path: Path, damage: str) -> None:
    broker = start_broker(tmp_path)
    try:
        create_topic(broker.bootstrap, "kept")
        produce_with_timestamps(broker.bootstrap, "kept", [1_000, 2_000, 3_000])
        assert broker.stop() == 0
        meta = broker.data_dir / "meta.properties"
        stored = dict(line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line)
        # what a power loss in the broker's first seconds left before the file was fsynced
        if damage == "empty":
            meta.write_bytes(b"")
        else:
            meta.unlink()
        with pytest.raises(RuntimeError, match="exited with 1 during start-up"):
            broker.start()
        assert broker.proc.returncode == 1
        failed = [e for e in error_lines(broker.log_path) if e.get("event") == "broker failed to start"]
        assert failed, broker.tail()
        message = failed[-1]["error"]
        assert str(meta) in message and f"is {damage}" in message and "__cluster_metadata-0" in message
        assert "`node.id=1`" in message and "`cluster.id=<id>`" in message
        assert not meta.exists() or meta.read_bytes() == b""  # no new cluster id written
        # the repair the message describes
        meta.write_text(f"version=1\nnode.id={stored['node.id']}\ncluster.id={stored['cluster.id']}\n")
        broker.start()
        assert [v for _k, v, _o in read_partition(broker.bootstrap, "kept")] == [b"v" * 300] * 3
        assert f"cluster.id={stored['cluster.id']}" in meta.read_text()
    finally:
        broker.stop()


def test_a_lost_meta_properties_is_written_again_with_the_configured_cluster_id(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        meta = broker.data_dir / "meta.properties"
        cluster_id = dict(line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line)["cluster.id"]
        assert broker.stop() == 0
        meta.write_bytes(b"")
        broker.overrides["cluster.id"] = cluster_id
        broker.start()
        assert f"cluster.id={cluster_id}" in meta.read_text()
    finally:
        broker.stop()


def test_a_fresh_data_directory_gets_a_cluster_id(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        assert "cluster.id=" in (broker.data_dir / "meta.properties").read_text()
    finally:
        broker.stop()


def sealed_index_files(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Contents and mtime (ns) of the index files of every segment but the last (the active one)."""
    bases = sorted(int(p.stem) for p in directory.glob("*.log"))
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())
            if p.suffix in SEALED_INDEX_SUFFIXES and int(p.stem) in bases[:-1]}


def test_a_clean_restart_leaves_sealed_segments_index_files_as_they_are(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        # ~2 batches of ~390 bytes per segment: each sealed segment's time index holds only its sealing entry
        create_topic(broker.bootstrap, "times", config={"internal.segment.bytes": "1024"})
        timestamps = [1_000_000 + 1_000 * i + (500 if i % 4 == 1 else 0) for i in range(24)]
        produce_with_timestamps(broker.bootstrap, "times", timestamps)
        asked = list(range(999_000, 1_026_000, 250))
        answers = offsets_for_times(broker.bootstrap, "times", asked)
        assert broker.stop() == 0
        directory = broker.data_dir / "times-0"
        assert len(list(directory.glob("*.log"))) >= 6
        for path in directory.iterdir():  # an hour old: a write to any of them would give it the current time
            stat = path.stat()
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - 3_600 * 10**9))
        before = sealed_index_files(directory)
        assert [n for n in before if n.endswith(".timeindex")]
        broker.start()
        assert offsets_for_times(broker.bootstrap, "times", asked) == answers
        assert broker.stop() == 0
        assert sealed_index_files(directory) == before
    finally:
        broker.stop()
