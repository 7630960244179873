"""ListOffsets (api key 2): earliest, latest, max-timestamp and by-timestamp lookups.

As Kafka's Partition.fetchOffsetForTimestamp, the last fetchable offset bounds the answers: LATEST is the LSO for
IsolationLevel 1 (read_committed), the high watermark otherwise, and a timestamp lookup (or MAX_TIMESTAMP) that
lands at or past it answers no offset. No offset (-1) comes with leader epoch -1, as Kafka's TimestampAndOffset
without an epoch; LATEST_TIERED (v9) and EARLIEST_PENDING_UPLOAD (v11, KIP-1023) answer no offset: a broker without
tiered storage has nothing uploaded nor pending upload (UnifiedLog.fetchOffsetByTimestamp when remote log storage
is off).

CurrentLeaderEpoch (v4+, KIP-320) is checked as Kafka's Partition.fetchOffsetForTimestamp does, once the
partition is found online: older than ours (0) is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, -1 no check.

Before the partition is looked up, as Kafka 4.4 answers: a partition the request names more than once is answered
once, INVALID_REQUEST; a negative timestamp that is not a special value the version knows, UNSUPPORTED_VERSION.
MAX_TIMESTAMP looks at every segment kept, as Kafka's: after DeleteRecords it may name a record below the log start
offset."""

from __future__ import annotations

import structlog

from broker.cluster.manager import TopicManager
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.log.dir_failure import KafkaStorageError
from broker.pacing import Pacer
from broker.replica_manager import ReplicaManager, current_epoch_error
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

LIST_OFFSETS = 2
READ_COMMITTED = 1
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
# The special timestamps each version may use (a client only sends what its negotiated version allows).
_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}
_SPECIAL = frozenset({LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD})

log = structlog.get_logger(__name__)


def lookup(plog, timestamp: int, version: int, last_fetchable: int | None = None) -> tuple[ErrorCode, int, int]:
    """(error, timestamp, offset) for one partition. A log whose directory is offline answers
    KAFKA_STORAGE_ERROR whatever the timestamp, as Kafka's ReplicaManager.getPartitionOrException does; so does
    a read that fails on the way (Kafka turns a log's IOException into KafkaStorageException)."""
    if plog.failures.offline:
        return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1
    try:
        code, ts, offset = _lookup(plog, timestamp, version, last_fetchable)
        if code == ErrorCode.NONE and timestamp not in (LATEST, EARLIEST, EARLIEST_LOCAL) and last_fetchable is not None \
                and offset >= last_fetchable:
            return ErrorCode.NONE, -1, -1
        return code, ts, offset
    except (OSError, KafkaStorageError) as err:
        log.error("list offsets read failed", log=str(plog.directory), error=repr(err))
        return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1


def _supported(timestamp: int, version: int) -> bool:
    """A timestamp this version may ask for: any time, or one of the special values it knows (Kafka answers
    others UNSUPPORTED_VERSION)."""
    return timestamp >= 0 or (timestamp in _SPECIAL and version >= _MIN_VERSION.get(timestamp, 0))


def _lookup(plog, timestamp: int, version: int, last_fetchable: int | None) -> tuple[ErrorCode, int, int]:
    if not _supported(timestamp, version):
        return ErrorCode.UNSUPPORTED_VERSION, -1, -1
    if timestamp == LATEST:
        return ErrorCode.NONE, -1, plog.high_watermark if last_fetchable is None else last_fetchable
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return ErrorCode.NONE, -1, plog.log_start_offset
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return ErrorCode.NONE, -1, -1  # nothing is ever tiered
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
    elif timestamp >= 0:
        found = plog.offset_for_timestamp(timestamp)
    else:
        return ErrorCode.UNSUPPORTED_VERSION, -1, -1
    if found is None:
        return ErrorCode.NONE, -1, -1
    offset, ts = found
    return ErrorCode.NONE, ts, offset


class ListOffsetsApis(Apis):
    """ListOffsets, from the partition logs through the replica manager."""

    def __init__(self, topics: TopicManager, replicas: ReplicaManager) -> None:
        self._topics = topics
        self._replicas = replicas

    async def list_offsets(self, ctx: RequestContext, req: Request) -> Response:
        topics = self._topics
        replicas = self._replicas
        version = ctx.api_version
        read_committed = req.get("isolation_level", 0) == READ_COMMITTED
        if read_committed:  # the LSO needs the partitions' transaction state: loaded off the loop
            await replicas.ensure_loaded(
                (info.name, p.partition_index) for t in req.topics if (info := topics.registry.get(t.name)) is not None
                for p in t.partitions if 0 <= p.partition_index < info.num_partitions)
        allowed: dict[str, bool] = {}
        for topic in req.topics:
            if topic.name not in allowed:
                allowed[topic.name] = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        # Kafka answers the topics it may not describe entry by entry, and keys the others by partition: a
        # partition named twice (in one topic entry or two) is answered once, INVALID_REQUEST, and the topic
        # is one topic
        named: dict[tuple[str, int], int] = {}
        for topic in req.topics:
            for part in topic.partitions:
                key = (topic.name, part.partition_index)
                named[key] = named.get(key, 0) + 1
        out: dict[str | tuple[int, str], list[dict]] = {}  # by name, or (position, name) for a refused topic
        pacer = Pacer()
        for n, topic in enumerate(req.topics):
            info = topics.registry.get(topic.name)
            partitions = out.setdefault(topic.name if allowed[topic.name] else (n, topic.name), [])
            for part in topic.partitions:
                # thousands of partitions (each a log lookup): yield to the loop between them
                await pacer.pace()
                if not allowed[topic.name]:
                    code, ts, offset = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1
                elif (times := named.pop((topic.name, part.partition_index), None)) is None:
                    continue  # answered already (a duplicate)
                elif times > 1:
                    code, ts, offset = ErrorCode.INVALID_REQUEST, -1, -1
                elif req.get("isolation_level", 0) not in (0, READ_COMMITTED):
                    code, ts, offset = ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1  # Kafka cannot read it: an exception
                elif not _supported(part.timestamp, version):
                    code, ts, offset = ErrorCode.UNSUPPORTED_VERSION, -1, -1
                elif info is None or not 0 <= part.partition_index < info.num_partitions or (
                        plog := topics.find_log(info.name, part.partition_index)) is None:
                    # (no log: the topic was deleted while this request yielded to the loop)
                    code, ts, offset = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
                else:
                    epoch_error = current_epoch_error(part.current_leader_epoch)  # -1 (no check) before v4
                    if epoch_error != ErrorCode.NONE and not plog.failures.offline:
                        code, ts, offset = epoch_error, -1, -1
                    else:
                        if read_committed and not plog.failures.offline:
                            last_fetchable = replicas.last_stable_offset(info.name, part.partition_index)
                        else:
                            last_fetchable = plog.high_watermark
                        code, ts, offset = lookup(plog, part.timestamp, version, last_fetchable)
                partitions.append(
                    {
                        "partition_index": part.partition_index,
                        "error_code": int(code),
                        "timestamp": ts,
                        "offset": offset,
                        "leader_epoch": 0 if code == ErrorCode.NONE and offset >= 0 else -1,
                    }
                )
        out_topics = [{"name": key if isinstance(key, str) else key[1], "partitions": parts} for key, parts in out.items()]
        return {"throttle_time_ms": 0, "topics": out_topics}

    HANDLERS = {LIST_OFFSETS: list_offsets}
