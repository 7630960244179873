"""What a group coordinator operation hands back to the runtime (sans-IO)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from broker.groups.records import Record
from protocol.errors import ErrorCode


class GroupError(Exception):
    """A request refused with a Kafka error code (raised before any state changes)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code, self.message = code, message


@dataclass(frozen=True)
class InitializeRequest:
    """Share-partitions to initialize through the share coordinator (InitializeShareGroupState).

    Kafka uses the group epoch as the state epoch and -1 as the start offset (share.auto.offset.reset decides).
    When done call the share part's `initialized(group_id, topic_id, partitions)`, or `initialize_failed(...)`.
    """

    group_id: str
    state_epoch: int
    topics: dict[UUID, frozenset[int]]


@dataclass(frozen=True)
class RemovedMember:
    """A share-group member that left or whose session expired: the share-partition leader releases its
    acquired records."""

    group_id: str
    member_id: str
    reason: str  # "left" or "session expired"
    assigned: Mapping[UUID, frozenset[int]]


@dataclass
class GroupResult:
    """`records` are written (durably) before anything else happens; then `response` is the answer to the
    request, each `(waiter, response)` in `completions` answers a parked request (JoinGroup/SyncGroup), and
    each `after_write(ok)` runs with whether the write succeeded and may return a further result.

    Share groups add what happens once the records are durable: `initialize` share-partitions through the
    share coordinator, and tell the share-partition leader about `removed_members`."""

    response: dict[str, Any] | None = None
    records: list[Record] = field(default_factory=list)
    completions: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    after_write: list[Callable[[bool], GroupResult | None]] = field(default_factory=list)
    initialize: list[InitializeRequest] = field(default_factory=list)
    removed_members: list[RemovedMember] = field(default_factory=list)

    def __iter__(self) -> Iterator[Any]:
        # `response, records = manager.heartbeat(...)` for callers that need nothing else.
        return iter((self.response, self.records))

    def complete(self, waiter: Any, response: dict[str, Any]) -> None:
        if waiter is not None:
            self.completions.append((waiter, response))

    def merge(self, other: GroupResult | None) -> GroupResult:
        if other is not None:
            self.records += other.records
            self.completions += other.completions
            self.after_write += other.after_write
            self.initialize += other.initialize
            self.removed_members += other.removed_members
            if other.response is not None:
                self.response = other.response
        return self

    @property
    def empty(self) -> bool:
        return not (self.records or self.completions or self.after_write or self.initialize
                    or self.removed_members or self.response is not None)
