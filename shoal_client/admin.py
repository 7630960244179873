"""A small synchronous admin client for share groups, on Shoal's protocol package.

    admin = ShareGroupAdmin("127.0.0.1:9092", security=ClientSecurity.from_properties(props), timeout_s=30)
    admin.list_groups(types=["share"])                   # ListGroups v5 on every broker
    admin.describe_share_group("g")                      # ShareGroupDescribe v1 on the group's coordinator
    admin.share_group_offsets("g")                       # DescribeShareGroupOffsets v1 (start offset, lag)
    admin.alter_share_group_offsets("g", {("t", 0): 5})  # AlterShareGroupOffsets v0
    admin.delete_share_group_offsets("g", ["t"])         # DeleteShareGroupOffsets v0
    admin.delete_groups(["g"])                           # DeleteGroups
    admin.list_offsets({("t", 0)}, EARLIEST)             # ListOffsets on the partitions' leaders

Errors the broker answers are returned as values (error code + message) where a tool reports them per item;
`AdminError` is raised for a whole request that failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode
from shoal_client.connection import BrokerConnection, ConnectionLost, parse_bootstrap
from shoal_client.security import ClientSecurity

METADATA, LIST_OFFSETS, FIND_COORDINATOR, LIST_GROUPS, DELETE_GROUPS = 3, 2, 10, 16, 42
SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_OFFSETS, ALTER_SHARE_OFFSETS, DELETE_SHARE_OFFSETS = 77, 90, 91, 92
EARLIEST, LATEST = -2, -1

TopicPartition = tuple[str, int]


def error_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)


class AdminError(RuntimeError):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or error_name(code))
        self.code = code


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    assignment: dict[str, list[int]]  # topic name -> partitions


@dataclass
class ShareGroupDescription:
    group_id: str
    error_code: int
    error_message: str | None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    coordinator: Node | None = None
    members: list[Member] = field(default_factory=list)


@dataclass(frozen=True)
class SharePartitionOffset:
    topic: str
    partition: int
    start_offset: int  # -1: no state
    leader_epoch: int
    lag: int  # -1: not known
    error_code: int = 0
    error_message: str | None = None


class ShareGroupAdmin:
    def __init__(self, bootstrap_servers: str, *, security: ClientSecurity | None = None, timeout_s: float = 30.0,
                 client_id: str = "shoal-share-groups") -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self) -> ShareGroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ connections
    def _connect(self, host: str, port: int) -> BrokerConnection:
        conn = self._conns.get((host, port))
        if conn is None or conn.closed:
            conn = BrokerConnection(host, port, client_id=self.client_id, timeout_s=self.timeout_s,
                                    security=self.security)
            self._conns[(host, port)] = conn
        return conn

    def _any(self) -> BrokerConnection:
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                return self._connect(host, port)
            except ConnectionLost as err:
                last = err
        raise ConnectionLost(f"no bootstrap server reachable: {last}")

    def _call(self, conn: BrokerConnection, api_key: int, lowest: int, body: dict, highest: int | None = None) -> Any:
        return conn.call(api_key, conn.version(api_key, lowest, highest), body)

    def coordinator(self, group_id: str) -> Node:
        resp = self._call(self._any(), FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group_id]})
        c = resp.coordinators[0]
        if c.error_code != 0:
            raise AdminError(c.error_code, c.error_message)
        return Node(c.node_id, c.host, c.port)

    def _coordinator_conn(self, group_id: str) -> tuple[Node, BrokerConnection]:
        node = self.coordinator(group_id)
        return node, self._connect(node.host, node.port)

    # ------------------------------------------------------------------ metadata
    def metadata(self, topics: Iterable[str] | None = None) -> tuple[dict[int, Node], dict[str, Any]]:
        """(brokers, topic name -> decoded topic entry without error) for `topics` (None: all topics)."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        resp = self._call(self._any(), METADATA, 9, body, 12)
        nodes = {b.node_id: Node(b.node_id, b.host, b.port) for b in resp.brokers}
        return nodes, {t.name: t for t in resp.topics if t.error_code == 0}

    def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """topic -> its partitions, for the topics that exist."""
        _, found = self.metadata(list(topics))
        return {name: sorted(p.partition_index for p in t.partitions) for name, t in found.items()}

    def list_offsets(self, partitions: Iterable[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        """Offsets by ListOffsets (`spec`: EARLIEST, LATEST or a timestamp in ms); -1 where none is found."""
        wanted = sorted(set(partitions))
        nodes, topics = self.metadata({t for t, _ in wanted})
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, p in wanted:
            entry = topics.get(topic)
            leader = next((x.leader_id for x in entry.partitions if x.partition_index == p), -1) if entry else -1
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(p)
        out: dict[TopicPartition, int] = {}
        for leader, parts in by_leader.items():
            if leader not in nodes:
                raise AdminError(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                 f"no leader for {sorted((t, p) for t, ps in parts.items() for p in ps)}")
            node = nodes[leader]
            resp = self._call(self._connect(node.host, node.port), LIST_OFFSETS, 1, {
                "replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": spec}
                                               for p in ps]} for t, ps in parts.items()]})
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code != 0:
                        raise AdminError(p.error_code, f"ListOffsets {t.name}-{p.partition_index}: "
                                                       f"{error_name(p.error_code)}")
                    out[(t.name, p.partition_index)] = p.offset
        return out

    # ------------------------------------------------------------------ groups
    def list_groups(self, states: Sequence[str] = (), types: Sequence[str] = ("share",)) -> list[tuple[str, str]]:
        """(group id, state) of the groups on every broker."""
        nodes, _ = self.metadata([])
        out: dict[str, str] = {}
        for node in nodes.values() or [None]:
            conn = self._any() if node is None else self._connect(node.host, node.port)
            resp = self._call(conn, LIST_GROUPS, 5, {"states_filter": list(states), "types_filter": list(types)})
            if resp.error_code != 0:
                raise AdminError(resp.error_code, f"ListGroups: {error_name(resp.error_code)}")
            out.update((g.group_id, g.group_state) for g in resp.groups)
        return sorted(out.items())

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        node, conn = self._coordinator_conn(group_id)
        resp = self._call(conn, SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group_id],
                                                          "include_authorized_operations": False})
        g = resp.groups[0]
        if g.error_code != 0:
            return ShareGroupDescription(group_id, g.error_code, g.error_message, coordinator=node)
        members = [Member(m.member_id, m.client_id, m.client_host, m.member_epoch,
                          {tp.topic_name: sorted(tp.partitions) for tp in m.assignment.topic_partitions})
                   for m in g.members]
        return ShareGroupDescription(group_id, 0, None, g.group_state, g.group_epoch, g.assignment_epoch, node,
                                     members)

    def share_group_offsets(self, group_id: str, topics: Mapping[str, Sequence[int]] | None = None
                            ) -> list[SharePartitionOffset]:
        """Start offset, leader epoch and lag of the group's share-partitions (all of them when `topics` is
        None). AdminError for a group-level error."""
        _, conn = self._coordinator_conn(group_id)
        body = {"groups": [{"group_id": group_id, "topics": None if topics is None else [
            {"topic_name": t, "partitions": list(ps)} for t, ps in topics.items()]}]}
        version = conn.version(DESCRIBE_SHARE_OFFSETS, 0)
        g = conn.call(DESCRIBE_SHARE_OFFSETS, version, body).groups[0]
        if g.error_code != 0:
            raise AdminError(g.error_code, g.error_message)
        return [SharePartitionOffset(t.topic_name, p.partition_index, p.start_offset, p.leader_epoch,
                                     p.get("lag", -1) if version >= 1 else -1, p.error_code, p.error_message)
                for t in g.topics for p in t.partitions]

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]
                                  ) -> dict[TopicPartition, tuple[int, str | None]]:
        """(error code, message) per partition; AdminError for a group-level error."""
        by_topic: dict[str, list[dict]] = {}
        for (topic, p), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": p, "start_offset": offset})
        _, conn = self._coordinator_conn(group_id)
        resp = self._call(conn, ALTER_SHARE_OFFSETS, 0, {"group_id": group_id, "topics": [
            {"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]})
        if resp.error_code != 0:
            raise AdminError(resp.error_code, resp.error_message)
        return {(t.topic_name, p.partition_index): (p.error_code, p.error_message)
                for t in resp.responses for p in t.partitions}

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]
                                   ) -> dict[str, tuple[int, str | None]]:
        """(error code, message) per topic; AdminError for a group-level error."""
        _, conn = self._coordinator_conn(group_id)
        resp = self._call(conn, DELETE_SHARE_OFFSETS, 0, {"group_id": group_id,
                                                          "topics": [{"topic_name": t} for t in topics]})
        if resp.error_code != 0:
            raise AdminError(resp.error_code, resp.error_message)
        return {t.topic_name: (t.error_code, t.error_message) for t in resp.responses}

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, tuple[int, str | None]]:
        out: dict[str, tuple[int, str | None]] = {}
        for gid in group_ids:
            _, conn = self._coordinator_conn(gid)
            resp = self._call(conn, DELETE_GROUPS, 0, {"groups_names": [gid]})
            for r in resp.results:
                out[r.group_id] = (r.error_code, r.get("error_message"))
        return out

    def topic_id(self, topic: str) -> uuid.UUID | None:
        _, found = self.metadata([topic])
        return found[topic].topic_id if topic in found else None
