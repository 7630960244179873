"""Log compaction against a real broker process with real clients: a compacted topic written by confluent-kafka
(many updates per key, tombstones) reads back with one value per key; keyless records are refused; topic config
changes apply live; a kill -9 in the middle of a cleaning leaves a consistent log; `__consumer_offsets` stays
bounded under an hour of offset commits, and so does the group coordinator's start-up replay."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from broker.log import LogConfig, PartitionLog
from protocol import coordinator_records as cr
from protocol import records as rec

pytestmark = pytest.mark.integration

FAST_CLEANER = {"log.cleaner.backoff.ms": "100"}


def create_topic(bootstrap: str, name: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, config=config)])[name].result(timeout=30)


def produce(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]], **conf) -> list:
    errors: list = []
    # small batches, so segments of a few KB roll as they would under a steady load
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "batch.num.messages": 50,
                         **conf})
    for key, value in items:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=0,
                                 on_delivery=lambda err, _m: err is not None and errors.append(err))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    return errors


def consume_everything(bootstrap: str, topic: str, timeout: float = 60) -> list[tuple[bytes, bytes | None, int]]:
    """Every record from offset 0 to the high watermark, as a consumer sees them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise KafkaException(msg.error())
            out.append((msg.key(), msg.value(), msg.offset()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within {timeout}s ({len(out)} records)")


def partition_dir(broker, topic: str, partition: int = 0) -> Path:
    return broker.data_dir / f"{topic}-{partition}"


def log_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def wait_for(condition, timeout: float = 60, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def cleaned_rounds(broker, topic: str) -> int:
    rounds = 0
    for line in broker.log_path.read_text(errors="replace").splitlines():
        if '"log cleaned"' in line and f'"topic": "{topic}"' in line:
            rounds += 1
    return rounds


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def test_a_compacted_topic_reads_back_one_value_per_key(broker_factory) -> None:
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker.bootstrap, "users", {"cleanup.policy": "compact", "segment.bytes": "32768",
                                              "min.cleanable.dirty.ratio": "0.001", "delete.retention.ms": "1000",
                                              "segment.ms": "500"})
    latest: dict[bytes, bytes | None] = {}
    items = []
    for round_ in range(25):
        for k in range(200):
            key, value = b"user-%03d" % k, b"profile-%d-%d-" % (k, round_) + os.urandom(60)
            items.append((key, value))
            latest[key] = value
    for k in range(0, 200, 10):  # deletes
        items.append((b"user-%03d" % k, None))
        latest[b"user-%03d" % k] = None
    assert produce(broker.bootstrap, "users", items, **{"compression.type": "lz4"}) == []
    written = log_bytes(partition_dir(broker, "users"))
    assert written > 300_000
    end = len(items)

    wanted = {k: v for k, v in latest.items() if v is not None}

    def compacted():
        got = consume_everything(broker.bootstrap, "users")
        values = [(k, v) for k, v, _o in got if v is not None]
        keys = [k for k, _v, _o in got]
        return got if len(keys) == len(set(keys)) and dict(values) == wanted else None

    got = wait_for(compacted, 90, "one record per key")
    offsets = [o for _k, _v, o in got]
    assert offsets == sorted(offsets) and offsets[-1] < end  # offsets kept, with gaps
    assert log_bytes(partition_dir(broker, "users")) < written / 10
    # tombstones stay readable for delete.retention.ms after their first cleaning, then a later round drops them
    time.sleep(1.2)
    assert produce(broker.bootstrap, "users", [(b"user-new", b"1")]) == []
    wanted[b"user-new"] = b"1"

    def no_tombstones():
        got = consume_everything(broker.bootstrap, "users")
        return got if all(v is not None for _k, v, _o in got) and {k: v for k, v, _o in got} == wanted else None

    wait_for(no_tombstones, 90, "tombstones dropped after delete.retention.ms")
    # a consumer that starts at an offset that was cleaned away gets the next record
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "gap", "enable.auto.commit": False})
    consumer.assign([TopicPartition("users", 0, 5)])
    try:
        msg = wait_for(lambda: consumer.poll(1.0), 30, "a record")
        assert msg.error() is None and msg.offset() > 5
    finally:
        consumer.close()


def test_compacted_topics_refuse_records_without_a_key(broker_factory) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "keyed", {"cleanup.policy": "compact,delete"})
    create_topic(broker.bootstrap, "plain", {})
    errors = produce(broker.bootstrap, "keyed", [(b"k", b"1"), (None, b"2")],
                     **{"message.send.max.retries": 0, "linger.ms": 50})
    assert errors and {e.code() for e in errors} == {KafkaError.INVALID_RECORD}
    assert produce(broker.bootstrap, "plain", [(None, b"2")]) == []
    assert produce(broker.bootstrap, "keyed", [(b"k", b"3")]) == []


def test_config_changes_apply_to_the_next_cleaning(broker_factory) -> None:
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker.bootstrap, "cfg", {"cleanup.policy": "compact", "segment.bytes": "16384",
                                            "min.cleanable.dirty.ratio": "1.0"})
    items = [(b"k%d" % (i % 10), b"v%d" % i + b"-" * 100) for i in range(2000)]
    assert produce(broker.bootstrap, "cfg", items) == []
    time.sleep(1.0)
    assert cleaned_rounds(broker, "cfg") == 0  # all dirty: a ratio of 1.0, never above 1.0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, "cfg", incremental_configs=[
        ConfigEntry("min.cleanable.dirty.ratio", "0.1", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    wait_for(lambda: cleaned_rounds(broker, "cfg") > 0, 30, "a cleaning after the config change")
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    configs = described[ConfigResource(ResourceType.BROKER, "1")].result(timeout=30)
    assert configs["log.cleaner.threads"].value == "1"
    assert configs["log.cleaner.dedupe.buffer.size"].value == "134217728"


def test_kill_9_during_cleaning_leaves_a_consistent_log(broker_factory) -> None:
    # a slow cleaner (300 KB/s) so the kill lands in the middle of a round
    broker = broker_factory({**FAST_CLEANER, "log.cleaner.io.max.bytes.per.second": "300000",
                             "log.cleaner.io.buffer.size": "16384"})
    create_topic(broker.bootstrap, "crash", {"cleanup.policy": "compact", "segment.bytes": "65536",
                                              "min.cleanable.dirty.ratio": "0.01", "segment.ms": "300"})
    latest: dict[bytes, bytes] = {}
    items = []
    for round_ in range(15):
        for k in range(300):
            key = b"key-%d" % k
            latest[key] = b"%d-%d-" % (k, round_) + b"y" * 200
            items.append((key, latest[key]))
    assert produce(broker.bootstrap, "crash", items, **{"compression.type": "zstd"}) == []
    directory = partition_dir(broker, "crash")
    wait_for(lambda: list(directory.glob("*.cleaned")), 60, "a cleaning in progress")
    workers = children(broker.pid)
    assert workers, "the cleaner runs in a process of its own"
    broker.kill9()
    for pid in workers:  # the cleaner process dies with the broker (no orphan keeps writing)
        wait_for(lambda p=pid: not Path(f"/proc/{p}").exists() or "Z" in Path(f"/proc/{p}/stat").read_text()
                 .rsplit(")", 1)[1].split()[0], 10, f"cleaner process {pid} to exit")
    broker.overrides.pop("log.cleaner.io.max.bytes.per.second")
    broker.start()
    got = consume_everything(broker.bootstrap, "crash")
    offsets = [o for _k, _v, o in got]
    assert offsets == sorted(set(offsets))
    assert {k: v for k, v, _o in got} == latest  # every key's latest value
    assert not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]

    def compacted():
        got = consume_everything(broker.bootstrap, "crash")
        return len(got) == len(latest) and {k: v for k, v, _o in got} == latest

    wait_for(compacted, 90, "the cleaning to finish after the restart")


# --- __consumer_offsets under an hour of offset commits ----------------------------------------------------------
GROUPS, PARTITIONS, COMMIT_EVERY_S = 3, 30, 5


def commit_batches(start_s: int, seconds: int) -> list[bytes]:
    """What the group coordinator appends when GROUPS consumers commit PARTITIONS offsets every 5 s: one batch of
    Kafka-format OffsetCommitKey/OffsetCommitValue (v3) records per commit."""
    batches = []
    for t in range(start_s, start_s + seconds, COMMIT_EVERY_S):
        for g in range(GROUPS):
            records = [rec.Record(cr.encode_key("OffsetCommit", {"group": f"group-{g}", "topic": "events",
                                                                 "partition": p}),
                                  cr.encode_value("OffsetCommit", {"offset": t * 100 + p, "leader_epoch": -1,
                                                                   "metadata": "", "commit_timestamp": t * 1000},
                                                  3))
                       for p in range(PARTITIONS)]
            batches.append(rec.build_batch(records, timestamp=int(time.time() * 1000)))
    return batches


def groups_loaded(broker) -> dict:
    lines = [json.loads(line) for line in broker.log_path.read_text(errors="replace").splitlines()
             if '"groups loaded"' in line]
    return lines[-1]


def test_consumer_offsets_stays_bounded_under_an_hour_of_commits(broker_factory) -> None:
    """Commits are appended to `__consumer_offsets-0` through the log between broker runs (6 runs of 10
    simulated minutes, the records the coordinator would write), the broker's cleaner compacts them, and each
    start-up replay is timed by the broker itself ("groups loaded")."""
    overrides = {**FAST_CLEANER, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "65536"}
    broker = broker_factory(overrides)
    directory = partition_dir(broker, "__consumer_offsets")
    sizes, replays = [], []
    keys = GROUPS * PARTITIONS
    for ten_minutes in range(6):
        broker.stop()
        plog = PartitionLog(directory, LogConfig(segment_bytes=65536))
        for batch in commit_batches(ten_minutes * 600, 600):
            plog.append(batch)
        written = plog.log_end_offset
        plog.close()
        broker.start()
        replays.append(groups_loaded(broker))
        wait_for(lambda n=ten_minutes: cleaned_rounds(broker, "__consumer_offsets") > n, 60, "a cleaning")
        wait_for(lambda: log_bytes(directory) < 400_000, 60, "the partition to shrink")
        sizes.append(log_bytes(directory))
    assert written == 6 * 120 * GROUPS * PARTITIONS  # an hour of commits: 64 800 records
    broker.restart()
    replays.append(groups_loaded(broker))
    print("__consumer_offsets bytes after each 10 min:", sizes)
    print("start-up replay (records, s):", [(r["records"], r["seconds"]) for r in replays])
    uncompacted = written * 95  # ~95 bytes per commit record in batches of 30
    assert max(sizes) < uncompacted / 10
    # What a start replays is what is left: the keys' last values and the uncleaned active segment (about
    # 65536 / 60 records), plus, for the starts inside the hour, the 10 minutes appended just before (10 800).
    left = 2 * keys + 65536 // 60
    per_run = 120 * GROUPS * PARTITIONS
    assert all(r["records"] <= per_run + left for r in replays[:-1]), replays
    assert replays[-1]["records"] <= left, replays  # after the hour and its cleaning: not 64 800
