"""A TopicManager and ReplicaManager over one data directory with an injected clock, for tests of the replica
manager without sockets (producer state, transactions)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.cluster.journal import MetadataJournal
from broker.cluster.manager import TopicManager
from broker.config import BrokerConfig
from broker.log import GroupCommitFlusher, LogManager, PartitionLog
from broker.log.log_manager import METADATA_LOG_DIR
from broker.log.producer_state import ProducerStateManagerConfig
from broker.replica_manager import ReplicaManager
from protocol import records as rec

EXPIRATION_MS = 60_000


class Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms / 1000


class Node:
    """A TopicManager and ReplicaManager over one data directory, with an injected clock."""

    def __init__(self, data: Path, clock: Clock, overrides: dict[str, str] | None = None) -> None:
        config = BrokerConfig({"log.dirs": str(data), "producer.id.expiration.ms": str(EXPIRATION_MS),
                               **(overrides or {})})
        self.logs = LogManager(data, config.log_config({}))
        self.logs.start()
        self.journal_log = PartitionLog(data / METADATA_LOG_DIR, strict_recovery=True)
        self.topics = TopicManager(config, self.logs, MetadataJournal(self.journal_log), 1)
        self.topics.load()
        self.replicas = ReplicaManager(self.topics, GroupCommitFlusher(), clock=clock,
                                       producer_config=lambda: ProducerStateManagerConfig.from_config(config))
        self.clock = clock

    def produce(self, topic: str, pid: int, seq: int, *, count: int = 1):
        batch = rec.build_batch([rec.Record(key=None, value=b"v%d" % (seq + i)) for i in range(count)],
                                timestamp=self.clock.now_ms, producer_id=pid, producer_epoch=0, base_sequence=seq)
        result, _plog = self.replicas.append(self.topics.registry.get(topic), 0, batch)
        return result

    def close(self) -> None:
        self.logs.close()
        self.journal_log.close()


def node_with_topic(tmp_path: Path, clock: Clock, name: str = "t") -> Node:
    node = Node(tmp_path / "data", clock)
    asyncio.run(node.topics.create_topic(name, num_partitions=1, replication_factor=1, assignments=[], configs={},
                                         validate_only=False))
    return node
