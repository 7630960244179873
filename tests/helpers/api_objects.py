"""API objects (broker/handlers) built over real partition-layer components, for tests of the router's
registrations and of handlers without a broker process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker.handlers.produce import ProduceApis
from broker.handlers.producer_ids import ProducerIdApis
from broker.producer_ids import ProducerIdAllocator, ProducerIdManager
from broker.txn.results import TxnResult
from tests.helpers.replica_node import Clock, Node


class NoTransactionCoordinator:
    """A transaction coordinator for tests that send no transactional InitProducerId."""

    async def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> TxnResult:
        raise AssertionError("this test has no transaction coordinator")


@contextmanager
def partition_apis(tmp_path: Path) -> Iterator[tuple[ProduceApis, ProducerIdApis]]:
    """Produce and InitProducerId over a real TopicManager, ReplicaManager and producer id manager."""
    node = Node(tmp_path / "data", Clock(1_000))
    try:
        topics = node.topics
        producer_ids = ProducerIdManager(ProducerIdAllocator(topics.registry.next_producer_id,
                                                             topics.reserve_producer_ids))
        yield ProduceApis(topics, node.replicas), ProducerIdApis(producer_ids, NoTransactionCoordinator())
    finally:
        node.close()
