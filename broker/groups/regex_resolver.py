"""Resolves what consumer-group heartbeats need of their regular expressions (consumer/regex.py) without holding
the event loop: patterns are compiled and matched against the topic names by the regex worker process
(broker.linear_regex); the DESCRIBE filter asks the authorizer, whose state lives on the loop, in slices between
which other requests are served; and heartbeats of one group needing a resolution are served one at a time, so
each sees what the one before it recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from broker.groups.collaborators import TopicAuthorizer, TopicRegistryView
from broker.groups.consumer import regex
from broker.groups.consumer.regex import Identity, RegexWork, Resolution
from broker.linear_regex import RegexError, RegexWorker

# Authorizer decisions taken on the loop between two yields to other tasks.
_DECISIONS_PER_SLICE = 256


class RegexResolver:
    def __init__(self, registry: TopicRegistryView, authorizer: TopicAuthorizer, worker: RegexWorker) -> None:
        self._registry = registry
        self._authorizer = authorizer
        self._worker = worker
        self._names: tuple[int, tuple[str, ...]] = (-1, ())
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def identity(self, principal: str, host: str) -> Identity:
        """The identity a client's DESCRIBE permission is asked for; None when no authorizer runs."""
        return (principal, host) if self._authorizer.enforcing else None

    @property
    def acl_version(self) -> int:
        return self._authorizer.acl_version

    @asynccontextmanager
    async def group_lock(self, group_id: str) -> AsyncIterator[None]:
        """Held from computing a heartbeat's work to serving it, for the heartbeats of a group that need one."""
        lock, users = self._locks.get(group_id) or (asyncio.Lock(), 0)
        self._locks[group_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[group_id]
            if users == 1:
                del self._locks[group_id]
            else:
                self._locks[group_id] = (lock, users - 1)

    def _topic_names(self) -> tuple[int, tuple[str, ...]]:
        version = self._registry.version
        if self._names[0] != version:
            self._names = (version, tuple(info.name for info in self._registry.all() if not info.internal))
        return self._names

    async def resolve(self, work: RegexWork) -> dict[str, Resolution]:
        """The verdicts `work` asks for. Raises RegexUnavailable if the worker process failed."""
        topics_version, names = self._topic_names()
        matched = await self._worker.match(work.check, work.resolve, names, ("topics", topics_version))
        while True:
            acl_version = self._authorizer.acl_version
            kept = await self._describable(work, matched)
            if self._authorizer.acl_version == acl_version:
                break  # else ACLs changed while deciding: decide again under the new ones
        return regex.finish(work, matched, kept, topics_version, acl_version)

    async def _describable(self, work: RegexWork, matched: dict[str, RegexError | list[str]]
                           ) -> dict[str, list[str]]:
        may_describe = self._authorizer.may_describe_topic
        kept: dict[str, list[str]] = {}
        decisions = 0
        for pattern, found in matched.items():
            if isinstance(found, RegexError) or pattern not in work.resolve:
                continue
            identities = [i for i in work.resolve[pattern] if i is not None]
            if not identities:
                kept[pattern] = found
                continue
            keep = []
            for name in found:
                if all(may_describe(principal, host, name) for principal, host in identities):
                    keep.append(name)
                decisions += len(identities)
                if decisions >= _DECISIONS_PER_SLICE:
                    decisions = 0
                    await asyncio.sleep(0)
            kept[pattern] = keep
        return kept
