"""Building a SharePartitionManager for unit tests: its collaborators passed in, real ones where they can be (the
replica manager, the logs), small typed fakes where a test needs none."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from broker.cluster.topics import TopicInfo
from broker.config import BrokerConfig
from broker.config import group_config as gc
from broker.config.group_config import GroupConfig
from broker.log import GroupCommitFlusher
from broker.log.partition_log import PartitionLog
from broker.replica_manager import ReplicaManager
from broker.share_partition.dlq import DeadLetterQueue
from broker.share_partition.manager import SharePartitionManager
from protocol.primitives import BytesParts


class NoGroupCoordinator:
    """A group coordinator that cannot tell who is a member (not loaded): every fetch is served."""

    loaded = False

    def member_assignment(self, group_id: str, member_id: str) -> Mapping[uuid.UUID, Collection[int]] | None:
        return None


NO_GROUP_COORDINATOR = NoGroupCoordinator()


class OneTopic:
    """The topic manager's lookups for one topic and its partition logs (what the share-partition leader, its DLQ
    and the replica manager's reads ask of TopicManager)."""

    def __init__(self, directory: Path, topic_id: uuid.UUID, *, partitions: int = 1, name: str = "t") -> None:
        self.info = TopicInfo(name, topic_id, partitions)
        self.logs = [PartitionLog(directory / f"{name}-{p}") for p in range(partitions)]
        self.registry = self  # TopicManager.registry: the same two lookups

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.info if topic_id == self.info.topic_id else None

    def get(self, name: str) -> TopicInfo | None:
        return self.info if name == self.info.name else None

    def log(self, name: str, partition: int) -> PartitionLog:
        if name != self.info.name:
            raise KeyError((name, partition))
        return self.logs[partition]

    def find_log(self, name: str, partition: int) -> PartitionLog | None:
        return self.logs[partition] if name == self.info.name and 0 <= partition < len(self.logs) else None


def broker_config(settings: Mapping[str, object]) -> BrokerConfig:
    """A broker config with these settings (given as values or text)."""
    return BrokerConfig({name: str(value).lower() if isinstance(value, bool) else str(value)
                         for name, value in settings.items()})


def effective_group_configs(config: BrokerConfig, overrides: Mapping[str, str] | None = None) -> GroupConfig:
    """A group's effective configs as ConfigService.group_settings gives them: the group's overrides over the
    broker's settings over the defaults of the table, typed."""
    return GroupConfig.from_values({name: gc.effective_value(name, overrides or {}, config)
                                    for name in gc.GROUP_CONFIGS})


def group_configs(config: BrokerConfig, overrides: Mapping[str, str] | None = None) -> Callable[[str], GroupConfig]:
    """Every group's effective configs: the same object on each call, as the config service caches it."""
    configs = effective_group_configs(config, overrides)
    return lambda _group: configs


EARLIEST = {"share.auto.offset.reset": "earliest"}


def spawn(coro, name: str) -> asyncio.Task:
    return asyncio.get_running_loop().create_task(coro, name=name)


def make_manager(*, config: Any, topics: Any, persister: Any, group_configs: Callable[[str], GroupConfig],
                 replicas: ReplicaManager | None = None, groups: Any = NO_GROUP_COORDINATOR) -> SharePartitionManager:
    """A manager over `topics`, reading them through `replicas` (a real ReplicaManager over them by default)."""
    replicas = replicas if replicas is not None else ReplicaManager(topics, GroupCommitFlusher())
    dlq = DeadLetterQueue(config=config, topics=topics, replicas=replicas, group_configs=group_configs)
    return SharePartitionManager(config=config, topics=topics, replicas=replicas, persister=persister,
                                 groups=groups, dlq=dlq, group_configs=group_configs, spawn=spawn)


def served_bytes(records: Any) -> bytes:
    """An acquisition's records as one bytes object (they may be parts of several log reads: BytesParts)."""
    return records.join() if isinstance(records, BytesParts) else bytes(records)
