"""ListOffsets (api key 2): earliest, latest, max-timestamp and by-timestamp lookups."""

from __future__ import annotations

import structlog

from broker.context import RequestContext
from broker.log.dir_failure import KafkaStorageError
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

LIST_OFFSETS = 2
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
# The special timestamps each version may use (a client only sends what its negotiated version allows).
_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}

log = structlog.get_logger(__name__)


def lookup(plog, timestamp: int, version: int) -> tuple[ErrorCode, int, int]:
    """(error, timestamp, offset) for one partition. A log whose directory is offline answers
    KAFKA_STORAGE_ERROR whatever the timestamp, as Kafka's ReplicaManager.getPartitionOrException does; so does
    a read that fails on the way (Kafka turns a log's IOException into KafkaStorageException)."""
    if plog.failures.offline:
        return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1
    try:
        return _lookup(plog, timestamp, version)
    except (OSError, KafkaStorageError) as err:
        log.error("list offsets read failed", log=str(plog.directory), error=repr(err))
        return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1


def _lookup(plog, timestamp: int, version: int) -> tuple[ErrorCode, int, int]:
    if timestamp < 0 and version < _MIN_VERSION.get(timestamp, 0):
        return ErrorCode.UNSUPPORTED_VERSION, -1, -1
    if timestamp == LATEST:
        return ErrorCode.NONE, -1, plog.high_watermark
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return ErrorCode.NONE, -1, plog.log_start_offset
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return ErrorCode.NONE, -1, -1  # nothing is ever tiered
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
    elif timestamp >= 0:
        found = plog.offset_for_timestamp(timestamp)
    else:
        return ErrorCode.INVALID_REQUEST, -1, -1
    if found is None:
        return ErrorCode.NONE, -1, -1
    offset, ts = found
    return ErrorCode.NONE, ts, offset


async def handle_list_offsets(ctx: RequestContext, req) -> dict:
    topics = ctx.broker.topics
    version = ctx.api_version
    out = []
    for topic in req.topics:
        info = topics.registry.get(topic.name)
        allowed = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        partitions = []
        for part in topic.partitions:
            if not allowed:
                code, ts, offset = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1
            elif info is None or not 0 <= part.partition_index < info.num_partitions:
                code, ts, offset = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
            else:
                code, ts, offset = lookup(topics.log(info.name, part.partition_index), part.timestamp, version)
            partitions.append(
                {
                    "partition_index": part.partition_index,
                    "error_code": int(code),
                    "timestamp": ts,
                    "offset": offset,
                    "leader_epoch": 0 if code == ErrorCode.NONE else -1,
                }
            )
        out.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": out}


HANDLERS = {LIST_OFFSETS: handle_list_offsets}
