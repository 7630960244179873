"""Share sessions (KIP-932): per (group, member) sets of share-partitions with a request epoch.

ShareSessionEpoch 0 opens a session (a full request: its partitions are the session), n > 0 must be the next
epoch and adds/forgets partitions incrementally, -1 closes the session after the request. Pure state: the
caller releases a closed or replaced session's acquired records.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.config.components import ComponentConfig, setting
from protocol.errors import ErrorCode

OPEN_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    # After Int32.MAX the epoch wraps to 1: 0 and -1 are reserved for open and close.
    return 1 if epoch >= INT32_MAX else epoch + 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # insertion-ordered set
    next_epoch: int = 1


class SessionOutcome(NamedTuple):  # one per ShareFetch: a tuple builds faster than a frozen dataclass
    error: ErrorCode = ErrorCode.NONE
    session: ShareSession | None = None
    # The session this request ended (closed with -1) or replaced (a new epoch-0 request): release its records.
    ended: ShareSession | None = None
    message: str | None = None


@dataclass(frozen=True)
class ShareSessionConfig(ComponentConfig):
    # the most share sessions the broker keeps (a ShareFetch opening one more is refused)
    max_share_sessions: int = setting("group.share.max.share.sessions")


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self._max = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())

    def begin(self, group_id: str, member_id: str, epoch: int, add: Sequence[TopicIdPartition],
              forget: Sequence[TopicIdPartition], has_acknowledgements: bool) -> SessionOutcome:
        """Apply the session part of one ShareFetch request (ShareAcknowledge uses `acknowledge`)."""
        key = (group_id, member_id)
        existing = self._sessions.get(key)
        if epoch == OPEN_EPOCH:
            if has_acknowledgements:
                return SessionOutcome(ErrorCode.INVALID_REQUEST,
                                      message="Acknowledge data present on initial share fetch request")
            if existing is None and len(self._sessions) >= self._max:
                return SessionOutcome(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                      message="The share session cache is full")
            session = ShareSession(group_id, member_id, dict.fromkeys(add))
            self._sessions[key] = session
            return SessionOutcome(session=session, ended=existing)
        if existing is None:
            return SessionOutcome(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                  message=f"Share session for member {member_id} not found")
        if epoch == FINAL_EPOCH:
            if add:
                return SessionOutcome(ErrorCode.INVALID_REQUEST,
                                      message="A final share fetch request may only carry acknowledgements")
            del self._sessions[key]
            return SessionOutcome(session=existing, ended=existing)
        if epoch != existing.next_epoch:
            return SessionOutcome(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                  message=f"Expected share session epoch {existing.next_epoch}, got {epoch}")
        for tp in forget:
            existing.partitions.pop(tp, None)
        for tp in add:
            existing.partitions[tp] = None
        existing.next_epoch = next_epoch(epoch)
        return SessionOutcome(session=existing)

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> SessionOutcome:
        """Session part of a ShareAcknowledge request: no partitions change; -1 closes after acknowledging."""
        key = (group_id, member_id)
        existing = self._sessions.get(key)
        if epoch == OPEN_EPOCH:
            return SessionOutcome(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                  message="ShareAcknowledge cannot open a share session")
        if existing is None:  # Kafka's ShareAcknowledge answer carries no message
            return SessionOutcome(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            del self._sessions[key]
            return SessionOutcome(session=existing, ended=existing)
        if epoch != existing.next_epoch:
            return SessionOutcome(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                  message=f"Expected share session epoch {existing.next_epoch}, got {epoch}")
        existing.next_epoch = next_epoch(epoch)
        return SessionOutcome(session=existing)

    def remove_member(self, group_id: str, member_id: str) -> ShareSession | None:
        """The member left the group or timed out: its session goes with it."""
        return self._sessions.pop((group_id, member_id), None)
