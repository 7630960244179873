"""Harness for the sans-IO group coordinator: a topic table, deterministic member ids and request builders."""

from __future__ import annotations

import itertools
import uuid
import weakref
from typing import Any

from broker.groups.classic.manager import ClassicConfig
from broker.groups.consumer import protocol as consumer_protocol
from broker.groups.consumer.manager import ConsumerConfig
from broker.groups.consumer.regex import Identity, resolve_now
from broker.groups.coordinator import GroupCoordinator, GroupCoordinatorConfig, OffsetsConfig
from broker.groups.result import GroupResult
from protocol.codec import message_codec


class Topics:
    def __init__(self) -> None:
        self.by_name: dict[str, tuple[uuid.UUID, int]] = {}
        self.version = 0

    def create(self, name: str, partitions: int) -> uuid.UUID:
        tid = uuid.uuid5(uuid.NAMESPACE_OID, f"{name}-{len(self.by_name)}")
        self.by_name[name] = (tid, partitions)
        self.version += 1
        return tid

    def delete(self, name: str) -> None:
        del self.by_name[name]
        self.version += 1

    def get(self, name: str) -> tuple[uuid.UUID, int] | None:
        return self.by_name.get(name)

    def name_of(self, tid: uuid.UUID) -> str | None:
        return next((n for n, (t, _) in self.by_name.items() if t == tid), None)


class Acls:
    """Which principal may DESCRIBE which topics (None: an authorizer that allows everything)."""

    def __init__(self) -> None:
        self.describable: dict[str, set[str]] = {}
        self.version = 0

    def allow(self, principal: str, *topics: str) -> None:
        self.describable.setdefault(principal, set()).update(topics)
        self.version += 1

    def deny(self, principal: str, *topics: str) -> None:
        self.describable.setdefault(principal, set()).difference_update(topics)
        self.version += 1

    def may_describe(self, principal: str, _host: str, topic: str) -> bool:
        return topic in self.describable.get(principal, ())


_harness: weakref.WeakKeyDictionary[GroupCoordinator, tuple[Topics, Acls | None]] = weakref.WeakKeyDictionary()


def make(topics: Topics | None = None, acls: Acls | None = None, **classic: Any) -> GroupCoordinator:
    topics = topics or Topics()
    offsets = classic.pop("offsets", OffsetsConfig())
    consumer = classic.pop("consumer", ConsumerConfig())
    counter = itertools.count()
    gc = GroupCoordinator(
        GroupCoordinatorConfig(classic=ClassicConfig(**classic), offsets=offsets, consumer=consumer),
        topic_info=topics.get, topic_name=topics.name_of, topics_version=lambda: topics.version,
        acl_version=lambda: acls.version if acls is not None else 0,
        new_member_id=lambda client_id, instance_id: f"{instance_id or client_id}-{next(counter)}")
    _harness[gc] = (topics, acls)
    return gc


def consumer_heartbeat(gc: GroupCoordinator, req: dict[str, Any], version: int = 1, now: int = 1000, *,
                       client_id: str = "c", client_host: str = "/127.0.0.1", principal: str = "User:alice",
                       host: str = "127.0.0.1") -> GroupResult:
    """A ConsumerGroupHeartbeat served as the runtime serves it: the regular expressions the request needs are
    resolved first (here on the caller's thread), filtered by `principal`'s DESCRIBE when `make` got Acls."""
    topics, acls = _harness[gc]
    identity: Identity = (principal, host) if acls is not None else None
    work = gc.consumer.regex_work(req, identity)
    verdicts = resolve_now(work, list(topics.by_name), topics.version, acls.version if acls else 0,
                           acls.may_describe if acls else lambda *_: True) if work else {}
    return gc.consumer_group_heartbeat(req, version, now, client_id=client_id, client_host=client_host,
                                       identity=identity, regexes=verdicts)


def subscription(*topics: str) -> bytes:
    body = message_codec("ConsumerProtocolSubscription", 0).encode({"topics": list(topics), "user_data": None})
    return b"\x00\x00" + body


def join_req(member: str = "", *, group: str = "g", session: int = 10_000, rebalance: int = 30_000,
             instance: str | None = None, protocols: list[tuple[str, bytes]] | None = None,
             protocol_type: str = "consumer") -> dict[str, Any]:
    protocols = protocols if protocols is not None else [("range", subscription("t"))]
    return {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "member_id": member, "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols], "reason": None}


def sync_req(member: str, generation: int, assignments: dict[str, bytes] | None = None, *, group: str = "g",
             instance: str | None = None) -> dict[str, Any]:
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance,
            "protocol_type": None, "protocol_name": None,
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}


def hb_req(member: str, generation: int, *, group: str = "g", instance: str | None = None) -> dict[str, Any]:
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance}


def assignment(**topics: list[int]) -> bytes:
    return consumer_protocol.encode_assignment(topics)


class Waiters:
    """Collect the parked responses a result releases (all results pass through `run`)."""

    def __init__(self, gc: GroupCoordinator) -> None:
        self.gc = gc
        self.answers: dict[str, dict[str, Any]] = {}
        self.records: list = []
        self.counter = itertools.count()

    def run(self, res: GroupResult, ok: bool = True) -> GroupResult:
        self.records += res.records
        for waiter, response in res.completions:
            assert waiter not in self.answers, f"{waiter} answered twice"
            self.answers[waiter] = response
        for step in res.after_write:
            follow = step(ok)
            if follow is not None:
                self.run(follow, ok)
        return res

    def new(self, prefix: str) -> str:
        return f"{prefix}#{next(self.counter)}"

    def join(self, req: dict[str, Any], now: int, version: int = 9, client_id: str = "c") -> str:
        waiter = self.new("join")
        self.run(self.gc.join_group(req, version, now, waiter, client_id=client_id, client_host="/127.0.0.1"))
        return waiter

    def sync(self, req: dict[str, Any], now: int) -> str:
        waiter = self.new("sync")
        self.run(self.gc.sync_group(req, now, waiter))
        return waiter

    def tick(self, now: int) -> GroupResult:
        return self.run(self.gc.tick(now))


def cg_req(member: str, epoch: int, *, group: str = "g", topics: list[str] | None = None, regex: str | None = None,
           owned: dict | None = None, instance: str | None = None, rebalance: int = -1,
           assignor: str | None = None) -> dict[str, Any]:
    """A decoded ConsumerGroupHeartbeat v1 request. `owned` maps topic id -> partitions (None: not reported)."""
    if epoch == 0:
        rebalance = 30_000 if rebalance == -1 else rebalance
        owned = {} if owned is None else owned
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": instance, "rack_id": None,
            "rebalance_timeout_ms": rebalance, "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
            "server_assignor": assignor,
            "topic_partitions": None if owned is None else [{"topic_id": t, "partitions": sorted(ps)}
                                                           for t, ps in owned.items()]}


def assigned(response: dict[str, Any]) -> dict | None:
    if response.get("assignment") is None:
        return None
    return {tp["topic_id"]: set(tp["partitions"]) for tp in response["assignment"]["topic_partitions"]}


def owners_are_exclusive(gc, gid: str = "g") -> None:
    """No partition is assigned to, or pending revocation from, two members of consumer group `gid`."""
    seen: dict = {}
    for m in gc.consumer.groups[gid].members.values():
        for a in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    assert (t, p) not in seen, f"{t}:{p} held by {seen[(t, p)]} and {m.member_id}"
                    seen[(t, p)] = m.member_id
