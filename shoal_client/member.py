"""A synchronous share-group member (KIP-932) on Shoal's own protocol package.

    member = ShareGroupMember("127.0.0.1:9092", "my-group", ["events"])
    member.start()                                   # join (ShareGroupHeartbeat), heartbeat thread
    result = member.fetch(max_records=10_000, max_bytes=8 << 20, max_wait_ms=500)
    for a in result.acquired:                        # raw record-batch bytes + acquired offset ranges
        ...
    member.acknowledge(acknowledgements(result.acquired, ACCEPT))  # {a.ack_key: [(first, last, ACCEPT)]}
    member.close()                                   # final ShareFetch (releases what is held), leave the group

Unlike a per-record consumer it never decodes records: a fetch returns each partition's raw record batches
(whole batches overlapping the acquired ranges) and the acquired ranges with their delivery counts, and
acknowledgements are whole ranges (ShareFetch/ShareAcknowledge v2). Whoever needs records decodes the bytes
(shoal_spark does it on Spark executors, into Arrow).

On one Shoal broker every role is the same process. On a Kafka cluster they are spread, and the member does what
Kafka's KafkaShareConsumer does (its ShareConsumeRequestManager):

- Membership: FindCoordinator (asked of any broker known) finds the group coordinator, wherever it is; then
  ShareGroupHeartbeat from a background thread at the interval the coordinator asks for; the assignment comes
  from the heartbeats. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost connection: find it again.
- Fetching: each assigned partition is fetched from its leader (shoal_client.cluster: Metadata, and the leaders
  that NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH answers name), with one share session per broker, opened
  with an empty epoch-0 ShareFetch so that every later request (with acknowledgements) can carry an epoch >= 1.
  A partition whose leader moved is forgotten in the old broker's session and fetched from the new leader.
- Acknowledging: records are acknowledged to the broker that acquired them (`Acquired.node`; acknowledgements
  keyed by `Acquired.ack_key`, an AckTarget naming that broker). Only that broker's share-partition holds their
  locks; a new leader starts from the share-group state the old one wrote and delivers what it held again.
- A broken connection loses that broker's session: the broker releases what it held (delivered again, possibly
  to another member) and `FetchResult.session_lost` says so. Records of a lost session can no longer be
  acknowledged (`still_held(acquired)` says whether they can).

Acknowledgements that cannot be delivered are reported per key with the error Kafka's share consumer completes
them with (what its acknowledgement commit callback receives):

- NOT_LEADER_OR_FOLLOWER: the broker that acquired them is no longer the partition's leader (not sent; or the
  broker's own answer when it is asked anyway);
- NETWORK_EXCEPTION: the broker's share session is gone (connection lost, SHARE_SESSION_NOT_FOUND or
  INVALID_SHARE_SESSION_EPOCH) while it is still the leader, or the broker left the cluster metadata;
- INVALID_RECORD_STATE: the broker's answer left the partition out; REQUEST_TIMED_OUT: `acknowledge()` retried a
  retriable partition error (e.g. COORDINATOR_NOT_AVAILABLE while the share coordinator moves) until the request
  timeout; any other partition error as the broker answered it.

Thread safety: fetch/acknowledge/end_offsets/close may be called from several threads (one lock serializes the
share-session requests, whose epochs must arrive in order); the heartbeat thread has its own connection.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.errors import ErrorCode
from shoal_client.cluster import ClusterMetadata
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
RETRY_BACKOFF_S, RETRY_BACKOFF_MAX_S = 0.1, 1.0  # Kafka's retry.backoff.ms and retry.backoff.max.ms defaults

_SESSION_GONE = {ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH}
_REJOIN = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH}
_COORDINATOR_MOVED = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
_LEADER_MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH}
_REFRESH_METADATA = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                     ErrorCode.LEADER_NOT_AVAILABLE}
# Partition errors of a ShareAcknowledge that Kafka's consumer sends again (its RetriableExceptions, less those it
# handles by updating its metadata), until the request's deadline.
_RETRIABLE_ACK = {ErrorCode[name] for name in (
    "CORRUPT_MESSAGE", "REQUEST_TIMED_OUT", "REPLICA_NOT_AVAILABLE", "NETWORK_EXCEPTION",
    "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NOT_CONTROLLER", "CONCURRENT_TRANSACTIONS", "KAFKA_STORAGE_ERROR",
    "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE", "UNSTABLE_OFFSET_COMMIT", "THROTTLING_QUOTA_EXCEEDED",
    "INCONSISTENT_TOPIC_ID", "LEADER_NOT_AVAILABLE")}


class ShareGroupError(RuntimeError):
    """The group refused this member for good (e.g. GROUP_MAX_SIZE_REACHED, an invalid group id)."""

    def __init__(self, code: int, message: str | None) -> None:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        super().__init__(f"share group error {name}: {message or ''}".rstrip(": "))
        self.code = code


class CoordinatorUnavailable(ConnectionLost):
    """A broker answered, but the group's coordinator is not available yet (being elected or loading) or did not
    answer: worth asking again soon."""


class TopicIdPartition(NamedTuple):
    topic_id: uuid.UUID
    partition: int


class AckTarget(NamedTuple):
    """An acknowledgement's key: the partition and the broker whose share session acquired the records (Kafka's
    consumer keeps the same pair, NodeAcknowledgements)."""

    topic_id: uuid.UUID
    partition: int
    node: int

    @property
    def tp(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)


# A TopicIdPartition key goes to the broker this member last acquired the partition from (its leader if none).
AckKey = TopicIdPartition | AckTarget
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
    node: int = -1  # the broker that acquired them (-1: not known)
    session: int = 0  # which of this member's share sessions on that broker (ShareGroupMember.still_held)

    @property
    def key(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)

    @property
    def ack_key(self) -> AckKey:
        """The key to acknowledge these records with: to the broker that acquired them."""
        return AckTarget(self.topic_id, self.partition, self.node) if self.node >= 0 else self.key

    @property
    def count(self) -> int:
        """Offsets acquired (gaps included: an offset without a record is acquired and acknowledged too)."""
        return sum(last - first + 1 for first, last, _ in self.ranges)


def acknowledgements(acquired: Iterable[Acquired], kind: int) -> dict[AckKey, list[tuple[int, int, int]]]:
    """Acknowledge everything in `acquired` with one type (ACCEPT, RELEASE, REJECT or RENEW)."""
    out: dict[AckKey, list[tuple[int, int, int]]] = {}
    for a in acquired:
        out.setdefault(a.ack_key, []).extend((first, last, kind) for first, last, _ in a.ranges)
    return out


@dataclass(slots=True)
class FetchResult:
    acquired: list[Acquired] = field(default_factory=list)
    ack_errors: dict[AckKey, int] = field(default_factory=dict)  # acknowledgements that failed, by key
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
    serial: int  # tells this session from the broker's earlier and later ones (Acquired.session)
    epoch: int = 0  # next epoch to send; 0 = not opened yet
    partitions: set[TopicIdPartition] = field(default_factory=set)  # in the session on the broker


def _tp_of(key: AckKey) -> TopicIdPartition:
    return key.tp if isinstance(key, AckTarget) else key


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
        self.lock_timeout_ms: int | None = None  # AcquisitionLockTimeoutMs a leader last reported

        self._lock = threading.RLock()  # share sessions, node connections, metadata
        self._hb_lock = threading.Lock()  # coordinator connection, membership state
        self._metadata = ClusterMetadata()
        self._conns: dict[int, BrokerConnection] = {}
        self._sessions: dict[int, _Session] = {}
        self._serials = itertools.count(1)
        self._acquired_from: dict[TopicIdPartition, int] = {}  # the broker each partition was last acquired from
        self._coordinator: BrokerConnection | None = None
        self._assignment: frozenset[TopicIdPartition] = frozenset()
        self._assigned = threading.Event()  # set once the assignment is non-empty
        self._fatal: ShareGroupError | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Share sessions lost so far: what a lost session held was released by the broker (and may be delivered
        # to another member), so records acquired in it can no longer be acknowledged.
        self.sessions_lost = 0
        # Partition-level errors the brokers answered (ShareFetch and ShareAcknowledge), by code: how often a
        # leader moved under this member, for example.
        self.errors_seen: Counter[int] = Counter()

    # ------------------------------------------------------------------ lifecycle
    def start(self, *, heartbeat_thread: bool = True) -> ShareGroupMember:
        """Join the group (first heartbeat, synchronously: errors surface here) and start heartbeating. While the
        brokers answer that the group has no coordinator yet (being elected, loading), tries again until the
        request timeout; ConnectionLost at once if no broker is reachable."""
        deadline = time.monotonic() + self.timeout_s
        backoff = RETRY_BACKOFF_S
        while True:
            with self._hb_lock:
                try:
                    again = self._heartbeat_once()
                    if again:  # told to rejoin at once
                        self._heartbeat_once()
                    break
                except CoordinatorUnavailable as err:
                    self._drop_coordinator()
                    if time.monotonic() + backoff >= deadline:
                        raise
                    log.info("share group %s: no coordinator yet (%s); trying again", self.group_id, err)
            time.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
        self._raise_fatal()
        if heartbeat_thread and self._thread is None:
            self._thread = threading.Thread(target=self._heartbeat_loop, name=f"shoal-heartbeat-{self.group_id}",
                                            daemon=True)
            self._thread.start()
        return self

    def close(self, acknowledgements: Mapping[AckKey, AckRanges] | None = None, *,
              leave: bool = True) -> dict[AckKey, int]:
        """End the share sessions (final ShareFetch, carrying `acknowledgements`: each broker releases anything
        else this member holds there at once) and leave the group. Returns the acknowledgements that failed."""
        errors: dict[AckKey, int] = {}
        if self._closed:
            return errors
        self._closed = True
        self._stop.set()
        self._wake.set()
        with self._lock:
            routed = self._route(acknowledgements or {}, errors, piggyback=False)
            for node, session in list(self._sessions.items()):
                node_acks = routed.pop(node, {})
                if session.epoch == 0 or session.conn.closed:
                    continue  # never opened, or gone with its connection (the broker released what it held)
                try:
                    resp = session.conn.call(SHARE_FETCH, 2, self._fetch_body(
                        FINAL_SESSION_EPOCH, [], _by_partition(node_acks), [], 0, 0, 0))
                except ConnectionLost:
                    errors.update(dict.fromkeys(node_acks, ErrorCode.NETWORK_EXCEPTION))
                    continue
                if resp.error_code != ErrorCode.NONE:
                    errors.update(dict.fromkeys(node_acks, ErrorCode.NETWORK_EXCEPTION
                                                if resp.error_code in _SESSION_GONE else resp.error_code))
                    continue
                self._collect_ack_errors(resp, node_acks, errors)
            self._sessions.clear()
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
        if self._thread is not None:
            self._thread.join(self.timeout_s)
        with self._hb_lock:
            if leave and self.member_epoch > 0:
                with contextlib.suppress(ConnectionLost):
                    coordinator = self._coordinator or self._find_coordinator()
                    coordinator.call(SHARE_GROUP_HEARTBEAT, 1, {
                        "group_id": self.group_id, "member_id": self.member_id, "member_epoch": LEAVE_EPOCH,
                        "rack_id": None, "subscribed_topic_names": None})
            self._drop_coordinator()
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
        backoff = RETRY_BACKOFF_S
        while not self._stop.is_set():
            self._wake.wait(self._next_heartbeat_s() if backoff <= RETRY_BACKOFF_S else backoff)
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._hb_lock:
                try:
                    again = self._heartbeat_once()
                    backoff = RETRY_BACKOFF_S
                except ConnectionLost as err:
                    log.info("share group %s: heartbeat failed, finding the coordinator again: %s", self.group_id,
                             err)
                    self._drop_coordinator()
                    backoff = min(max(backoff * 2, 2 * RETRY_BACKOFF_S), 2.0)
                    continue
                except Exception as err:  # never let the thread die silently
                    log.warning("share group %s: heartbeat error: %r", self.group_id, err)
                    backoff = min(max(backoff * 2, 2 * RETRY_BACKOFF_S), 2.0)
                    continue
            if self._fatal is not None:
                return
            if again:
                self._wake.set()

    def _heartbeat_once(self) -> bool:
        """One ShareGroupHeartbeat (caller holds _hb_lock). True if another should follow at once."""
        coordinator = self._coordinator or self._find_coordinator()
        joining = self.member_epoch == 0
        try:
            resp = coordinator.call(SHARE_GROUP_HEARTBEAT, 1, {
                "group_id": self.group_id, "member_id": self.member_id, "member_epoch": self.member_epoch,
                "rack_id": self.rack if joining else None,
                "subscribed_topic_names": self.topics if joining else None})
        except ConnectionLost as err:
            raise CoordinatorUnavailable(f"group coordinator {coordinator.host}:{coordinator.port}: {err}") from err
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
            raise CoordinatorUnavailable(f"group coordinator unavailable ({ErrorCode(code).name})")
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
        """FindCoordinator, asked of the brokers the metadata lists and then of the bootstrap servers (any broker
        answers it), and a connection to the coordinator it names."""
        last: Exception | None = None
        candidates = list(dict.fromkeys([*list(self._metadata.nodes.values()), *self.bootstrap]))
        for host, port in candidates:
            try:
                with BrokerConnection(host, port, client_id=self.client_id, timeout_s=self.timeout_s) as conn:
                    version = conn.version(FIND_COORDINATOR, 4)
                    resp = conn.call(FIND_COORDINATOR, version, {"key_type": 0, "coordinator_keys": [self.group_id]})
            except ConnectionLost as err:
                last = err
                continue
            c = resp.coordinators[0]
            if c.error_code in _COORDINATOR_MOVED:
                raise CoordinatorUnavailable(f"FindCoordinator for {self.group_id!r}: {ErrorCode(c.error_code).name}")
            if c.error_code != ErrorCode.NONE:
                raise ConnectionLost(f"FindCoordinator for {self.group_id!r}: {ErrorCode(c.error_code).name}")
            try:
                conn = BrokerConnection(c.host, c.port, client_id=self.client_id, timeout_s=self.timeout_s)
            except ConnectionLost as err:  # named, but gone since (its successor is not elected yet)
                raise CoordinatorUnavailable(f"group coordinator {c.host}:{c.port}: {err}") from err
            conn.version(SHARE_GROUP_HEARTBEAT, 1)
            self._coordinator = conn
            return conn
        raise ConnectionLost(f"no broker reachable: {last}")

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
        if node not in self._metadata.nodes:
            self._refresh_metadata()
        if node not in self._metadata.nodes:
            raise ConnectionLost(f"broker {node} is not in the cluster metadata")
        host, port = self._metadata.nodes[node]
        conn = BrokerConnection(host, port, client_id=self.client_id, timeout_s=self.timeout_s)
        conn.version(SHARE_FETCH, 2)
        conn.version(SHARE_ACKNOWLEDGE, 2)
        self._conns[node] = conn
        return conn

    def _metadata_candidates(self) -> list[tuple[BrokerConnection | None, tuple[str, int]]]:
        """Where to ask for Metadata: open connections first, then the other brokers known, then the bootstrap
        servers."""
        out: list[tuple[BrokerConnection | None, tuple[str, int]]] = []
        seen: set[tuple[str, int]] = set()
        for conn in self._conns.values():
            if not conn.closed and (conn.host, conn.port) not in seen:
                out.append((conn, (conn.host, conn.port)))
                seen.add((conn.host, conn.port))
        for address in [*self._metadata.nodes.values(), *self.bootstrap]:
            if address not in seen:
                out.append((None, address))
                seen.add(address)
        return out

    def _refresh_metadata(self) -> bool:
        """Topics, partition leaders and brokers from Metadata, asked of the first broker that answers; kept as
        they were (False) if none does."""
        self._metadata.attempted()
        resp = None
        for conn, (host, port) in self._metadata_candidates():
            own = conn is None
            try:
                if own:
                    conn = BrokerConnection(host, port, client_id=self.client_id, timeout_s=self.timeout_s)
                assert conn is not None
                version = conn.version(METADATA, 10)
                resp = conn.call(METADATA, version, {"topics": [{"name": t} for t in self.topics],
                                                     "allow_auto_topic_creation": False})
                break
            except ConnectionLost as err:
                log.info("share group %s: metadata from %s:%s failed: %s", self.group_id, host, port, err)
            finally:
                if own and conn is not None:
                    conn.close()
        if resp is None:
            return False
        self._metadata.update(resp)
        for node in [n for n in self._sessions if n not in self._metadata.nodes]:
            # A broker that left the cluster: its session is over (Kafka's consumer drops its session handler).
            log.info("share group %s: broker %s left the cluster metadata; its share session ends", self.group_id,
                     node)
            self._lose_session(node)
        return True

    def _refresh_if_due(self) -> None:
        if self._metadata.needs_refresh():
            self._refresh_metadata()

    def _leader(self, tp: TopicIdPartition) -> int | None:
        if not self._metadata.knows(*tp):
            self._refresh_if_due()
        return self._metadata.leader(*tp)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self._metadata.topics_by_id.get(topic_id)
        return topic.name if topic else None

    def leader(self, tp: TopicIdPartition) -> int | None:
        """The partition's leader as this member knows it (None: not known)."""
        with self._lock:
            return self._metadata.leader(*tp)

    def _session(self, node: int) -> _Session:
        """The open share session on `node` (opened with an empty epoch-0 ShareFetch if needed)."""
        session = self._sessions.get(node)
        if session is not None and session.conn.closed:
            self._lose_session(node)
            session = None
        if session is None:
            session = _Session(self._connection(node), next(self._serials))
            self._sessions[node] = session
        if session.epoch == 0:
            resp = session.conn.call(SHARE_FETCH, 2, self._fetch_body(0, [], {}, [], 0, 0, 0))
            if resp.error_code in _SESSION_GONE or resp.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED:
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
            if session.epoch > 0:
                self.sessions_lost += 1
            session.conn.close()
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close()
        self._metadata.mark_stale()  # the broker may be gone: is it still the leader?

    def still_held(self, acquired: Acquired) -> bool:
        """Whether the share session that acquired these records is still open (else the broker released them,
        and acknowledging them fails). True for records whose broker is not known."""
        if acquired.node < 0:
            return True
        # no lock: a fetch may hold it for its long poll; one dict lookup is atomic
        session = self._sessions.get(acquired.node)
        return session is not None and session.serial == acquired.session and not session.conn.closed

    # ------------------------------------------------------------------ acknowledgement routing
    def _route(self, acks: Mapping[AckKey, AckRanges], errors: dict[AckKey, int], *, piggyback: bool
               ) -> dict[int, dict[AckKey, AckRanges]]:
        """Acknowledgements by the broker to send them to, as Kafka's consumer routes them: to the broker that
        acquired the records, over its share session. Those that cannot be sent go to `errors`. `piggyback`:
        they would ride on a ShareFetch, which Kafka's consumer sends only to the partition's current leader."""
        by_node: dict[int, dict[AckKey, AckRanges]] = {}
        for key, ranges in acks.items():
            if not ranges:
                continue
            tp = _tp_of(key)
            node = key.node if isinstance(key, AckTarget) else self._acquired_from.get(tp)
            if node is None:
                node = self._leader(tp)
                if node is None:
                    errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if not self._metadata.knows(*tp) \
                        else ErrorCode.NETWORK_EXCEPTION
                    continue
            session = self._sessions.get(node)
            open_session = session is not None and session.epoch > 0 and not session.conn.closed
            if open_session and (not piggyback or self._metadata.leader(*tp) == node):
                by_node.setdefault(node, {})[key] = ranges
            else:
                errors[key] = self._cannot_be_sent(node, tp)
        return by_node

    def _cannot_be_sent(self, node: int, tp: TopicIdPartition) -> int:
        """Kafka's acknowledgementsCannotBeSentError: the leader moved elsewhere, or the broker is unreachable."""
        leader = self._metadata.leader(*tp)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if leader is not None and leader != node \
            else ErrorCode.NETWORK_EXCEPTION

    def _partition_error(self, topic_id: uuid.UUID, p, endpoints) -> None:
        """What a partition's error says about the cluster (ShareFetch and ShareAcknowledge answers)."""
        code = p.error_code
        if code == ErrorCode.NONE:
            return
        self.errors_seen[code] += 1
        if code in _LEADER_MOVED:
            leader = p.current_leader
            self._metadata.leader_moved(topic_id, p.partition_index, leader.leader_id, leader.leader_epoch,
                                        endpoints)
        elif code in _REFRESH_METADATA:
            self._metadata.forget_leader(topic_id, p.partition_index)

    # ------------------------------------------------------------------ fetch and acknowledge
    def _fetch_body(self, epoch: int, fetch: Sequence[TopicIdPartition],
                    acks: Mapping[TopicIdPartition, AckRanges], forget: Sequence[TopicIdPartition],
                    max_wait_ms: int, max_records: int, max_bytes: int, acquire_mode: str | None = None) -> dict:
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

    def _collect_ack_errors(self, resp, sent: Mapping[AckKey, AckRanges], errors: dict[AckKey, int]) -> None:
        """The acknowledge errors of a ShareFetch answer, for the keys `sent`; a partition the answer left out
        failed as Kafka's consumer fails it (INVALID_RECORD_STATE)."""
        codes: dict[TopicIdPartition, int] = {}
        for t in resp.responses:
            for p in t.partitions:
                codes[TopicIdPartition(t.topic_id, p.partition_index)] = p.acknowledge_error_code
        for key in sent:
            code = codes.get(_tp_of(key), ErrorCode.INVALID_RECORD_STATE)
            if code:
                errors[key] = code

    def fetch(self, *, max_records: int, max_bytes: int, max_wait_ms: int,
              acknowledgements: Mapping[AckKey, AckRanges] | None = None,
              partitions: Iterable[TopicIdPartition] | None = None, acquire_mode: str | None = None
              ) -> FetchResult:
        """Acquire at most `max_records` offsets (whole batches past it in batch_optimized mode) and about
        `max_bytes` (at least one batch) from the assigned partitions (or only `partitions` of them), after
        applying `acknowledgements`. Waits up to `max_wait_ms` for records; with no assignment yet, waits for one
        up to the same time. `acquire_mode` overrides the member's for this fetch.

        Each broker leading assigned partitions gets one ShareFetch on its share session, one after the other; the
        last of them waits for records (long poll) if none came from the others."""
        if acquire_mode is not None:
            _checked_mode(acquire_mode)
        self._raise_fatal()
        result = FetchResult()
        deadline = time.monotonic() + max_wait_ms / 1000
        if not self._assignment and not acknowledgements:
            self._assigned.wait(max_wait_ms / 1000)
            self._raise_fatal()
        polled = False
        with self._lock:
            self._refresh_if_due()
            assigned = self._assignment
            wanted = assigned if partitions is None else assigned & frozenset(partitions)
            plan: dict[int, list[TopicIdPartition]] = {}
            for tp in sorted(wanted):
                node = self._leader(tp)
                if node is None:
                    self._metadata.mark_stale()  # no leader known (an election under way): ask again
                else:
                    plan.setdefault(node, []).append(tp)
            routed = self._route(acknowledgements or {}, result.ack_errors, piggyback=True)
            nodes = sorted(set(plan) | set(routed) | {n for n, s in self._sessions.items() if s.partitions})
            poll_node = max((n for n in nodes if plan.get(n)), default=None)
            for node in nodes:
                remaining_records = max_records - result.count
                remaining_bytes = max_bytes - result.bytes
                fetch = plan.get(node, []) if remaining_records > 0 and remaining_bytes > 0 else []
                node_acks = routed.get(node, {})
                acked = {_tp_of(k) for k in node_acks}
                session = self._sessions.get(node)
                # a partition acknowledged here stays in the session for this request (forgotten with the next)
                forget = sorted(session.partitions - set(plan.get(node, [])) - acked) if session is not None else []
                if not fetch and not node_acks and not forget:
                    continue
                wait = max(0, int((deadline - time.monotonic()) * 1000)) \
                    if node == poll_node and not result.acquired else 0
                polled = polled or wait > 0
                self._fetch_from(node, fetch, node_acks, forget, wait, max(remaining_records, 0),
                                 max(remaining_bytes, 1), result, acquire_mode)
        if not result.acquired and (result.session_lost or not polled):
            # A broker is unreachable, or no leader is known: do not spin, wait as a long poll would have.
            self._stop.wait(max(0.0, min(deadline - time.monotonic(), 1.0)))
        return result

    def _fetch_from(self, node: int, fetch: list[TopicIdPartition], acks: dict[AckKey, AckRanges],
                    forget: list[TopicIdPartition], wait_ms: int, max_records: int, max_bytes: int,
                    result: FetchResult, acquire_mode: str | None = None) -> None:
        had_session = node in self._sessions and self._sessions[node].epoch > 0
        try:
            session = self._session(node)
            body = self._fetch_body(self._next_epoch(session), fetch if max_records > 0 else [], _by_partition(acks),
                                    forget, wait_ms, max_records, max_bytes, acquire_mode)
            # records stay slices of the received frame (no copy): the Spark source ships them as they are
            resp = session.conn.call(SHARE_FETCH, 2, body, timeout_s=self.timeout_s + wait_ms / 1000, views=True)
        except ConnectionLost as err:
            log.info("share group %s: share session on broker %s lost: %s", self.group_id, node, err)
            self._lose_session(node)
            # Kafka's consumer completes them with the DisconnectException, which has no code of its own:
            # NETWORK_EXCEPTION is the code for "the server disconnected before a response was received".
            result.ack_errors.update(dict.fromkeys(acks, ErrorCode.NETWORK_EXCEPTION))
            result.session_lost = result.session_lost or had_session
            return
        if resp.error_code in _SESSION_GONE or resp.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED:
            self._lose_session(node)
            self._wake.set()  # the member may have been fenced: heartbeat now
            result.ack_errors.update(dict.fromkeys(acks, ErrorCode.NETWORK_EXCEPTION))
            result.session_lost = True
            return
        if resp.error_code == ErrorCode.UNKNOWN_TOPIC_ID:  # a topic deleted (or recreated) meanwhile
            self._metadata.mark_stale()
            result.ack_errors.update(dict.fromkeys(acks, resp.error_code))
            return
        if resp.error_code != ErrorCode.NONE:
            raise ShareGroupError(resp.error_code, resp.error_message)
        self.lock_timeout_ms = resp.acquisition_lock_timeout_ms
        session.partitions = (session.partitions | set(fetch)) - set(forget)
        self._collect_ack_errors(resp, acks, result.ack_errors)
        for t in resp.responses:
            topic = self._metadata.topics_by_id.get(t.topic_id)
            for p in t.partitions:
                self._partition_error(t.topic_id, p, resp.node_endpoints)
                tp = TopicIdPartition(t.topic_id, p.partition_index)
                if p.acquired_records:
                    ranges = [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records]
                    result.acquired.append(Acquired(topic.name if topic else str(t.topic_id), t.topic_id,
                                                    p.partition_index, p.records or b"", ranges, node,
                                                    session.serial))
                    self._acquired_from[tp] = node

    def acknowledge(self, acknowledgements: Mapping[AckKey, AckRanges], *, renew: bool = False
                    ) -> dict[AckKey, int]:
        """ShareAcknowledge whole ranges, each to the broker that acquired them; `renew=True` (IsRenewAck, type
        RENEW) extends the locks instead. Partitions answered with a retriable error are sent again, as Kafka's
        commitSync does, until the request timeout. Returns the acknowledgements that failed, with the error."""
        errors: dict[AckKey, int] = {}
        pending: Mapping[AckKey, AckRanges] = acknowledgements
        deadline = time.monotonic() + self.timeout_s
        backoff = RETRY_BACKOFF_S
        while pending:
            retry: dict[AckKey, AckRanges] = {}
            with self._lock:
                for node, acks in self._route(pending, errors, piggyback=False).items():
                    self._acknowledge_on(node, acks, renew, errors, retry)
            if not retry:
                break
            if time.monotonic() + backoff >= deadline or self._stop.is_set():
                errors.update(dict.fromkeys(retry, ErrorCode.REQUEST_TIMED_OUT))
                break
            time.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
            pending = retry
        return errors

    def _acknowledge_on(self, node: int, acks: dict[AckKey, AckRanges], renew: bool, errors: dict[AckKey, int],
                        retry: dict[AckKey, AckRanges]) -> None:
        session = self._sessions[node]
        body = {"group_id": self.group_id, "member_id": self.member_id,
                "share_session_epoch": self._next_epoch(session), "is_renew_ack": renew,
                "topics": _ack_topics(_by_partition(acks))}
        try:
            resp = session.conn.call(SHARE_ACKNOWLEDGE, 2, body)
        except ConnectionLost as err:
            log.info("share group %s: share session on broker %s lost: %s", self.group_id, node, err)
            self._lose_session(node)
            errors.update(dict.fromkeys(acks, ErrorCode.NETWORK_EXCEPTION))
            return
        if resp.error_code in _SESSION_GONE:
            # Kafka's consumer tries again on a new session, which cannot carry acknowledgements (epoch 0).
            self._lose_session(node)
            self._wake.set()
            errors.update({key: self._cannot_be_sent(node, _tp_of(key)) for key in acks})
            return
        if resp.error_code != ErrorCode.NONE:
            errors.update(dict.fromkeys(acks, resp.error_code))
            return
        if resp.acquisition_lock_timeout_ms > 0:
            self.lock_timeout_ms = resp.acquisition_lock_timeout_ms
        codes: dict[TopicIdPartition, int] = {}
        for t in resp.responses:
            for p in t.partitions:
                codes[TopicIdPartition(t.topic_id, p.partition_index)] = p.error_code
                self._partition_error(t.topic_id, p, resp.node_endpoints)
        for key, ranges in acks.items():
            code = codes.get(_tp_of(key), ErrorCode.INVALID_RECORD_STATE)
            if code in _RETRIABLE_ACK:
                retry[key] = ranges
            elif code != ErrorCode.NONE:
                errors[key] = code

    def end_offsets(self) -> dict[TopicIdPartition, int]:
        """Log end offset of every partition of the subscribed topics (ListOffsets, latest, on each leader).
        Partitions whose leader does not answer are asked again after a metadata refresh, until the request
        timeout; ConnectionLost if no broker answers or some partition has no answer by then."""
        deadline = time.monotonic() + self.timeout_s
        out: dict[TopicIdPartition, int] = {}
        with self._lock:
            if not self._refresh_metadata():
                raise ConnectionLost("no broker answered the Metadata request")
            pending = {TopicIdPartition(t.topic_id, p) for t in self._metadata.topics_by_name.values()
                       for p in t.partitions}
            while True:
                by_node: dict[int, list[TopicIdPartition]] = {}
                for tp in pending:
                    leader = self._metadata.leader(*tp)
                    if leader is not None:
                        by_node.setdefault(leader, []).append(tp)
                for node, parts in by_node.items():
                    try:
                        got = self._list_offsets(node, parts)
                    except ConnectionLost as err:
                        log.info("share group %s: ListOffsets on broker %s failed: %s", self.group_id, node, err)
                        self._conns.pop(node, None)
                        continue
                    out.update(got)
                    pending -= got.keys()
                if not pending:
                    return out
                if time.monotonic() >= deadline:
                    raise ConnectionLost(f"no leader answered ListOffsets for {len(pending)} partitions")
                time.sleep(RETRY_BACKOFF_S * 2)
                self._refresh_metadata()

    def _list_offsets(self, node: int, parts: list[TopicIdPartition]) -> dict[TopicIdPartition, int]:
        conn = self._connection(node)
        version = conn.version(LIST_OFFSETS, 1)
        topics: dict[str, list[dict]] = {}
        for tp in parts:
            topics.setdefault(self._metadata.topics_by_id[tp.topic_id].name, []).append(
                {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": -1})
        resp = conn.call(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": name, "partitions": ps} for name, ps in topics.items()]})
        out: dict[TopicIdPartition, int] = {}
        for t in resp.topics:
            topic = self._metadata.topics_by_name[t.name]
            for p in t.partitions:
                if p.error_code == ErrorCode.NONE:
                    out[TopicIdPartition(topic.topic_id, p.partition_index)] = p.offset
                else:
                    self._metadata.forget_leader(topic.topic_id, p.partition_index)
        return out


def _checked_mode(acquire_mode: str) -> str:
    if acquire_mode not in ACQUIRE_MODES:
        raise ValueError(f"acquire_mode must be one of {sorted(ACQUIRE_MODES)}, not {acquire_mode!r}")
    return acquire_mode


def _by_partition(acks: Mapping[AckKey, AckRanges]) -> dict[TopicIdPartition, list[tuple[int, int, int]]]:
    """Acknowledgements for one broker, merged per partition (keys with and without the broker may name the same
    partition)."""
    out: dict[TopicIdPartition, list[tuple[int, int, int]]] = {}
    for key, ranges in acks.items():
        out.setdefault(_tp_of(key), []).extend(ranges)
    return out


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
