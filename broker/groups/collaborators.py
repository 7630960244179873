"""What the group coordinator runtime is given, typed by what it uses: its topics (names,
ids, partition counts, high watermarks), the group configs and a way to run background tasks.

Protocols rather than the broker's classes, so the group coordinator depends on no more of them than this.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Protocol
from uuid import UUID

from broker.config.group_config import GroupConfig


class TopicView(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def topic_id(self) -> UUID: ...

    @property
    def num_partitions(self) -> int: ...

    @property
    def internal(self) -> bool: ...


class TopicRegistryView(Protocol):
    @property
    def version(self) -> int: ...  # moves on every topic change (consumer groups re-check subscriptions)

    def get(self, name: str) -> TopicView | None: ...

    def by_id(self, topic_id: UUID) -> TopicView | None: ...

    def all(self) -> Iterable[TopicView]: ...


class PartitionEnd(Protocol):
    @property
    def high_watermark(self) -> int: ...


class Topics(Protocol):
    """The broker's topics: metadata, and each partition's log (for its high watermark)."""

    @property
    def registry(self) -> TopicRegistryView: ...

    def log(self, topic: str, partition: int) -> PartitionEnd: ...

    async def create_topic(self, name: str, *, num_partitions: int, replication_factor: int,
                           assignments: list[tuple[int, list[int]]], configs: list[tuple[str, str | None]],
                           validate_only: bool) -> Any: ...  # streams groups' internal topics (TopicError if not)


class GroupConfigs(Protocol):
    def group_settings(self, group_id: str) -> GroupConfig:
        """Effective group configs of `group_id` (its overrides over the broker's values), typed."""
        ...


# Run a coroutine as a background task for the life of the broker (named for logs); failures are logged.
Spawn = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]


class TopicAuthorizer(Protocol):
    """Who may DESCRIBE which topic (the security component): a regex subscription resolves only to those."""

    @property
    def enforcing(self) -> bool: ...  # an authorizer runs (authorizer.class.name)

    @property
    def acl_version(self) -> int: ...  # moves on when a decision may have changed

    def may_describe_topic(self, principal: str, host: str, topic: str) -> bool: ...
