"""Storage faults in a whole broker (in-process, real logs; faults injected by replacing os.fsync / os.write for
the files of one log): produce waiting on a failed fsync gets KAFKA_STORAGE_ERROR and the broker stops; a full
disk fails the metadata change, the offset commit or the share-state write it hit, with memory rebuilt from the
log, and everything works again once space returns."""

from __future__ import annotations

import asyncio
import errno
import os

import pytest
from confluent_kafka import KafkaError, Producer

from broker.app import Broker
from broker.cluster.topics import TopicError
from broker.config import load_config
from broker.share_coordinator.keys import SharePartitionKey
from protocol.errors import ErrorCode

REAL_WRITE, REAL_PWRITE, REAL_FSYNC = os.write, os.pwrite, os.fsync


async def start(tmp_path) -> Broker:
    config = load_config(None, [
        "listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path / 'data'}",
        "share.coordinator.state.topic.num.partitions=1", "offsets.topic.num.partitions=1"])
    broker = Broker(config)
    await broker.start()
    return broker


def _path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def fail_writes_to(monkeypatch, marker: str, code: int = errno.ENOSPC) -> None:
    """Writes to files whose path contains `marker` fail with `code` (a disk that is full for that log)."""
    def write(fd, data):
        if marker in _path(fd):
            raise OSError(code, os.strerror(code))
        return REAL_WRITE(fd, data)

    def pwrite(fd, data, offset):
        if marker in _path(fd):
            raise OSError(code, os.strerror(code))
        return REAL_PWRITE(fd, data, offset)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "pwrite", pwrite)


def heal(monkeypatch) -> None:
    monkeypatch.setattr(os, "write", REAL_WRITE)
    monkeypatch.setattr(os, "pwrite", REAL_PWRITE)
    monkeypatch.setattr(os, "fsync", REAL_FSYNC)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    """acks=all, no retries: each record's delivery error (None when acknowledged)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                         "enable.idempotence": False, "linger.ms": 0, "message.timeout.ms": 20000})
    results: list[KafkaError | None] = [None] * len(values)
    done = []

    def report(i):
        def cb(err, _msg):
            results[i] = err
            done.append(i)
        return cb

    for i, value in enumerate(values):
        producer.produce(topic, value, partition=0, on_delivery=report(i))
        producer.flush(30)
    assert len(done) == len(values)
    return results


def test_produce_waiting_on_a_failed_fsync_gets_storage_error_and_the_broker_stops(tmp_path, monkeypatch):
    async def run() -> None:
        broker = await start(tmp_path)
        try:
            await broker.topics.create_topic("t", num_partitions=1, replication_factor=-1, assignments=[],
                                             configs={}, validate_only=False)
            bootstrap = f"127.0.0.1:{broker.node.port}"
            first = await asyncio.to_thread(produce, bootstrap, "t", [b"acknowledged"])
            assert first == [None]

            def failing_fsync(fd):
                if "/t-0" in _path(fd):
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
                return REAL_FSYNC(fd)

            monkeypatch.setattr(os, "fsync", failing_fsync)
            second = await asyncio.to_thread(produce, bootstrap, "t", [b"never confirmed"])
            assert second[0] is not None and second[0].code() == KafkaError.KAFKA_STORAGE_ERROR, second
            heal(monkeypatch)
            await asyncio.wait_for(broker.failed.wait(), 10)  # the only log directory failed: the broker stops
            await asyncio.wait_for(broker.wait_stopped(), 30)
            assert "fsync" in (broker.failure_reason or "")
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)
        broker = await start(tmp_path)
        try:
            data = broker.topics.log("t", 0).read(0, 1 << 20).data
            from protocol import records as rec
            values = [r.value for r in rec.decode_records(data)]
            assert values == [b"acknowledged"]  # the unconfirmed record was cut off with the failed fsync
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)

    asyncio.run(run())


def test_full_disk_fails_a_metadata_change_without_applying_it(tmp_path, monkeypatch):
    async def run() -> None:
        broker = await start(tmp_path)
        try:
            fail_writes_to(monkeypatch, "__cluster_metadata-0")
            with pytest.raises(TopicError) as raised:
                await broker.topics.create_topic("t", num_partitions=2, replication_factor=-1, assignments=[],
                                                 configs={}, validate_only=False)
            assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
            assert broker.topics.registry.get("t") is None
            assert not (tmp_path / "data" / "t-0").exists()
            heal(monkeypatch)
            assert not broker.failed.is_set()
            await broker.topics.create_topic("t", num_partitions=2, replication_factor=-1, assignments=[],
                                             configs={}, validate_only=False)
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)
        broker = await start(tmp_path)  # the journal replays cleanly: no partial batch was left in it
        try:
            assert broker.topics.registry.get("t").num_partitions == 2
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)

    asyncio.run(run())


def commit_req(offset: int) -> dict:
    return {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]}


async def committed(broker: Broker) -> int:
    [group] = await broker.group_coordinator.fetch_offsets(
        [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}], 8, False)
    return group["topics"][0]["partitions"][0]["committed_offset"]


def test_full_disk_fails_an_offset_commit_and_the_group_coordinator_reloads(tmp_path, monkeypatch):
    async def run() -> None:
        broker = await start(tmp_path)
        try:
            await broker.topics.create_topic("t", num_partitions=1, replication_factor=-1, assignments=[],
                                             configs={}, validate_only=False)
            ok = await broker.group_coordinator.commit_offsets(commit_req(5), 8)
            assert ok["topics"][0]["partitions"][0]["error_code"] == 0
            fail_writes_to(monkeypatch, "__consumer_offsets-0")
            failed = await broker.group_coordinator.commit_offsets(commit_req(9), 8)
            assert failed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
            assert await committed(broker) == 5  # memory was rebuilt from the log, not left ahead of it
            heal(monkeypatch)
            again = await broker.group_coordinator.commit_offsets(commit_req(9), 8)
            assert again["topics"][0]["partitions"][0]["error_code"] == 0
            assert await committed(broker) == 9
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)
        broker = await start(tmp_path)
        try:
            assert await committed(broker) == 9
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)

    asyncio.run(run())


def test_full_disk_fails_a_share_state_write_and_the_share_coordinator_reloads(tmp_path, monkeypatch):
    async def run() -> None:
        broker = await start(tmp_path)
        try:
            info = await broker.topics.create_topic("t", num_partitions=1, replication_factor=-1, assignments=[],
                                                    configs={}, validate_only=False)
            tid = info.topic_id
            state = broker.share_coordinator
            assert (await state.initialize("g", tid, 0, 0, 0)).error_code == 0
            assert (await state.write_state("g", tid, 0, 0, -1, 3, [(3, 3, 2, 1)])).error_code == 0
            key = SharePartitionKey("g", tid, 0)
            before = state.coordinator.state(key)
            fail_writes_to(monkeypatch, "__share_group_state-0")
            r = await state.write_state("g", tid, 0, 0, -1, 7, [(7, 7, 2, 1)])
            assert r.error_code != 0
            assert state.coordinator.state(key) == before  # reloaded from the log
            heal(monkeypatch)
            assert (await state.write_state("g", tid, 0, 0, -1, 7, [(7, 7, 2, 1)])).error_code == 0
            after = state.coordinator.state(key)
            assert after != before
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)
        broker = await start(tmp_path)
        try:
            assert broker.share_coordinator.coordinator.state(SharePartitionKey("g", tid, 0)) == after
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)

    asyncio.run(run())


def test_a_failed_journal_fsync_fails_the_change_unapplied_and_stops_the_broker(tmp_path, monkeypatch):
    async def run() -> None:
        broker = await start(tmp_path)
        try:
            def failing_fsync(fd):
                if "__cluster_metadata-0" in _path(fd):
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
                return REAL_FSYNC(fd)

            monkeypatch.setattr(os, "fsync", failing_fsync)
            with pytest.raises(TopicError) as raised:
                await broker.topics.create_topic("t", num_partitions=1, replication_factor=-1, assignments=[],
                                                 configs={}, validate_only=False)
            heal(monkeypatch)
            assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
            assert broker.topics.registry.get("t") is None  # memory is not ahead of the journal
            await asyncio.wait_for(broker.failed.wait(), 10)
            await asyncio.wait_for(broker.wait_stopped(), 30)
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)
        broker = await start(tmp_path)  # the unconfirmed record was cut off: the journal replays cleanly
        try:
            assert broker.topics.registry.get("t") is None
        finally:
            await asyncio.wait_for(broker.stop(), 30)

    asyncio.run(run())


def test_coordinators_stop_answering_from_memory_after_a_failed_fsync(tmp_path, monkeypatch):
    """After a failed fsync of their log the coordinators cannot reload (the directory is offline): they answer
    errors instead of state that may be ahead of the disk, until the broker has stopped."""
    async def run() -> None:
        broker = await start(tmp_path)
        try:
            info = await broker.topics.create_topic("t", num_partitions=1, replication_factor=-1, assignments=[],
                                                    configs={}, validate_only=False)
            state = broker.share_coordinator
            assert (await state.initialize("g", info.topic_id, 0, 0, 0)).error_code == 0
            ok = await broker.group_coordinator.commit_offsets(commit_req(5), 8)
            assert ok["topics"][0]["partitions"][0]["error_code"] == 0

            def failing_fsync(fd):
                if "__consumer_offsets-0" in _path(fd):
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
                return REAL_FSYNC(fd)

            monkeypatch.setattr(os, "fsync", failing_fsync)
            failed = await broker.group_coordinator.commit_offsets(commit_req(9), 8)
            heal(monkeypatch)
            assert failed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
            assert broker.failed.is_set()
            [group] = await broker.group_coordinator.fetch_offsets(
                [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}], 8, False)
            assert group["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # not the 9 that never stuck
            read = await state.read_state("g", info.topic_id, 0)
            assert read.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
            await asyncio.wait_for(broker.wait_stopped(), 30)
        finally:
            heal(monkeypatch)
            await asyncio.wait_for(broker.stop(), 30)
        broker = await start(tmp_path)
        try:
            assert await committed(broker) == 5
        finally:
            await asyncio.wait_for(broker.stop(), 30)

    asyncio.run(run())


def test_the_broker_process_exits_1_after_its_log_directory_failed(tmp_path, monkeypatch):
    """`python -m broker`'s serve(): a failed fsync stops it on its own, with exit code 1 (not waiting for a
    signal), after answering the produce that waited on the flush."""
    from broker.__main__ import parse_args, serve

    port_file = tmp_path / "port"
    args = parse_args(["--port-file", str(port_file), "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                       "--override", f"log.dirs={tmp_path / 'data'}",
                       "--override", "offsets.topic.num.partitions=1",
                       "--override", "share.coordinator.state.topic.num.partitions=1",
                       "--override", "auto.create.topics.enable=true"])

    async def run() -> tuple[int, list]:
        server = asyncio.ensure_future(serve(args))
        for _ in range(6000):  # until the port file is written (serve writes it once listening)
            if port_file.exists() and port_file.read_text().strip():
                break
            assert not server.done(), server
            await asyncio.sleep(0.01)
        bootstrap = f"127.0.0.1:{port_file.read_text().splitlines()[0]}"
        assert await asyncio.to_thread(produce, bootstrap, "t", [b"ok"]) == [None]

        def failing_fsync(fd):
            if "/t-0" in _path(fd):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return REAL_FSYNC(fd)

        monkeypatch.setattr(os, "fsync", failing_fsync)
        second = await asyncio.to_thread(produce, bootstrap, "t", [b"lost"])
        heal(monkeypatch)
        return await asyncio.wait_for(server, 30), second

    code, second = asyncio.run(run())
    assert code == 1
    assert second[0] is not None and second[0].code() == KafkaError.KAFKA_STORAGE_ERROR
