"""What a restart finds on disk, with real broker processes: a lost meta.properties next to existing logs stops
start-up with how to repair it (never a new cluster id)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.helpers.broker_process import start_broker
from tests.helpers.confluent_clients import create_topic, read_partition


def produce_with_timestamps(bootstrap: str, topic: str, timestamps: list[int]) -> None:
    """One batch per record (flushed one by one), acks=all, with the given CreateTime timestamps."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors: list[object] = []
    for i, ts in enumerate(timestamps):
        producer.produce(topic, key=b"k%d" % i, value=b"v" * 300, partition=0, timestamp=ts,
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
        assert producer.flush(30) == 0
    assert errors == []


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
