"""Producer state: expiry by producer.id.expiration.ms (injected clock), rebuild from the log bounded by it, and the
produce path's loading in a worker thread with requests kept in arrival order."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.log.producer_state import BatchMetadata, ProducerStateTable, scan_producers
from protocol import records as rec
from protocol.errors import ErrorCode
from tests.helpers.replica_node import EXPIRATION_MS, Clock, Node
from tests.helpers.replica_node import node_with_topic as _node_with_topic


def test_table_forgets_producers_whose_last_batch_is_old_enough() -> None:
    table = ProducerStateTable()
    table.record(1, 0, BatchMetadata(0, 0, 0, 0, timestamp=1_000))
    table.record(2, 0, BatchMetadata(0, 0, 1, 1, timestamp=1_000))
    table.record(2, 0, BatchMetadata(1, 1, 2, 2, timestamp=5_000))  # the last batch counts
    assert table.remove_expired(now_ms=1_000 + EXPIRATION_MS - 1, expiration_ms=EXPIRATION_MS) == 0
    assert table.remove_expired(now_ms=1_000 + EXPIRATION_MS, expiration_ms=EXPIRATION_MS) == 1  # >=, as Kafka
    assert table.entry(1) is None and table.entry(2) is not None
    assert table.remove_expired(now_ms=5_000 + EXPIRATION_MS, expiration_ms=EXPIRATION_MS) == 1
    assert len(table) == 0


def test_an_expired_producer_is_forgotten_and_its_next_batch_accepted_as_kafka(tmp_path: Path) -> None:
    clock = Clock(10_000_000)
    node = _node_with_topic(tmp_path, clock)
    assert node.produce("t", 7, 0).base_offset == 0
    assert node.produce("t", 7, 1).base_offset == 1
    assert node.produce("t", 7, 5).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert node.produce("t", 7, 1).base_offset == 1  # a retry: answered with its offset, not appended
    clock.now_ms += EXPIRATION_MS - 1
    assert asyncio.run(node.replicas.expire_producers()) == 0
    clock.now_ms += 1
    assert asyncio.run(node.replicas.expire_producers()) == 1
    assert node.replicas.producer_table("t", 0).entry(7) is None
    # Kafka (KIP-360): a producer without state is accepted at any sequence, which starts its new state
    assert node.produce("t", 7, 5).base_offset == 2
    assert node.produce("t", 7, 7).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert node.produce("t", 7, 6).base_offset == 3
    node.close()


def test_rebuild_after_restart_skips_segments_older_than_the_expiration(tmp_path: Path) -> None:
    clock = Clock(10_000_000)
    node = _node_with_topic(tmp_path, clock)
    node.produce("t", 1, 0)  # producer 1: only in the old segment
    node.produce("t", 2, 0, count=2)
    node.topics.log("t", 0).roll()
    clock.now_ms += EXPIRATION_MS // 2
    node.produce("t", 2, 2)  # producer 2 is still active in the new segment
    node.close()

    clock.now_ms += EXPIRATION_MS // 2 + 1  # the first segment's batches are all expired now
    restarted = Node(tmp_path / "data", clock)
    scanned = ProducerStateTable()
    scan_producers(restarted.topics.log("t", 0), scanned, newer_than_ms=clock.now_ms - EXPIRATION_MS)
    assert scanned.entry(1) is None and scanned.entry(2).last_seq == 2  # the old segment was not even read
    table = restarted.replicas.producer_table("t", 0)
    assert table.entry(1) is None
    assert table.entry(2) is not None and table.entry(2).last_seq == 2
    assert restarted.produce("t", 2, 2).base_offset == 3  # still a duplicate of the batch in the recent segment
    assert restarted.produce("t", 2, 4).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    restarted.close()


def test_producer_state_loads_in_a_worker_thread_and_waiting_requests_keep_their_order(tmp_path: Path) -> None:
    clock = Clock(10_000_000)
    node = _node_with_topic(tmp_path, clock)
    for seq in range(0, 200, 2):
        node.produce("t", 9, seq, count=2)
    node.close()
    restarted = Node(tmp_path / "data", clock)
    replicas = restarted.replicas
    key = ("t", 0)
    order: list[str] = []

    async def scenario() -> None:
        first = replicas.produce_turn([key])
        second = replicas.produce_turn([key])
        assert first is not None and second is not None  # state not loaded yet: both wait

        async def request(turn, name: str, seq: int) -> None:
            await turn.wait()
            order.append(name)
            assert restarted.produce("t", 9, seq, count=2).error == ErrorCode.NONE
            turn.done()

        await asyncio.gather(request(second, "second", 202), request(first, "first", 200))
        assert replicas.produce_turn([key]) is None  # loaded, nobody waiting: append at once

    asyncio.run(scenario())
    assert order == ["first", "second"]
    assert replicas.producer_table("t", 0).entry(9).last_seq == 203
    restarted.close()


def test_non_idempotent_appends_never_load_producer_state(tmp_path: Path) -> None:
    clock = Clock(10_000_000)
    node = _node_with_topic(tmp_path, clock)
    plain = rec.build_batch([rec.Record(key=None, value=b"x")], timestamp=clock.now_ms)
    result, _ = node.replicas.append(node.topics.registry.get("t"), 0, plain)
    assert result.error == ErrorCode.NONE
    assert node.replicas.producer_last_offsets("t", 0, 0) is None  # never scanned the log
    node.close()


def test_only_partitions_with_idempotent_batches_wait_for_producer_state(tmp_path: Path) -> None:
    from broker.replica_manager import idempotent_keys

    clock = Clock(10_000_000)
    node = _node_with_topic(tmp_path, clock)
    idem = rec.build_batch([rec.Record(key=None, value=b"x")], producer_id=3, producer_epoch=0, base_sequence=0)
    plain = rec.build_batch([rec.Record(key=None, value=b"x")])
    info = node.topics.registry.get("t")
    entries = [(info, 0, idem), (info, 1, idem), (info, -1, idem), (info, 0, plain), (info, 0, b"short"),
               (info, 0, None)]
    assert idempotent_keys(entries) == [("t", 0)]
    node.close()


def test_a_partition_deleted_before_its_producer_state_loads_is_no_error(tmp_path: Path) -> None:
    """The fuzz campaign deleted topics while idempotent produces to them waited for their producer state: the
    load found no log and logged KeyError tracebacks at ERROR (14 in a million frames)."""
    from structlog.testing import capture_logs

    clock = Clock(10_000_000)
    node = _node_with_topic(tmp_path, clock)

    async def scenario() -> None:
        turn = node.replicas.produce_turn([("gone", 0)])  # as if deleted after the request was checked
        assert turn is not None
        await turn.wait()
        turn.done()

    with capture_logs() as logs:
        asyncio.run(scenario())
    assert not [e for e in logs if e["log_level"] in ("error", "critical")], logs
    node.close()


def test_a_topic_config_change_that_waited_behind_the_topics_deletion_is_no_error(tmp_path: Path) -> None:
    """IncrementalAlterConfigs read the topic, then waited for its journal turn behind a DeleteTopics of it: applying
    the change reconfigured logs that were gone (KeyError, UNKNOWN_SERVER_ERROR; found by the fuzz campaign)."""
    clock = Clock(10_000_000)
    node = _node_with_topic(tmp_path, clock)
    info = node.topics.registry.get("t")

    async def scenario() -> None:
        deletion = asyncio.ensure_future(node.topics.delete_topic(name="t", topic_id=None))
        await asyncio.sleep(0)  # the deletion takes its journal turn first
        await asyncio.gather(deletion, node.topics.set_topic_configs(info, {"retention.ms": "1000"}))

    asyncio.run(scenario())
    assert node.topics.registry.get("t") is None
    node.close()
