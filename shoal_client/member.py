"""A synchronous share-group member (KIP-932) on Shoal's own protocol package.

    member = ShareGroupMember("127.0.0.1:9092", "my-group", ["events"])
    member.start()                                   # join (ShareGroupHeartbeat), heartbeat thread
    result = member.fetch(max_records=10_000, max_bytes=8 << 20, max_wait_ms=500)
    for a in result.acquired:                        # raw record-batch bytes + acquired offset ranges
        ...
    member.acknowledge({a.key: [(first, last, ACCEPT) for first, last, _ in a.ranges] for a in result.acquired})
    member.close()                                   # final ShareFetch (releases what is held), leave the group

Unlike a per-record consumer it never decodes records: a fetch returns each partition's raw record batches
(whole batches overlapping the acquired ranges) and the acquired ranges with their delivery counts, and
acknowledgements are whole ranges (ShareFetch/ShareAcknowledge v2). Whoever needs records decodes the bytes
(shoal_spark does it on Spark executors, into Arrow).

Membership: FindCoordinator, then ShareGroupHeartbeat from a background thread at the interval the coordinator
asks for; the assignment comes from the heartbeats. Partition leaders come from Metadata. One share session per
leader, opened with an empty epoch-0 ShareFetch so that every later request (with acknowledgements) can carry
an epoch >= 1. A broken connection loses the session: the broker releases what this member held (they are
delivered again, possibly to another member) and `FetchResult.session_lost` says so.

Thread safety: fetch/acknowledge/end_offsets/close may be called from several threads (one lock serializes the
share-session requests, whose epochs must arrive in order); the heartbeat thread has its own connection.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.errors import ErrorCode
from shoal_client.connection import BrokerConnection, ConnectionLost, parse_bootstrap

log = logging.getLogger("shoal_client")

FIND_COORDINATOR, METADATA, LIST_OFFSETS = 10, 3, 2
SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79

# Acknowledge types (ShareFetch/ShareAcknowledge AcknowledgeTypes; RENEW needs v2).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
# ShareAcquireMode (ShareFetch v2; a Kafka consumer's share.acquire.mode): whole batches, or MaxRecords as a hard limit
BATCH_OPTIMIZED_MODE, RECORD_LIMIT_MODE = 0, 1
ACQUIRE_MODES = {"batch_optimized": BATCH_OPTIMIZED_MODE, "record_limit": RECORD_LIMIT_MODE}
LEAVE_EPOCH = -1
UNASSIGNED_HEARTBEAT_S = 0.25  # heartbeat interval while the member has no partition (see _next_heartbeat_s)
FINAL_SESSION_EPOCH = -1
INT32_MAX = 2**31 - 1

_SESSION_GONE = {ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH}
_REJOIN = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH}
_COORDINATOR_MOVED = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
_REFRESH_METADATA = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.LEADER_NOT_AVAILABLE}


class ShareGroupError(RuntimeError):
    """The group refused this member for good (e.g. GROUP_MAX_SIZE_REACHED, an invalid group id)."""

    def __init__(self, code: int, message: str | None) -> None:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        super().__init__(f"share group error {name}: {message or ''}".rstrip(": "))
        self.code = code


class TopicIdPartition(NamedTuple):
    topic_id: uuid.UUID
    partition: int


AckRanges = Sequence[tuple[int, int, int]]  # (first offset, last offset, acknowledge type)


@dataclass(slots=True)
class Acquired:
    """What one partition handed this member in one fetch."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    # whole record batches overlapping the ranges (may hold records outside them): a read-only slice of the
    # ShareFetch response it came in (which it keeps alive), or bytes
    records: bytes | memoryview
    ranges: list[tuple[int, int, int]]  # (first offset, last offset, delivery count)

    @property
    def key(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)

    @property
    def count(self) -> int:
        """Offsets acquired (gaps included: an offset without a record is acquired and acknowledged too)."""
        return sum(last - first + 1 for first, last, _ in self.ranges)


def acknowledgements(acquired: Iterable[Acquired], kind: int) -> dict[TopicIdPartition, list[tuple[int, int, int]]]:
    """Acknowledge everything in `acquired` with one type (ACCEPT, RELEASE, REJECT or RENEW)."""
    out: dict[TopicIdPartition, list[tuple[int, int, int]]] = {}
    for a in acquired:
        out.setdefault(a.key, []).extend((first, last, kind) for first, last, _ in a.ranges)
    return out


@dataclass(slots=True)
class FetchResult:
    acquired: list[Acquired] = field(default_factory=list)
    ack_errors: dict[TopicIdPartition, int] = field(default_factory=dict)  # partitions whose acks failed
    session_lost: bool = False  # a share session ended: what it held was released by the broker

    @property
    def bytes(self) -> int:
        return sum(len(a.records) for a in self.acquired)

    @property
    def count(self) -> int:
        return sum(a.count for a in self.acquired)


@dataclass(slots=True)
class _Session:
    conn: BrokerConnection
    epoch: int = 0  # next epoch to send; 0 = not opened yet
    partitions: set[TopicIdPartition] = field(default_factory=set)  # in the session on the broker


@dataclass(frozen=True, slots=True)
class _Topic:
    name: str
    topic_id: uuid.UUID
    leaders: dict[int, int]  # partition -> leader node id


class ShareGroupMember:
    def __init__(self, bootstrap_servers: str, group_id: str, topics: Iterable[str], *,
                 client_id: str = "shoal-share-member", rack: str | None = None,
                 request_timeout_s: float = 30.0, member_id: str | None = None,
                 acquire_mode: str = "record_limit") -> None:
        """`acquire_mode` as a Kafka consumer's share.acquire.mode: "record_limit" (the default here: a fetch
        acquires at most its max_records, cutting inside a batch if need be, whose bytes are then served again with
        the rest of it) or "batch_optimized" (Kafka's default: whole batches, so a fetch may acquire more than
        max_records, and no batch is served twice)."""
        self.acquire_mode = _checked_mode(acquire_mode)
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.group_id = group_id
        self.topics = sorted(set(topics))
        if not group_id:
            raise ValueError("group id is required")
        if not self.topics:
            raise ValueError("subscribe to at least one topic")
        self.client_id = client_id
        self.rack = rack
        self.timeout_s = request_timeout_s
        self.member_id = member_id or str(uuid.uuid4())
        self.member_epoch = 0
        self.heartbeat_interval_s = 5.0
        self.lock_timeout_ms: int | None = None  # AcquisitionLockTimeoutMs the leader last reported

        self._lock = threading.RLock()  # share sessions, node connections, metadata
        self._hb_lock = threading.Lock()  # coordinator connection, membership state
        self._nodes: dict[int, tuple[str, int]] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._sessions: dict[int, _Session] = {}
        self._topics_by_id: dict[uuid.UUID, _Topic] = {}
        self._topics_by_name: dict[str, _Topic] = {}
        self._coordinator: BrokerConnection | None = None
        self._assignment: frozenset[TopicIdPartition] = frozenset()
        self._assigned = threading.Event()  # set once the assignment is non-empty
        self._fatal: ShareGroupError | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Share sessions lost so far: what a lost session held was released by the broker (and may be delivered
        # to another member), so records acquired before a loss can no longer be acknowledged.
        self.sessions_lost = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self, *, heartbeat_thread: bool = True) -> ShareGroupMember:
        """Join the group (first heartbeat, synchronously: errors surface here) and start heartbeating."""
        with self._hb_lock:
            self._heartbeat_once()
        self._raise_fatal()
        if heartbeat_thread and self._thread is None:
            self._thread = threading.Thread(target=self._heartbeat_loop, name=f"shoal-heartbeat-{self.group_id}",
                                            daemon=True)
            self._thread.start()
        return self

    def close(self, acknowledgements: Mapping[TopicIdPartition, AckRanges] | None = None, *,
              leave: bool = True) -> dict[TopicIdPartition, int]:
        """End the share sessions (final ShareFetch, carrying `acknowledgements`: the broker releases anything
        else this member holds at once) and leave the group. Returns per-partition acknowledgement errors."""
        errors: dict[TopicIdPartition, int] = {}
        if self._closed:
            return errors
        self._closed = True
        self._stop.set()
        self._wake.set()
        with self._lock:
            by_node = self._acks_by_node(acknowledgements or {})
            for node, session in list(self._sessions.items()):
                if session.epoch == 0 and not session.conn.closed and node not in by_node:
                    continue  # never opened
                try:
                    resp = session.conn.call(SHARE_FETCH, 2, self._fetch_body(
                        FINAL_SESSION_EPOCH, [], by_node.pop(node, {}), [], 0, 0, 0))
                    self._collect_ack_errors(resp, errors)
                except ConnectionLost:
                    pass  # the broker ends the session with the connection: same effect
            for acks in by_node.values():  # acks for leaders without a session: cannot be sent
                errors.update({tp: ErrorCode.SHARE_SESSION_NOT_FOUND for tp in acks})
            self._sessions.clear()
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
        if self._thread is not None:
            self._thread.join(self.timeout_s)
        with self._hb_lock:
            if leave and self.member_epoch > 0 and self._coordinator is not None:
                with contextlib.suppress(ConnectionLost):
                    self._coordinator.call(SHARE_GROUP_HEARTBEAT, 1, {
                        "group_id": self.group_id, "member_id": self.member_id, "member_epoch": LEAVE_EPOCH,
                        "rack_id": None, "subscribed_topic_names": None})
            if self._coordinator is not None:
                self._coordinator.close()
                self._coordinator = None
        return errors

    def __enter__(self) -> ShareGroupMember:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ membership
    def assignment(self) -> frozenset[TopicIdPartition]:
        return self._assignment

    def wait_for_assignment(self, timeout_s: float) -> bool:
        return self._assigned.wait(timeout_s)

    def _next_heartbeat_s(self) -> float:
        """The coordinator's interval; sooner while nothing is assigned yet: a new member is answered with an
        empty assignment until its share-partitions are initialized (as Kafka does), and asks again shortly
        rather than a whole interval (5 s by default) later."""
        if not self._assignment:
            return min(self.heartbeat_interval_s, UNASSIGNED_HEARTBEAT_S)
        return self.heartbeat_interval_s

    def _heartbeat_loop(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            self._wake.wait(self._next_heartbeat_s() if backoff <= 0.1 else backoff)
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._hb_lock:
                try:
                    again = self._heartbeat_once()
                    backoff = 0.1
                except ConnectionLost as err:
                    log.info("share group %s: heartbeat failed, reconnecting: %s", self.group_id, err)
                    self._drop_coordinator()
                    backoff = min(max(backoff * 2, 0.2), 2.0)
                    continue
                except Exception as err:  # never let the thread die silently
                    log.warning("share group %s: heartbeat error: %r", self.group_id, err)
                    backoff = min(max(backoff * 2, 0.2), 2.0)
                    continue
            if self._fatal is not None:
                return
            if again:
                self._wake.set()

    def _heartbeat_once(self) -> bool:
        """One ShareGroupHeartbeat (caller holds _hb_lock). True if another should follow at once."""
        coordinator = self._coordinator or self._find_coordinator()
        joining = self.member_epoch == 0
        resp = coordinator.call(SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": self.group_id, "member_id": self.member_id, "member_epoch": self.member_epoch,
            "rack_id": self.rack if joining else None,
            "subscribed_topic_names": self.topics if joining else None})
        code = resp.error_code
        if code == ErrorCode.NONE:
            if resp.member_id:
                self.member_id = resp.member_id
            self.member_epoch = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self.heartbeat_interval_s = resp.heartbeat_interval_ms / 1000
            if resp.assignment is not None:
                self._set_assignment({TopicIdPartition(t.topic_id, p) for t in resp.assignment.topic_partitions
                                      for p in t.partitions})
            return False
        if code in _REJOIN:
            log.info("share group %s: member rejoins after %s", self.group_id, ErrorCode(code).name)
            self.member_epoch = 0
            return True
        if code in _COORDINATOR_MOVED:
            self._drop_coordinator()
            raise ConnectionLost(f"group coordinator unavailable ({ErrorCode(code).name})")
        self._fatal = ShareGroupError(code, resp.error_message)
        self._assigned.set()  # wake waiters so they see the error
        return False

    def _set_assignment(self, assignment: set[TopicIdPartition]) -> None:
        self._assignment = frozenset(assignment)
        if assignment:
            self._assigned.set()
        else:
            self._assigned.clear()

    def _find_coordinator(self) -> BrokerConnection:
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                with BrokerConnection(host, port, client_id=self.client_id, timeout_s=self.timeout_s) as conn:
                    version = conn.version(FIND_COORDINATOR, 4)
                    resp = conn.call(FIND_COORDINATOR, version, {"key_type": 0, "coordinator_keys": [self.group_id]})
            except ConnectionLost as err:
                last = err
                continue
            c = resp.coordinators[0]
            if c.error_code != ErrorCode.NONE:
                raise ConnectionLost(f"FindCoordinator for {self.group_id!r}: {ErrorCode(c.error_code).name}")
            conn = BrokerConnection(c.host, c.port, client_id=self.client_id, timeout_s=self.timeout_s)
            conn.version(SHARE_GROUP_HEARTBEAT, 1)
            self._coordinator = conn
            return conn
        raise ConnectionLost(f"no bootstrap server reachable: {last}")

    def _drop_coordinator(self) -> None:
        if self._coordinator is not None:
            self._coordinator.close()
            self._coordinator = None

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    # ------------------------------------------------------------------ metadata and connections
    def _connection(self, node: int) -> BrokerConnection:
        conn = self._conns.get(node)
        if conn is not None and not conn.closed:
            return conn
        if node not in self._nodes:
            self._refresh_metadata()
        if node not in self._nodes:
            raise ConnectionLost(f"broker {node} is not in the cluster metadata")
        host, port = self._nodes[node]
        conn = BrokerConnection(host, port, client_id=self.client_id, timeout_s=self.timeout_s)
        conn.version(SHARE_FETCH, 2)
        conn.version(SHARE_ACKNOWLEDGE, 2)
        self._conns[node] = conn
        return conn

    def _any_connection(self) -> BrokerConnection:
        for conn in self._conns.values():
            if not conn.closed:
                return conn
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                return BrokerConnection(host, port, client_id=self.client_id, timeout_s=self.timeout_s)
            except ConnectionLost as err:
                last = err
        raise ConnectionLost(f"no bootstrap server reachable: {last}")

    def _refresh_metadata(self) -> bool:
        """Topics, partition leaders and brokers from Metadata; kept as they were (False) if no broker answers."""
        try:
            conn = self._any_connection()
            try:
                version = conn.version(METADATA, 10)
                resp = conn.call(METADATA, version, {"topics": [{"name": t} for t in self.topics],
                                                     "allow_auto_topic_creation": False})
            finally:
                if conn not in self._conns.values():
                    conn.close()
        except ConnectionLost as err:
            log.info("share group %s: metadata refresh failed: %s", self.group_id, err)
            return False
        self._nodes = {b.node_id: (b.host, b.port) for b in resp.brokers}
        by_id, by_name = {}, {}
        for t in resp.topics:
            if t.error_code != ErrorCode.NONE:
                continue
            topic = _Topic(t.name, t.topic_id, {p.partition_index: p.leader_id for p in t.partitions})
            by_id[t.topic_id] = topic
            by_name[t.name] = topic
        self._topics_by_id, self._topics_by_name = by_id, by_name
        return True

    def _leader(self, tp: TopicIdPartition) -> int | None:
        topic = self._topics_by_id.get(tp.topic_id)
        if topic is None or tp.partition not in topic.leaders:
            self._refresh_metadata()
            topic = self._topics_by_id.get(tp.topic_id)
            if topic is None:
                return None
        leader = topic.leaders.get(tp.partition, -1)
        return leader if leader >= 0 else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self._topics_by_id.get(topic_id)
        return topic.name if topic else None

    def _session(self, node: int) -> _Session:
        """The open share session on `node` (opened with an empty epoch-0 ShareFetch if needed)."""
        session = self._sessions.get(node)
        if session is not None and session.conn.closed:
            session = None
        if session is None:
            session = _Session(self._connection(node))
            self._sessions[node] = session
        if session.epoch == 0:
            resp = session.conn.call(SHARE_FETCH, 2, self._fetch_body(0, [], {}, [], 0, 0, 0))
            if resp.error_code in _SESSION_GONE:
                # The broker does not (or no longer, e.g. after a restart) count us as a member: heartbeat now.
                self._wake.set()
                raise ConnectionLost(f"share session refused: {ErrorCode(resp.error_code).name}")
            if resp.error_code != ErrorCode.NONE:
                raise ShareGroupError(resp.error_code, resp.error_message)
            session.epoch = 1
            session.partitions = set()
            self.lock_timeout_ms = resp.acquisition_lock_timeout_ms
        return session

    def _next_epoch(self, session: _Session) -> int:
        epoch = session.epoch
        session.epoch = 1 if epoch >= INT32_MAX else epoch + 1
        return epoch

    def _lose_session(self, node: int) -> None:
        session = self._sessions.pop(node, None)
        if session is not None:
            self.sessions_lost += 1
            session.conn.close()
            self._conns.pop(node, None)

    # ------------------------------------------------------------------ fetch and acknowledge
    def _fetch_body(self, epoch: int, fetch: Sequence[TopicIdPartition], acks: Mapping[TopicIdPartition, AckRanges],
                    forget: Sequence[TopicIdPartition], max_wait_ms: int, max_records: int, max_bytes: int,
                    acquire_mode: str | None = None) -> dict:
        topics: dict[uuid.UUID, dict[int, dict]] = {}
        for tp in fetch:
            topics.setdefault(tp.topic_id, {})[tp.partition] = {"partition_index": tp.partition,
                                                                "acknowledgement_batches": []}
        for tp, ranges in acks.items():
            entry = topics.setdefault(tp.topic_id, {}).setdefault(
                tp.partition, {"partition_index": tp.partition, "acknowledgement_batches": []})
            entry["acknowledgement_batches"] = _ack_batches(ranges)
        gone: dict[uuid.UUID, list[int]] = {}
        for tp in forget:
            gone.setdefault(tp.topic_id, []).append(tp.partition)
        return {"group_id": self.group_id, "member_id": self.member_id, "share_session_epoch": epoch,
                "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes, "max_records": max_records,
                "batch_size": max_records, "share_acquire_mode": ACQUIRE_MODES[acquire_mode or self.acquire_mode],
                "is_renew_ack": False,
                "topics": [{"topic_id": tid, "partitions": list(parts.values())} for tid, parts in topics.items()],
                "forgotten_topics_data": [{"topic_id": tid, "partitions": ps} for tid, ps in gone.items()]}

    def _acks_by_node(self, acks: Mapping[TopicIdPartition, AckRanges]) -> dict[int, dict[TopicIdPartition, AckRanges]]:
        by_node: dict[int, dict[TopicIdPartition, AckRanges]] = {}
        for tp, ranges in acks.items():
            if not ranges:
                continue
            node = self._leader(tp)
            by_node.setdefault(-1 if node is None else node, {})[tp] = ranges
        return by_node

    @staticmethod
    def _collect_ack_errors(resp, errors: dict[TopicIdPartition, int]) -> None:
        for t in resp.responses:
            for p in t.partitions:
                if p.acknowledge_error_code:
                    errors[TopicIdPartition(t.topic_id, p.partition_index)] = p.acknowledge_error_code

    def fetch(self, *, max_records: int, max_bytes: int, max_wait_ms: int,
              acknowledgements: Mapping[TopicIdPartition, AckRanges] | None = None,
              partitions: Iterable[TopicIdPartition] | None = None, acquire_mode: str | None = None
              ) -> FetchResult:
        """Acquire at most `max_records` offsets (whole batches past it in batch_optimized mode) and about
        `max_bytes` (at least one batch) from the assigned partitions (or only `partitions` of them), after
        applying `acknowledgements`. Waits up to `max_wait_ms` for records; with no assignment yet, waits for one
        up to the same time. `acquire_mode` overrides the member's for this fetch."""
        if acquire_mode is not None:
            _checked_mode(acquire_mode)
        self._raise_fatal()
        result = FetchResult()
        deadline = time.monotonic() + max_wait_ms / 1000
        if not self._assignment and not acknowledgements:
            self._assigned.wait(max_wait_ms / 1000)
            self._raise_fatal()
        with self._lock:
            assigned = self._assignment
            wanted = assigned if partitions is None else assigned & frozenset(partitions)
            plan: dict[int, list[TopicIdPartition]] = {}
            for tp in sorted(wanted):
                node = self._leader(tp)
                if node is not None:
                    plan.setdefault(node, []).append(tp)
            acks = self._acks_by_node(acknowledgements or {})
            for tp_acks in acks.pop(-1, {}):
                result.ack_errors[tp_acks] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            nodes = sorted(set(plan) | set(acks) | set(self._sessions))
            for i, node in enumerate(nodes):
                remaining_records = max_records - result.count
                remaining_bytes = max_bytes - result.bytes
                fetch = plan.get(node, []) if remaining_records > 0 and remaining_bytes > 0 else []
                node_acks = acks.get(node, {})
                session = self._sessions.get(node)
                forget = sorted(session.partitions - set(plan.get(node, []))) if session is not None else []
                if not fetch and not node_acks and not forget:
                    continue
                last = i == len(nodes) - 1
                wait = max(0, int((deadline - time.monotonic()) * 1000)) if last and not result.acquired else 0
                self._fetch_from(node, fetch, node_acks, forget, wait, max(remaining_records, 0),
                                 max(remaining_bytes, 1), result, acquire_mode)
        if result.session_lost and not result.acquired:
            # A broker is unreachable: do not spin on reconnects, wait as a long poll would have.
            self._stop.wait(max(0.0, min(deadline - time.monotonic(), 1.0)))
        return result

    def _fetch_from(self, node: int, fetch: list[TopicIdPartition], acks: dict[TopicIdPartition, AckRanges],
                    forget: list[TopicIdPartition], wait_ms: int, max_records: int, max_bytes: int,
                    result: FetchResult, acquire_mode: str | None = None) -> None:
        try:
            session = self._session(node)
            body = self._fetch_body(self._next_epoch(session), fetch if max_records > 0 else [], acks, forget,
                                    wait_ms, max_records, max_bytes, acquire_mode)
            # records stay slices of the received frame (no copy): the Spark source ships them as they are
            resp = session.conn.call(SHARE_FETCH, 2, body, timeout_s=self.timeout_s + wait_ms / 1000, views=True)
        except ConnectionLost as err:
            log.info("share group %s: share session on node %s lost: %s", self.group_id, node, err)
            self._lose_session(node)
            result.ack_errors.update({tp: ErrorCode.SHARE_SESSION_NOT_FOUND for tp in acks})
            result.session_lost = True
            return
        if resp.error_code in _SESSION_GONE:
            self._lose_session(node)
            result.ack_errors.update({tp: resp.error_code for tp in acks})
            result.session_lost = True
            return
        if resp.error_code != ErrorCode.NONE:
            raise ShareGroupError(resp.error_code, resp.error_message)
        self.lock_timeout_ms = resp.acquisition_lock_timeout_ms
        session.partitions = (session.partitions | set(fetch)) - set(forget)
        self._collect_ack_errors(resp, result.ack_errors)
        refresh = False
        for t in resp.responses:
            topic = self._topics_by_id.get(t.topic_id)
            for p in t.partitions:
                if p.error_code in _REFRESH_METADATA:
                    refresh = True
                if p.acquired_records:
                    ranges = [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records]
                    result.acquired.append(Acquired(topic.name if topic else str(t.topic_id), t.topic_id,
                                                    p.partition_index, p.records or b"", ranges))
        if refresh:
            self._refresh_metadata()

    def acknowledge(self, acknowledgements: Mapping[TopicIdPartition, AckRanges], *, renew: bool = False
                    ) -> dict[TopicIdPartition, int]:
        """ShareAcknowledge whole ranges; `renew=True` (IsRenewAck, type RENEW) extends the locks instead.
        Returns the partitions whose acknowledgement failed, with the error code."""
        errors: dict[TopicIdPartition, int] = {}
        with self._lock:
            for node, acks in self._acks_by_node(acknowledgements).items():
                session = self._sessions.get(node)
                if node < 0 or session is None or session.epoch == 0 or session.conn.closed:
                    errors.update({tp: ErrorCode.SHARE_SESSION_NOT_FOUND for tp in acks})
                    continue
                body = {"group_id": self.group_id, "member_id": self.member_id,
                        "share_session_epoch": self._next_epoch(session), "is_renew_ack": renew,
                        "topics": _ack_topics(acks)}
                try:
                    resp = session.conn.call(SHARE_ACKNOWLEDGE, 2, body)
                except ConnectionLost:
                    self._lose_session(node)
                    errors.update({tp: ErrorCode.SHARE_SESSION_NOT_FOUND for tp in acks})
                    continue
                if resp.error_code != ErrorCode.NONE:
                    if resp.error_code in _SESSION_GONE:
                        self._lose_session(node)
                    errors.update({tp: resp.error_code for tp in acks})
                    continue
                if resp.acquisition_lock_timeout_ms > 0:
                    self.lock_timeout_ms = resp.acquisition_lock_timeout_ms
                for t in resp.responses:
                    for p in t.partitions:
                        if p.error_code:
                            errors[TopicIdPartition(t.topic_id, p.partition_index)] = p.error_code
        return errors

    def end_offsets(self) -> dict[TopicIdPartition, int]:
        """Log end offset of every partition of the subscribed topics (ListOffsets, latest)."""
        with self._lock:
            if not self._refresh_metadata():
                raise ConnectionLost("no broker answered the Metadata request")
            out: dict[TopicIdPartition, int] = {}
            by_node: dict[int, list[tuple[_Topic, int]]] = {}
            for topic in self._topics_by_name.values():
                for p, leader in topic.leaders.items():
                    by_node.setdefault(leader, []).append((topic, p))
            for node, parts in by_node.items():
                conn = self._connection(node)
                version = conn.version(LIST_OFFSETS, 1)
                topics: dict[str, list[dict]] = {}
                for topic, p in parts:
                    topics.setdefault(topic.name, []).append(
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1})
                resp = conn.call(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": name, "partitions": ps} for name, ps in topics.items()]})
                for t in resp.topics:
                    topic = self._topics_by_name[t.name]
                    for p in t.partitions:
                        if p.error_code == ErrorCode.NONE:
                            out[TopicIdPartition(topic.topic_id, p.partition_index)] = p.offset
            return out


def _checked_mode(acquire_mode: str) -> str:
    if acquire_mode not in ACQUIRE_MODES:
        raise ValueError(f"acquire_mode must be one of {sorted(ACQUIRE_MODES)}, not {acquire_mode!r}")
    return acquire_mode


def _ack_batches(ranges: AckRanges) -> list[dict]:
    """Sorted acknowledgement batches, adjacent ranges of the same type merged into one."""
    merged: list[list[int]] = []
    for first, last, kind in sorted(ranges):
        if merged and merged[-1][2] == kind and merged[-1][1] + 1 == first:
            merged[-1][1] = last
        else:
            merged.append([first, last, kind])
    return [{"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}
            for first, last, kind in merged]


def _ack_topics(acks: Mapping[TopicIdPartition, AckRanges]) -> list[dict]:
    topics: dict[uuid.UUID, list[dict]] = {}
    for tp, ranges in acks.items():
        topics.setdefault(tp.topic_id, []).append({"partition_index": tp.partition,
                                                   "acknowledgement_batches": _ack_batches(ranges)})
    return [{"topic_id": tid, "partitions": parts} for tid, parts in topics.items()]
