"""A real full disk, two ways: the broker's log directory on a 20 MiB tmpfs that a filler file fills up
(mounting needs root, as CI runs: it fails where `mount` is refused), and a file-size limit (RLIMIT_FSIZE,
SIGXFSZ ignored) in the broker process, under which writes past the limit fail with EFBIG; raising the limit
(prlimit) is space returning.

While the disk is full a confluent-kafka producer gets KAFKA_STORAGE_ERROR and the broker keeps running; every
acknowledged record stays readable with contiguous offsets (a failed append leaves no partial batch and takes no
offset); once space is back appends succeed again; after a restart every acknowledged record is read back.
"""

from __future__ import annotations

import errno
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.helpers.broker_process import BrokerProcess, venv_python
from tests.helpers.confluent_clients import create_topic

pytestmark = pytest.mark.integration

TOPIC = "full"
VALUE = 2048  # bytes per record


@pytest.fixture
def small_disk(tmp_path: Path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mnt)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"mounting a tmpfs needs root (as CI runs): {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(path: Path) -> int:
    """Write `path` until the disk is full (down to 512-byte writes); returns the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as out:
        for chunk in (1 << 20, 64 << 10, 4096, 512):
            block = b"\0" * chunk
            while True:
                try:
                    written += out.write(block)
                except OSError as err:
                    assert err.errno == errno.ENOSPC, err
                    break
    return written


def produce_one(producer: Producer, value: bytes) -> KafkaError | None:
    result: list[KafkaError | None] = []
    producer.produce(TOPIC, value, partition=0, on_delivery=lambda err, _msg: result.append(err))
    producer.flush(30)
    assert len(result) == 1, "no delivery report within 30 s"
    return result[0]


def read_all(bootstrap: str) -> tuple[list[tuple[int, bytes]], int]:
    """Every record of the partition as (offset, value), and the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-with-assign",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(out) < high and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                assert not msg.error(), msg.error()
                out.append((msg.offset(), msg.value()))
        return out, high
    finally:
        consumer.close()


class LimitedBroker(BrokerProcess):
    """A broker process whose files may not grow past `fsize` bytes (writes past it fail with EFBIG)."""

    fsize: int | None = None

    def _limits(self):
        fsize = self.fsize
        if fsize is None:
            return None

        def apply() -> None:  # in the child between fork and exec; both survive exec
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.RLIM_INFINITY))

        return apply


OVERRIDES = {"offsets.topic.num.partitions": "1", "share.coordinator.state.topic.num.partitions": "1"}


def test_full_tmpfs_answers_storage_error_and_recovers(small_disk: Path, tmp_path: Path):
    proc = LimitedBroker(small_disk / "data", tmp_path / "broker.log", python=venv_python(), overrides=OVERRIDES)
    filler = small_disk / "filler"

    def disk_full() -> None:
        fill(filler)

    def space_back() -> None:
        filler.unlink()

    try:
        run_scenario(proc, disk_full, space_back)
    finally:
        filler.unlink(missing_ok=True)


def test_file_size_limit_answers_storage_error_and_recovers(tmp_path: Path):
    proc = LimitedBroker(tmp_path / "data", tmp_path / "broker.log", python=venv_python(),
                         overrides={**OVERRIDES, "log.segment.bytes": str(64 << 20)})
    proc.fsize = 1 << 20  # the partition's one segment stops growing at 1 MiB

    def space_back() -> None:
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        proc.fsize = None  # and none after the restart

    run_scenario(proc, lambda: None, space_back, before=100, during=600)


def run_scenario(proc: LimitedBroker, disk_full, space_back, *, before: int = 100, during: int = 200) -> None:
    proc.start()
    try:
        create_topic(proc.bootstrap, TOPIC)
        producer = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all", "retries": 0,
                             "enable.idempotence": False, "linger.ms": 0, "message.timeout.ms": 30000})
        acked: list[bytes] = []
        n = 0

        def send() -> KafkaError | None:
            nonlocal n
            value = f"{n:08d}".encode() * (VALUE // 8)
            n += 1
            err = produce_one(producer, value)
            if err is None:
                acked.append(value)
            return err

        for _ in range(before):
            assert send() is None
        disk_full()
        # Appends may still fit (the last partly used page, the room left under the limit); then the disk is full.
        errors = [err for err in (send() for _ in range(during)) if err is not None]
        assert errors, "the disk never filled up"
        assert {e.code() for e in errors} == {KafkaError.KAFKA_STORAGE_ERROR}, errors
        assert proc.alive()  # a full disk does not stop the broker
        space_back()
        for _ in range(100):
            assert send() is None
        assert proc.alive()

        records, high = read_all(proc.bootstrap)
        # offsets are contiguous (a failed append took none) and hold exactly the acknowledged records
        assert high == len(acked)
        assert [o for o, _ in records] == list(range(len(acked)))
        assert [v for _, v in records] == acked

        proc.restart()
        records, high = read_all(proc.bootstrap)
        assert high == len(acked)
        assert [v for _, v in records] == acked
    finally:
        proc.stop()
