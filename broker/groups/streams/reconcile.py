"""Moving a streams member from its current assignment towards its target (Kafka's streams
CurrentAssignmentBuilder), sans-IO.

A member keeps the tasks it owns that are still in its target; tasks to give up are pending revocation until
the member's heartbeat no longer reports them (state UNREVOKED_TASKS, its epoch held back); tasks of its target
that another process still owns are withheld (UNRELEASED_TASKS) and handed over once released. A standby or
warm-up task can change role on the same process at once, and an active task can become a standby there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from broker.groups.result import GroupError
from broker.groups.streams.group import (
    ActiveTasks,
    AssignedTasks,
    MemberState,
    StreamsMember,
    Tasks,
    TasksTuple,
)
from protocol.errors import ErrorCode

ActiveOwner = Callable[[str, int], "str | None"]
Owners = Callable[[str, int], "set[str]"]


def _frozen(t: dict[str, set[int]]) -> Tasks:
    return {s: frozenset(p) for s, p in t.items() if p}


def _remove(tasks: dict[str, set[int]], sub: str, p: int) -> None:
    ps = tasks.get(sub)
    if ps is not None:
        ps.discard(p)
        if not ps:
            del tasks[sub]


def _contains_any(owned: TasksTuple, pending: AssignedTasks) -> bool:
    for mine, theirs in ((owned.active, pending.active_sets()), (owned.standby, pending.standby),
                         (owned.warmup, pending.warmup)):
        for sub, ps in theirs.items():
            if mine.get(sub, frozenset()) & ps:
                return True
    return False


class Reconciler:
    def __init__(self, member: StreamsMember, target_epoch: int, target: TasksTuple, *, active_owner: ActiveOwner,
                 standby_owners: Owners, warmup_owners: Owners, owned: TasksTuple | None) -> None:
        """`owned`: the tasks the member's heartbeat reports (None when it did not send them)."""
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.active_owner = active_owner
        self.standby_owners = standby_owners
        self.warmup_owners = warmup_owners
        self.owned = owned

    def build(self) -> StreamsMember:
        m = self.member
        if m.state is MemberState.STABLE:
            return self._next(m.member_epoch, m.assigned) if m.member_epoch != self.target_epoch else m
        if m.state is MemberState.UNREVOKED_TASKS:
            if self._not_released(m.pending_revocation):
                return m
            return self._next(m.member_epoch + 1, m.assigned)
        if m.state is MemberState.UNRELEASED_TASKS:
            return self._next(m.member_epoch, m.assigned)
        if self.owned is not None and self.owned.is_empty():
            return self._next(self.target_epoch, m.assigned)
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, "The streams group member is in a unknown state. The "
                         "member must abandon all its tasks and rejoin.")

    def _not_released(self, pending: AssignedTasks) -> bool:
        return self.owned is None or _contains_any(self.owned, pending)

    def _next(self, epoch: int, current: AssignedTasks) -> StreamsMember:
        me = self.member.process_id
        # Active tasks (with their assignment epochs).
        active_kept: ActiveTasks = {}
        active_revoke: ActiveTasks = {}
        active_new: ActiveTasks = {}
        unreleased = False
        for sub in set(current.active) | set(self.target.active):
            cur = current.active.get(sub, {})
            tgt = self.target.active.get(sub, frozenset())
            kept = {p: e for p, e in cur.items() if p in tgt}
            revoke = {p: e for p, e in cur.items() if p not in kept}
            new = {}
            for p in tgt:
                if p in kept:
                    continue
                if self.active_owner(sub, p) is not None \
                        or (me in self.standby_owners(sub, p) and p not in current.standby.get(sub, ())) \
                        or (me in self.warmup_owners(sub, p) and p not in current.warmup.get(sub, ())):
                    unreleased = True
                    continue
                new[p] = self.target_epoch
            if kept:
                active_kept[sub] = kept
            if revoke:
                active_revoke[sub] = revoke
            if new:
                active_new[sub] = new

        def diff(cur: Tasks, tgt: Tasks, is_unreleased: Callable[[str, int], bool]
                 ) -> tuple[dict[str, set[int]], dict[str, set[int]], dict[str, set[int]], bool]:
            kept: dict[str, set[int]] = {}
            revoke: dict[str, set[int]] = {}
            new: dict[str, set[int]] = {}
            blocked = False
            for sub in set(cur) | set(tgt):
                c, t = cur.get(sub, frozenset()), tgt.get(sub, frozenset())
                if c & t:
                    kept[sub] = set(c & t)
                if c - t:
                    revoke[sub] = set(c - t)
                pending = set()
                for p in t - c:
                    if is_unreleased(sub, p):
                        blocked = True
                    else:
                        pending.add(p)
                if pending:
                    new[sub] = pending
            return kept, revoke, new, blocked

        def standby_unreleased(sub: str, p: int) -> bool:
            return (self.active_owner(sub, p) == me and p not in current.active.get(sub, {})) \
                or me in self.standby_owners(sub, p) \
                or (me in self.warmup_owners(sub, p) and p not in current.warmup.get(sub, ()))

        def warmup_unreleased(sub: str, p: int) -> bool:
            return self.active_owner(sub, p) == me \
                or (me in self.standby_owners(sub, p) and p not in current.standby.get(sub, ())) \
                or me in self.warmup_owners(sub, p)

        sb_kept, sb_revoke, sb_new, sb_blocked = diff(current.standby, self.target.standby, standby_unreleased)
        wu_kept, wu_revoke, wu_new, wu_blocked = diff(current.warmup, self.target.warmup, warmup_unreleased)
        unreleased = unreleased or sb_blocked or wu_blocked
        # Role changes on this member: an active task demoted to standby, standby <-> warm-up.
        for sub, parts in current.active.items():
            for p in parts:
                if p in sb_new.get(sub, ()):
                    _remove(sb_new, sub, p)
                    sb_kept.setdefault(sub, set()).add(p)
        for outgoing, out_revoke, in_new, in_kept in ((current.standby, sb_revoke, wu_new, wu_kept),
                                                      (current.warmup, wu_revoke, sb_new, sb_kept)):
            for sub, held in outgoing.items():
                for p in held:
                    if p in in_new.get(sub, ()):
                        _remove(in_new, sub, p)
                        in_kept.setdefault(sub, set()).add(p)
                        _remove(out_revoke, sub, p)
        # A standby or warm-up task promoted to active is not revoked, and kept until the active one is granted.
        for outgoing, out_revoke in ((current.standby, sb_revoke), (current.warmup, wu_revoke)):
            for sub, held in outgoing.items():
                for p in held:
                    if p in self.target.active.get(sub, ()):
                        _remove(out_revoke, sub, p)
        revocation = AssignedTasks(active_revoke, _frozen(sb_revoke), _frozen(wu_revoke))
        to_revoke = not revocation.is_empty() and self._not_released(revocation)
        for outgoing, kept_role in ((current.standby, sb_kept), (current.warmup, wu_kept)):
            for sub, held in outgoing.items():
                for p in held:
                    promoted_now = not to_revoke and p in active_new.get(sub, {})
                    if p in self.target.active.get(sub, ()) and not promoted_now:
                        kept_role.setdefault(sub, set()).add(p)
        m = self.member
        if to_revoke:
            return replace(m, state=MemberState.UNREVOKED_TASKS, previous_member_epoch=m.member_epoch,
                           member_epoch=epoch,
                           assigned=AssignedTasks(active_kept, _frozen(sb_kept), _frozen(wu_kept)),
                           pending_revocation=revocation)
        merged_active = {s: dict(ps) for s, ps in active_kept.items()}
        for sub, ps in active_new.items():
            merged_active.setdefault(sub, {}).update(ps)
        for sub, pending in sb_new.items():
            sb_kept.setdefault(sub, set()).update(pending)
        for sub, pending in wu_new.items():
            wu_kept.setdefault(sub, set()).update(pending)
        state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
        return replace(m, state=state, previous_member_epoch=m.member_epoch, member_epoch=self.target_epoch,
                       assigned=AssignedTasks(merged_active, _frozen(sb_kept), _frozen(wu_kept)),
                       pending_revocation=AssignedTasks())


def owned_from_request(active: list[Any] | None, standby: list[Any] | None, warmup: list[Any] | None) -> TasksTuple | None:
    if active is None or standby is None or warmup is None:
        return None

    def tasks(items: list[Any]) -> Tasks:
        out: dict[str, set[int]] = {}
        for t in items:
            out.setdefault(t["subtopology_id"], set()).update(t["partitions"])
        return _frozen(out)

    return TasksTuple(tasks(active), tasks(standby), tasks(warmup))

