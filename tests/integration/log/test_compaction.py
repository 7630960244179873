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
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.helpers.confluent_clients import admin_client, read_partition
from tests.helpers.raw_client import RawClient
from tests.helpers.segment_files import log_bytes
from tests.helpers.waiting import assert_stays, wait_until

pytestmark = pytest.mark.integration

FAST_CLEANER = {"log.cleaner.backoff.ms": "100"}


def create_topic(bootstrap: str, name: str, config: dict[str, str], partitions: int = 1) -> None:
    admin = admin_client(bootstrap)
    admin.create_topics([NewTopic(name, num_partitions=partitions, config=config)])[name].result(timeout=30)


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


def set_topic_config(bootstrap: str, topic: str, name: str, value: str) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    admin = admin_client(bootstrap)  # held: a client destroyed early fails its futures with _DESTROY
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def partition_dir(broker, topic: str, partition: int = 0) -> Path:
    return broker.data_dir / f"{topic}-{partition}"


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
    # no cleaning while the records are written (a ratio of 1.0 is never exceeded): `written` below is what was
    # written, not what a cleaning running meanwhile left of it (on a loaded machine the writing takes long)
    create_topic(broker.bootstrap, "users", {"cleanup.policy": "compact", "internal.segment.bytes": "32768",
                                              "min.cleanable.dirty.ratio": "1.0", "delete.retention.ms": "1000",
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
    set_topic_config(broker.bootstrap, "users", "min.cleanable.dirty.ratio", "0.001")
    end = len(items)

    wanted = {k: v for k, v in latest.items() if v is not None}

    def compacted():
        got = read_partition(broker.bootstrap, "users")
        values = [(k, v) for k, v, _o in got if v is not None]
        keys = [k for k, _v, _o in got]
        return got if len(keys) == len(set(keys)) and dict(values) == wanted else None

    got = wait_until(compacted, 90, "one record per key")
    offsets = [o for _k, _v, o in got]
    assert offsets == sorted(offsets) and offsets[-1] < end  # offsets kept, with gaps
    # the cleaned segments may be readable before the replaced ones are unlinked (off the event loop)
    wait_until(lambda: log_bytes(partition_dir(broker, "users")) < written / 10, 30, "the replaced segments gone")
    # tombstones stay readable for delete.retention.ms after their first cleaning, then a later round drops them:
    # let that time (1 s) pass, a duration and not a state, before the record that makes the log dirty again
    time.sleep(1.2)
    assert produce(broker.bootstrap, "users", [(b"user-new", b"1")]) == []
    wanted[b"user-new"] = b"1"

    def no_tombstones():
        got = read_partition(broker.bootstrap, "users")
        return got if all(v is not None for _k, v, _o in got) and {k: v for k, v, _o in got} == wanted else None

    wait_until(no_tombstones, 90, "tombstones dropped after delete.retention.ms")
    # a consumer that starts at an offset that was cleaned away gets the next record
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "gap", "enable.auto.commit": False})
    consumer.assign([TopicPartition("users", 0, 5)])
    try:
        msg = wait_until(lambda: consumer.poll(1.0), 30, "a record")
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
    create_topic(broker.bootstrap, "cfg", {"cleanup.policy": "compact", "internal.segment.bytes": "16384",
                                            "min.cleanable.dirty.ratio": "1.0"})
    items = [(b"k%d" % (i % 10), b"v%d" % i + b"-" * 100) for i in range(2000)]
    assert produce(broker.bootstrap, "cfg", items) == []
    # A window of ten cleaner backoffs (100 ms) for a cleaning that must not come: all dirty is a ratio of 1.0,
    # never above 1.0.
    assert_stays(lambda: cleaned_rounds(broker, "cfg") == 0, 1.0, "no cleaning at min.cleanable.dirty.ratio 1.0",
                 interval=0.1)
    set_topic_config(broker.bootstrap, "cfg", "min.cleanable.dirty.ratio", "0.1")
    admin = admin_client(broker.bootstrap)
    wait_until(lambda: cleaned_rounds(broker, "cfg") > 0, 30, "a cleaning after the config change")
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    configs = described[ConfigResource(ResourceType.BROKER, "1")].result(timeout=30)
    assert configs["log.cleaner.threads"].value == "1"
    assert configs["log.cleaner.dedupe.buffer.size"].value == "134217728"


def test_kill_9_during_cleaning_leaves_a_consistent_log(broker_factory) -> None:
    # a slow cleaner (300 KB/s) so the kill lands in the middle of a round
    broker = broker_factory({**FAST_CLEANER, "log.cleaner.io.max.bytes.per.second": "300000",
                             "log.cleaner.io.buffer.size": "16384"})
    # cleaning starts once every record is written (a ratio of 1.0 is never exceeded): one long round over the
    # whole log, not short ones during the writing that may all be over before the test looks
    create_topic(broker.bootstrap, "crash", {"cleanup.policy": "compact", "internal.segment.bytes": "65536",
                                              "min.cleanable.dirty.ratio": "1.0", "segment.ms": "300"})
    latest: dict[bytes, bytes] = {}
    items = []
    for round_ in range(15):
        for k in range(300):
            key = b"key-%d" % k
            latest[key] = b"%d-%d-" % (k, round_) + b"y" * 200
            items.append((key, latest[key]))
    assert produce(broker.bootstrap, "crash", items, **{"compression.type": "zstd"}) == []
    directory = partition_dir(broker, "crash")
    set_topic_config(broker.bootstrap, "crash", "min.cleanable.dirty.ratio", "0.01")
    wait_until(lambda: list(directory.glob("*.cleaned")), 60, "a cleaning in progress")
    workers = children(broker.pid)
    assert workers, "the cleaner runs in a process of its own"
    broker.kill9()
    for pid in workers:  # the cleaner process dies with the broker (no orphan keeps writing)
        wait_until(lambda p=pid: not Path(f"/proc/{p}").exists() or "Z" in Path(f"/proc/{p}/stat").read_text()
                 .rsplit(")", 1)[1].split()[0], 10, f"cleaner process {pid} to exit")
    broker.overrides.pop("log.cleaner.io.max.bytes.per.second")
    broker.start()
    got = read_partition(broker.bootstrap, "crash")
    offsets = [o for _k, _v, o in got]
    assert offsets == sorted(set(offsets))
    assert {k: v for k, v, _o in got} == latest  # every key's latest value

    def compacted():
        got = read_partition(broker.bootstrap, "crash")
        return len(got) == len(latest) and {k: v for k, v, _o in got} == latest

    wait_until(compacted, 90, "the cleaning to finish after the restart")
    # the restarted cleaner may be in a round of its own right after start-up (its .cleaned/.swap files are
    # legitimate then); once the log is compacted, nothing of the killed round or of later ones may be left
    wait_until(lambda: not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))],
             60, "no leftover .cleaned/.swap/.deleted files")


# --- __consumer_offsets under an hour of offset commits ----------------------------------------------------------
GROUPS, PARTITIONS, TICKS = 3, 30, 720  # 3 consumers committing 30 partitions every 5 s for an hour
OFFSET_COMMIT, OFFSET_FETCH = 8, 9


def groups_loaded(broker) -> dict:
    lines = [json.loads(line) for line in broker.log_path.read_text(errors="replace").splitlines()
             if '"groups loaded"' in line]
    return lines[-1]


def test_consumer_offsets_stays_bounded_under_an_hour_of_commits(broker_factory) -> None:
    """720 rounds of OffsetCommit (one per simulated 5 s) from 3 groups over 30 partitions, through the broker's
    OffsetCommit handler: `__consumer_offsets` stays a few segments while it is written, the committed offsets
    survive compaction and a restart, and the start-up replay reads about one record per key."""
    broker = broker_factory({**FAST_CLEANER, "offsets.topic.num.partitions": "1",
                             "offsets.topic.segment.bytes": "65536"})
    create_topic(broker.bootstrap, "events", {}, PARTITIONS)
    directory = partition_dir(broker, "__consumer_offsets")
    sizes = []
    started = time.monotonic()
    with RawClient(broker.port) as client:
        for tick in range(TICKS):
            for g in range(GROUPS):
                body = {"group_id": f"group-{g}", "generation_id_or_member_epoch": -1, "member_id": "",
                        "group_instance_id": None, "topics": [{"name": "events", "partitions": [
                            {"partition_index": p, "committed_offset": tick * 100 + p, "committed_leader_epoch": -1,
                             "committed_metadata": ""} for p in range(PARTITIONS)]}]}
                answer = client.call(OFFSET_COMMIT, 8, body)
                assert {p.error_code for t in answer.topics for p in t.partitions} == {0}
            if tick % 120 == 119:  # every simulated 10 minutes: a few segments, or so once the cleaner caught up
                # (on a loaded machine the commits may run ahead of the cleaner for a while)
                sizes.append(log_bytes(directory))
                wait_until(lambda: log_bytes(directory) < 6 * 65536, 60, "the cleaner catching up")
    commit_s = time.monotonic() - started
    written = TICKS * GROUPS * PARTITIONS
    wait_until(lambda: log_bytes(directory) < 200_000, 60, "the last cleaning")
    broker.restart()
    replay = groups_loaded(broker)
    with RawClient(broker.port) as client:
        for g in range(GROUPS):
            got = client.call(OFFSET_FETCH, 7, {"group_id": f"group-{g}", "topics": None})
            assert {p.partition_index: p.committed_offset for t in got.topics for p in t.partitions} == {
                p: (TICKS - 1) * 100 + p for p in range(PARTITIONS)}
    end = max(int(p.stem) for p in directory.glob("*.log"))
    print(f"{written} offset commits in {commit_s:.1f}s; __consumer_offsets bytes every 10 min: {sizes}; "
          f"after restart {log_bytes(directory)} bytes, replay {replay['records']} records in {replay['seconds']}s "
          f"(log end offset >= {end})")
    keys = GROUPS * PARTITIONS
    # About 90 bytes per commit record: 5.8 MB without compaction; the cleaned log is its keys plus the last
    # (active and not yet cleaned) segments of 64 KiB, which each sample above waited for.
    assert len(sizes) == TICKS // 120, sizes
    assert replay["records"] <= keys + 3 * 65536 // 60, replay
