"""A small synchronous admin client for share groups and transactions, on Shoal's protocol package.

    admin = ShareGroupAdmin("127.0.0.1:9092", security=ClientSecurity.from_properties(props), timeout_s=30)
    admin.list_groups(types=["share"])                   # ListGroups v5 on every broker
    admin.describe_share_group("g")                      # ShareGroupDescribe v1 on the group's coordinator
    admin.share_group_offsets("g")                       # DescribeShareGroupOffsets v1 (start offset, lag)
    admin.alter_share_group_offsets("g", {("t", 0): 5})  # AlterShareGroupOffsets v0
    admin.delete_share_group_offsets("g", ["t"])         # DeleteShareGroupOffsets v0
    admin.delete_groups(["g"])                           # DeleteGroups
    admin.list_offsets({("t", 0)}, EARLIEST)             # ListOffsets on the partitions' leaders

    txn = TransactionAdmin("127.0.0.1:9092")
    txn.list_transactions()                              # ListTransactions on every broker, by broker id
    txn.describe_transactions(["tx"])                    # DescribeTransactions on each id's coordinator
    txn.describe_producers([("t", 0)])                   # DescribeProducers on the leaders (or one broker)
    txn.abort_transaction(AbortSpec("t", 0, pid, epoch, coordinator_epoch))  # WriteTxnMarkers ABORT on the leader

Errors the broker answers are returned as values (error code + message) where a tool reports them per item;
`AdminError` is raised for a whole request that failed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from protocol.errors import ErrorCode
from shoal_client.connection import BrokerConnection, ConnectionLost, parse_bootstrap
from shoal_client.security import ClientSecurity

METADATA, LIST_OFFSETS, FIND_COORDINATOR, LIST_GROUPS, DELETE_GROUPS = 3, 2, 10, 16, 42
WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 27, 61, 65, 66
INIT_PRODUCER_ID = 22
SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_OFFSETS, ALTER_SHARE_OFFSETS, DELETE_SHARE_OFFSETS = 77, 90, 91, 92
EARLIEST, LATEST = -2, -1
GROUP, TRANSACTION = 0, 1  # FindCoordinator key types

TopicPartition = tuple[str, int]

# What Kafka's admin retries (with the coordinator or the leader looked up again) until its timeout: a coordinator
# loading or moving, a leader moving.
_COORDINATOR_RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          ErrorCode.NOT_COORDINATOR)
_RETRIABLE = (*_COORDINATOR_RETRIABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE)
_RETRY_BACKOFF_S = 0.1


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


class AdminClient:
    """Connections, metadata and offsets: what the share-group and transaction admins share."""

    def __init__(self, bootstrap_servers: str, *, security: ClientSecurity | None = None, timeout_s: float = 30.0,
                 client_id: str = "shoal-admin") -> None:
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

    def __enter__(self) -> Self:
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

    def _call_any(self, api_key: int, lowest: int, body: dict, highest: int | None = None) -> Any:
        """A request any broker answers (Metadata, FindCoordinator), to the first bootstrap server that does: one
        may be down (a cluster's broker stopped or failing over)."""
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                return self._call(self._connect(host, port), api_key, lowest, body, highest)
            except ConnectionLost as err:
                last = err
        raise ConnectionLost(f"no bootstrap server reachable: {last}")

    def _call(self, conn: BrokerConnection, api_key: int, lowest: int, body: dict, highest: int | None = None) -> Any:
        return conn.call(api_key, conn.version(api_key, lowest, highest), body)

    def _until_not_loading(self, call):  # noqa: ANN001, ANN202 - call() -> (error code, result)
        """Retry `call` while its coordinator or leader is loading, moving or unreachable (a cluster's broker
        stopped, its successor not elected yet), as Kafka's admin does, up to the timeout; then the last answer
        (or ConnectionLost)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                code, result = call()
            except ConnectionLost:
                if time.monotonic() >= deadline:
                    raise
                code, result = None, None
            except AdminError as e:
                if e.code not in _RETRIABLE or time.monotonic() >= deadline:
                    raise
                code = None
            if code is not None and (code not in _RETRIABLE or time.monotonic() >= deadline):
                return code, result
            time.sleep(_RETRY_BACKOFF_S)

    def coordinator(self, key: str, key_type: int = GROUP) -> Node:
        resp = self._call_any(FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})
        c = resp.coordinators[0]
        if c.error_code != 0:
            raise AdminError(c.error_code, c.error_message)
        return Node(c.node_id, c.host, c.port)

    def node_conn(self, node: Node) -> BrokerConnection:
        return self._connect(node.host, node.port)

    def _coordinator_conn(self, group_id: str) -> tuple[Node, BrokerConnection]:
        node = self.coordinator(group_id)
        return node, self._connect(node.host, node.port)

    def _at_coordinator(self, group_id: str, call, code=lambda result: 0):  # noqa: ANN001, ANN202
        """`call(node, conn)` on the group's coordinator, found again and called again while the coordinator moves
        (`code(result)` in _RETRIABLE, such an AdminError raised, or its broker gone): see _until_not_loading."""
        def once():  # noqa: ANN202
            result = call(*self._coordinator_conn(group_id))
            return code(result), result
        return self._until_not_loading(once)[1]

    # ------------------------------------------------------------------ metadata
    def metadata(self, topics: Iterable[str] | None = None) -> tuple[dict[int, Node], dict[str, Any]]:
        """(brokers, topic name -> decoded topic entry without error) for `topics` (None: all topics)."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        resp = self._call_any(METADATA, 9, body, 12)
        nodes = {b.node_id: Node(b.node_id, b.host, b.port) for b in resp.brokers}
        return nodes, {t.name: t for t in resp.topics if t.error_code == 0}

    def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """topic -> its partitions, for the topics that exist."""
        _, found = self.metadata(list(topics))
        return {name: sorted(p.partition_index for p in t.partitions) for name, t in found.items()}

    def by_leader(self, partitions: Iterable[TopicPartition]
                  ) -> tuple[dict[int, Node], dict[int, dict[str, list[int]]]]:
        """(brokers, leader id -> topic -> partitions); leader -1 for partitions that do not exist."""
        wanted = sorted(set(partitions))
        nodes, topics = self.metadata({t for t, _ in wanted})
        grouped: dict[int, dict[str, list[int]]] = {}
        for topic, p in wanted:
            entry = topics.get(topic)
            leader = next((x.leader_id for x in entry.partitions if x.partition_index == p), -1) if entry else -1
            grouped.setdefault(leader, {}).setdefault(topic, []).append(p)
        return nodes, grouped

    def list_offsets(self, partitions: Iterable[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        """Offsets by ListOffsets (`spec`: EARLIEST, LATEST or a timestamp in ms); -1 where none is found. Asked
        again of the leaders while one moves or does not answer (_until_not_loading)."""
        wanted = list(partitions)
        return self._until_not_loading(lambda: (0, self._list_offsets(wanted, spec)))[1]

    def _list_offsets(self, partitions: Iterable[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        nodes, by_leader = self.by_leader(partitions)
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



class ShareGroupAdmin(AdminClient):
    def __init__(self, bootstrap_servers: str, *, security: ClientSecurity | None = None, timeout_s: float = 30.0,
                 client_id: str = "shoal-share-groups") -> None:
        super().__init__(bootstrap_servers, security=security, timeout_s=timeout_s, client_id=client_id)

    # ------------------------------------------------------------------ groups
    def list_groups(self, states: Sequence[str] = (), types: Sequence[str] = ("share",)) -> list[tuple[str, str]]:
        """(group id, state) of the groups on every broker."""
        nodes, _ = self.metadata([])
        out: dict[str, str] = {}
        for node in nodes.values():
            resp = self._call(self._connect(node.host, node.port), LIST_GROUPS, 5,
                              {"states_filter": list(states), "types_filter": list(types)})
            if resp.error_code != 0:
                raise AdminError(resp.error_code, f"ListGroups: {error_name(resp.error_code)}")
            out.update((g.group_id, g.group_state) for g in resp.groups)
        return list(out.items())  # in the brokers' order, as Kafka's admin client gives them

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        return self._at_coordinator(group_id, lambda node, conn: self._describe_share_group(group_id, node, conn))

    def _describe_share_group(self, group_id: str, node: Node, conn: BrokerConnection) -> ShareGroupDescription:
        resp = self._call(conn, SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group_id],
                                                          "include_authorized_operations": False})
        g = resp.groups[0]
        if g.error_code in _RETRIABLE:
            raise AdminError(g.error_code, g.error_message)
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
        body = {"groups": [{"group_id": group_id, "topics": None if topics is None else [
            {"topic_name": t, "partitions": list(ps)} for t, ps in topics.items()]}]}
        return self._at_coordinator(group_id, lambda _, conn: self._share_group_offsets(conn, body))

    @staticmethod
    def _share_group_offsets(conn: BrokerConnection, body: dict) -> list[SharePartitionOffset]:
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
        resp = self._at_coordinator(group_id, lambda _, conn: self._call(conn, ALTER_SHARE_OFFSETS, 0, {
            "group_id": group_id, "topics": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}),
            lambda r: r.error_code)
        if resp.error_code != 0:
            raise AdminError(resp.error_code, resp.error_message)
        return {(t.topic_name, p.partition_index): (p.error_code, p.error_message)
                for t in resp.responses for p in t.partitions}

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]
                                   ) -> dict[str, tuple[int, str | None]]:
        """(error code, message) per topic; AdminError for a group-level error."""
        body = {"group_id": group_id, "topics": [{"topic_name": t} for t in topics]}
        resp = self._at_coordinator(group_id, lambda _, conn: self._call(conn, DELETE_SHARE_OFFSETS, 0, body),
                                    lambda r: r.error_code)
        if resp.error_code != 0:
            raise AdminError(resp.error_code, resp.error_message)
        return {t.topic_name: (t.error_code, t.error_message) for t in resp.responses}

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, tuple[int, str | None]]:
        out: dict[str, tuple[int, str | None]] = {}
        for gid in group_ids:
            resp = self._at_coordinator(gid, lambda _, conn, g=gid: self._call(conn, DELETE_GROUPS, 0,
                                                                                {"groups_names": [g]}),
                                        lambda r: r.results[0].error_code)
            for r in resp.results:
                out[r.group_id] = (r.error_code, r.get("error_message"))
        return out

    def topic_id(self, topic: str) -> uuid.UUID | None:
        _, found = self.metadata([topic])
        return found[topic].topic_id if topic in found else None


# ---------------------------------------------------------------------- transactions


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass
class TransactionDescription:
    transactional_id: str
    coordinator_id: int
    error_code: int = 0
    error_message: str | None = None
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1  # -1: no transaction in progress
    topic_partitions: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: no marker written for this producer yet
    current_txn_start_offset: int  # -1: no open transaction


@dataclass
class PartitionProducers:
    error_code: int = 0
    error_message: str | None = None
    producers: list[ProducerState] = field(default_factory=list)


@dataclass(frozen=True)
class AbortSpec:
    """Kafka's AbortTransactionSpec: which producer's transaction to end with an ABORT marker on one partition."""
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


class TransactionAdmin(AdminClient):
    """The calls of Kafka's Admin that kafka-transactions.sh uses."""

    def __init__(self, bootstrap_servers: str, *, security: ClientSecurity | None = None, timeout_s: float = 30.0,
                 client_id: str = "shoal-transactions") -> None:
        super().__init__(bootstrap_servers, security=security, timeout_s=timeout_s, client_id=client_id)

    def list_transactions(self, *, states: Sequence[str] = (), producer_ids: Iterable[int] = (),
                          duration_ms: int = -1) -> dict[int, list[TransactionListing]]:
        """broker id -> the transactions its coordinator knows (ListTransactions on every broker)."""
        nodes, _ = self.metadata([])
        out: dict[int, list[TransactionListing]] = {}
        body = {"state_filters": list(states), "producer_id_filters": list(producer_ids),
                "duration_filter": duration_ms}
        for node in nodes.values():
            conn = self.node_conn(node)
            version = conn.version(LIST_TRANSACTIONS, 0, 1 if duration_ms >= 0 else 0)
            code, resp = self._until_not_loading(lambda n=node, v=version: self._list_once(self.node_conn(n), v, body))
            if code != 0:
                raise AdminError(code, f"ListTransactions on broker {node.node_id}: {error_name(code)}")
            out[node.node_id] = [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                                 for t in resp.transaction_states]
        return out

    @staticmethod
    def _list_once(conn: BrokerConnection, version: int, body: dict) -> tuple[int, Any]:
        resp = conn.call(LIST_TRANSACTIONS, version, body)
        return resp.error_code, resp

    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription]:
        """DescribeTransactions on each transactional id's coordinator; errors are values per id."""
        out: dict[str, TransactionDescription] = {}
        for tid in dict.fromkeys(transactional_ids):
            _, out[tid] = self._until_not_loading(lambda t=tid: self._describe_once(t))
        return out

    def _describe_once(self, tid: str) -> tuple[int, TransactionDescription]:
        try:
            node = self.coordinator(tid, TRANSACTION)
        except AdminError as e:
            return e.code, TransactionDescription(tid, -1, e.code, str(e))
        resp = self._call(self.node_conn(node), DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
        s = resp.transaction_states[0]
        if s.error_code != 0:
            return s.error_code, TransactionDescription(tid, node.node_id, s.error_code, None)
        partitions = sorted((t.topic, p) for t in s.topics for p in t.partitions)
        return 0, TransactionDescription(tid, node.node_id, 0, None, s.transaction_state, s.producer_id,
                                         s.producer_epoch, s.transaction_timeout_ms, s.transaction_start_time_ms,
                                         partitions)

    def describe_producers(self, partitions: Iterable[TopicPartition], broker_id: int | None = None
                           ) -> dict[TopicPartition, PartitionProducers]:
        """The active producers of each partition, from its leader or, with `broker_id`, from that broker. Asked
        again while a broker does not answer (a leader stopped, its successor not elected yet)."""
        wanted = sorted(set(partitions))
        return self._until_not_loading(lambda: (0, self._describe_producers(wanted, broker_id)))[1]

    def _describe_producers(self, wanted: list[TopicPartition], broker_id: int | None
                            ) -> dict[TopicPartition, PartitionProducers]:
        out: dict[TopicPartition, PartitionProducers] = {}
        if broker_id is not None:
            nodes, _ = self.metadata([])
            if broker_id not in nodes:
                raise AdminError(int(ErrorCode.BROKER_NOT_AVAILABLE), f"broker {broker_id} is not in the cluster")
            grouped: dict[int, dict[str, list[int]]] = {}
            for topic, p in wanted:
                grouped.setdefault(broker_id, {}).setdefault(topic, []).append(p)
        else:
            nodes, grouped = self.by_leader(wanted)
        for leader, parts in grouped.items():
            if leader not in nodes:
                for t, ps in parts.items():
                    for p in ps:
                        out[(t, p)] = PartitionProducers(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            resp = self._call(self.node_conn(nodes[leader]), DESCRIBE_PRODUCERS, 0, {"topics": [
                {"name": t, "partition_indexes": ps} for t, ps in parts.items()]})
            for t in resp.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = PartitionProducers(p.error_code, p.error_message, [
                        ProducerState(a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                                      a.coordinator_epoch, a.current_txn_start_offset)
                        for a in p.active_producers])
        return out

    def force_terminate_transaction(self, transactional_id: str, timeout_ms: int = 30_000) -> None:
        """Kafka's Admin.forceTerminateTransaction (its fenceProducers): an InitProducerId of the transactional id,
        which bumps its epoch, fencing the producer, and aborts its ongoing transaction. Retried while the
        coordinator is loading, moving or still ending a transaction; AdminError for any other error."""
        retriable = (*_COORDINATOR_RETRIABLE, ErrorCode.CONCURRENT_TRANSACTIONS)
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                conn = self.node_conn(self.coordinator(transactional_id, TRANSACTION))
                resp = self._call(conn, INIT_PRODUCER_ID, 4, {
                    "transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms,
                    "producer_id": -1, "producer_epoch": -1})
                code = resp.error_code
            except AdminError as e:
                code = e.code
            except ConnectionLost:  # the coordinator's broker does not answer: look it up again (a cluster)
                if time.monotonic() >= deadline:
                    raise
                time.sleep(_RETRY_BACKOFF_S)
                continue
            if code == 0:
                return
            if code not in retriable or time.monotonic() >= deadline:
                raise AdminError(code)
            time.sleep(_RETRY_BACKOFF_S)

    def abort_transaction(self, spec: AbortSpec) -> None:
        """Kafka's Admin.abortTransaction: a WriteTxnMarkers ABORT for the producer on the partition's leader
        (asked again while the leader moves). AdminError when the leader refuses it."""
        def abort() -> tuple[int, None]:
            self._abort_transaction(spec)
            return 0, None

        self._until_not_loading(abort)

    def _abort_transaction(self, spec: AbortSpec) -> None:
        nodes, grouped = self.by_leader([(spec.topic, spec.partition)])
        (leader,) = grouped
        if leader not in nodes:
            raise AdminError(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                             f"{spec.topic}-{spec.partition} does not exist or has no leader")
        conn = self.node_conn(nodes[leader])
        resp = self._call(conn, WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": spec.producer_id, "producer_epoch": spec.producer_epoch, "transaction_result": False,
            "coordinator_epoch": spec.coordinator_epoch, "transaction_version": 0,
            "topics": [{"name": spec.topic, "partition_indexes": [spec.partition]}]}]})
        code = resp.markers[0].topics[0].partitions[0].error_code
        if code != 0:
            raise AdminError(code)
