"""Building a SharePartitionManager for unit tests: its collaborators passed in, fakes where a test needs none."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from broker.config.group_config import GroupConfig
from broker.share.dlq import DeadLetterQueue
from broker.share.manager import SharePartitionManager
from protocol.primitives import BytesParts

# A group coordinator that cannot tell who is a member (not loaded): every fetch is served.
NO_GROUP_COORDINATOR = SimpleNamespace(loaded=False, member_assignment=lambda group, member: None)


def spawn(coro, name: str) -> asyncio.Task:
    return asyncio.get_running_loop().create_task(coro, name=name)


def make_manager(*, config: Any, topics: Any, persister: Any, group_configs: Any, replicas: Any = None,
                 groups: Any = NO_GROUP_COORDINATOR) -> SharePartitionManager:
    dlq = DeadLetterQueue(config=config, topics=topics, replicas=replicas,
                          group_configs=lambda group: GroupConfig.from_values(group_configs(group)))
    return SharePartitionManager(config=config, topics=topics, replicas=replicas, persister=persister,
                                 groups=groups, dlq=dlq, group_configs=group_configs, spawn=spawn)


def served_bytes(records: Any) -> bytes:
    """An acquisition's records as one bytes object (they may be parts of several log reads: BytesParts)."""
    return records.join() if isinstance(records, BytesParts) else bytes(records)
