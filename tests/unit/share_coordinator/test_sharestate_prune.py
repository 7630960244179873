"""Pruning `__share_group_state`: records older than the snapshots still needed are deleted, so start-up replay
stays bounded however many acknowledgements were written (an in-process broker, real logs, no sockets used)."""

from __future__ import annotations

import asyncio
import uuid

from broker.app import Broker
from broker.config import load_config
from broker.share_coordinator import runtime as share_runtime
from tests.helpers.waiting import async_wait_until

TOPIC = "t"


async def start(tmp_path) -> Broker:
    config = load_config(None, [
        "listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path / 'data'}",
        "share.coordinator.state.topic.num.partitions=1", "offsets.topic.num.partitions=1",
        "share.coordinator.snapshot.update.records.per.snapshot=50"])
    broker = Broker(config)
    await broker.start()
    return broker


async def write_acks(broker: Broker, tid: uuid.UUID, keys: int, writes: int, start: int = 0) -> None:
    """`writes` WriteShareGroupState calls spread over `keys` share-partitions, each acknowledging one more
    offset (what the share-partition leader writes for an ACCEPT); concurrent, so they share fsyncs."""
    state = broker.share_coordinator
    pending = []
    for i in range(start, start + writes):
        group, partition = f"g{i % keys}", 0
        offset = i // keys
        pending.append(state.write_state(group, tid, partition, 0, -1, offset + 1, [(offset, offset, 2, 1)]))
        if len(pending) >= 500:
            results = await asyncio.gather(*pending)
            assert all(r.error_code == 0 for r in results)
            pending = []
    results = await asyncio.gather(*pending)
    assert all(r.error_code == 0 for r in results)


async def setup(broker: Broker, keys: int) -> uuid.UUID:
    info = await broker.topics.create_topic(TOPIC, num_partitions=1, replication_factor=-1, assignments=[],
                                            configs={}, validate_only=False)
    for k in range(keys):
        r = await broker.share_coordinator.initialize(f"g{k}", info.topic_id, 0, 0, 0)
        assert r.error_code == 0
    return info.topic_id


def test_state_topic_is_pruned_and_replay_stays_bounded(tmp_path, monkeypatch):
    """Regression: `__share_group_state` grew without bound and a restart replayed every record ever written."""
    monkeypatch.setattr(share_runtime, "PRUNE_AFTER_RECORDS", 10**9)  # rounds only when the test asks

    async def run():
        broker = await start(tmp_path)
        try:
            tid = await setup(broker, keys=20)
            cold = await broker.share_coordinator.initialize("cold", tid, 0, 0, 0)  # never written again
            assert cold.error_code == 0
            await write_acks(broker, tid, keys=20, writes=20_000)
            plog = broker.share_coordinator.log.partition_log(0)
            assert plog.log_start_offset == 0
            await broker.share_coordinator.prune()  # first round: the cold key pins the prune point
            await write_acks(broker, tid, keys=20, writes=2_000, start=20_000)
            await broker.share_coordinator.prune()  # second round: the cold key got a fresh snapshot, then pruned
            assert plog.log_start_offset > 20_000, plog.log_start_offset
            coordinator = broker.share_coordinator.coordinator
            before = {k: coordinator.state(k) for k in list(coordinator.keys())}
        finally:
            await broker.stop()
        broker = await start(tmp_path)
        try:
            runtime = broker.share_coordinator
            # Replay read what the last rounds left: snapshots plus at most a snapshot interval of updates per key.
            assert runtime.last_load_records < 21 * (50 + 1) + 2_000, runtime.last_load_records
            after = {k: runtime.coordinator.state(k) for k in list(runtime.coordinator.keys())}
            assert after.keys() == before.keys()
            for k, s in before.items():
                a = after[k]
                assert (a.start_offset, a.state_batches, a.state_epoch) == (s.start_offset, s.state_batches,
                                                                           s.state_epoch), k
        finally:
            await broker.stop()

    asyncio.run(run())


def test_deleted_share_partitions_do_not_hold_pruning_back(tmp_path, monkeypatch):
    monkeypatch.setattr(share_runtime, "PRUNE_AFTER_RECORDS", 10**9)

    async def run():
        broker = await start(tmp_path)
        try:
            tid = await setup(broker, keys=3)
            await write_acks(broker, tid, keys=3, writes=300)
            for k in range(3):
                assert (await broker.share_coordinator.delete_state(f"g{k}", tid, 0)).error_code == 0
            plog = broker.share_coordinator.log.partition_log(0)
            await broker.share_coordinator.prune()
            assert plog.log_start_offset == plog.log_end_offset  # nothing left worth replaying
        finally:
            await broker.stop()
        broker = await start(tmp_path)
        try:
            assert broker.share_coordinator.last_load_records == 0
            assert broker.share_coordinator.coordinator.keys() == []
        finally:
            await broker.stop()

    asyncio.run(run())


def test_many_writes_trigger_a_round_without_waiting_for_the_interval(tmp_path, monkeypatch):
    monkeypatch.setattr(share_runtime, "PRUNE_AFTER_RECORDS", 1_000)

    async def run():
        broker = await start(tmp_path)
        try:
            tid = await setup(broker, keys=5)
            plog = broker.share_coordinator.log.partition_log(0)
            offsets = broker.share_coordinator.offsets
            for round_ in range(3):  # rounds run in the background task, kicked by the record count
                await write_acks(broker, tid, keys=5, writes=1_500, start=round_ * 1_500)
                await async_wait_until(
                    lambda: offsets.appended_since_prune.get(0, 0) < share_runtime.PRUNE_AFTER_RECORDS, 10,
                    "the kicked prune round")
            await async_wait_until(lambda: plog.log_start_offset > 0, 10, "the log start to move")
            assert plog.log_start_offset > 0
        finally:
            await broker.stop()

    asyncio.run(run())
