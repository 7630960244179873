"""ReplicaManager.append_built: a batch a coordinator built itself, appended with only the checks it can fail
(partition, log directory, max.message.bytes), without sockets."""

from __future__ import annotations

import asyncio
from pathlib import Path

from protocol import records as rec
from protocol.errors import ErrorCode
from tests.helpers.replica_node import Clock, node_with_topic

NOW = 1_700_000_000_000


def batch_offsets(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h in rec.validate_batches(data)]


def test_a_coordinator_batch_is_appended_and_wakes_a_parked_reader(tmp_path: Path) -> None:
    node = node_with_topic(tmp_path, Clock(NOW))
    try:
        info = node.topics.registry.get("t")

        async def append_while_parked() -> bool:
            parked = asyncio.ensure_future(node.replicas.wait_for_append([("t", 0)], 5))
            await asyncio.sleep(0)  # the reader parks first
            first, plog = node.replicas.append_built(info, 0, *rec.build_keyed_batch([(b"k", b"v"), (b"j", None)]))
            assert first.error == ErrorCode.NONE and first.base_offset == 0 and plog is not None
            return await asyncio.wait_for(parked, 5)

        assert asyncio.run(append_while_parked())  # woken by the append, not by its timeout
        second, _ = node.replicas.append_built(info, 0, *rec.build_keyed_batch([(b"k", b"w")], NOW))
        assert second.error == ErrorCode.NONE and second.base_offset == 2
        read = node.replicas.read(info, 0, 0, 1 << 20, min_one=True, read_committed=False)
        assert batch_offsets(read.records) == [(0, 1), (2, 2)]
    finally:
        node.close()


def test_a_coordinator_batch_gets_the_errors_it_can_cause(tmp_path: Path) -> None:
    node = node_with_topic(tmp_path, Clock(NOW))
    try:
        asyncio.run(node.topics.create_topic("small", num_partitions=1, replication_factor=1, assignments=[],
                                             configs={"max.message.bytes": "100"}, validate_only=False))
        batch, header = rec.build_keyed_batch([(b"k", b"v" * 200)], NOW)
        too_large, plog = node.replicas.append_built(node.topics.registry.get("small"), 0, batch, header)
        assert too_large.error == ErrorCode.MESSAGE_TOO_LARGE and plog is None
        assert too_large.error_message == f"The batch size {len(batch)} exceeds max.message.bytes 100"
        missing, plog = node.replicas.append_built(node.topics.registry.get("t"), 1, batch, header)
        assert missing.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and plog is None
        assert node.topics.log("small", 0).log_end_offset == 0  # nothing was written
    finally:
        node.close()
