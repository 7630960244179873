"""What a group coordinator operation hands back to the runtime (sans-IO)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.groups.records import Record
from protocol.errors import ErrorCode


class GroupError(Exception):
    """A request refused with a Kafka error code (raised before any state changes)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code, self.message = code, message


@dataclass
class GroupResult:
    """`records` are written (durably) before anything else happens; then `response` is the answer to the
    request, each `(waiter, response)` in `completions` answers a parked request (JoinGroup/SyncGroup), and
    each `after_write(ok)` runs with whether the write succeeded and may return a further result."""

    response: dict[str, Any] | None = None
    records: list[Record] = field(default_factory=list)
    completions: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    after_write: list[Callable[[bool], GroupResult | None]] = field(default_factory=list)

    def complete(self, waiter: Any, response: dict[str, Any]) -> None:
        if waiter is not None:
            self.completions.append((waiter, response))

    def merge(self, other: GroupResult | None) -> GroupResult:
        if other is not None:
            self.records += other.records
            self.completions += other.completions
            self.after_write += other.after_write
            if other.response is not None:
                self.response = other.response
        return self

    @property
    def empty(self) -> bool:
        return not (self.records or self.completions or self.after_write or self.response is not None)
