"""DescribeLogDirs (35) and AlterReplicaLogDirs (34) for the one log directory (`log.dirs`).

As Kafka's KafkaApis and ReplicaManager: DESCRIBE on the cluster to describe (else an empty answer with
CLUSTER_AUTHORIZATION_FAILED, v3+), ALTER on the cluster to move (else every partition refused). A partition's
size is the sum of its segments' `.log` files (Kafka's UnifiedLog.size); with one replica its offset lag is 0
and there is never a future log. Moving a replica to the directory it is in is a no-op success; any other path
is not a configured log directory: LOG_DIR_NOT_FOUND, as Kafka's LogManager.isLogDirOnline answers.
"""

from __future__ import annotations

import asyncio
import os
import shutil

from broker.cluster.manager import TopicManager
from broker.cluster.topics import CLUSTER_METADATA_TOPIC
from broker.config import BrokerConfig
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.log import LogManager
from broker.log.dir_failure import LogDirFailureChannel
from broker.pacing import Pacer
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35
# Kafka refuses to move a partition whose future directory name ("<topic>-<p>.<uuid>-future") exceeds 255 bytes.
FUTURE_DIR_SUFFIX_LENGTH = 1 + 32 + len("-future")
LONG_MAX = 2**63 - 1


def _space(path: str) -> tuple[int, int]:
    usage = shutil.disk_usage(path)
    return usage.total, usage.free  # Kafka's FileStore usable space is what this user may write: statvfs f_bavail


class LogDirApis(Apis):
    """DescribeLogDirs and AlterReplicaLogDirs, over the one log directory."""

    def __init__(self, config: BrokerConfig, log_dir_failures: LogDirFailureChannel, logs: LogManager,
                 topics: TopicManager) -> None:
        self._config = config
        self._log_dir_failures = log_dir_failures
        self._logs = logs
        self._topics = topics

    def _log_dir_path(self) -> str:
        """The log directory as Kafka names it: its absolute path."""
        return os.path.abspath(str(self._config.data_dir))

    async def describe_log_dirs(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "results": []}
        path = self._log_dir_path()
        if self._log_dir_failures.offline:
            return {"throttle_time_ms": 0, "error_code": 0,
                    "results": [{"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": path, "topics": []}]}
        wanted: set[tuple[str, int]] | None = None  # None: every partition
        if req.topics is not None:
            wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
        by_topic: dict[str, list[dict]] = {}
        pacer = Pacer()
        for (topic, partition), plog in sorted(self._logs.logs()):
            await pacer.pace()  # tens of thousands of partitions: yield to the loop between them
            if topic == CLUSTER_METADATA_TOPIC or (wanted is not None and (topic, partition) not in wanted):
                continue
            by_topic.setdefault(topic, []).append({"partition_index": partition, "partition_size": plog.size_bytes,
                                                   "offset_lag": 0, "is_future_key": False})
        try:
            total, usable = await asyncio.to_thread(_space, path)  # statvfs: a system call, kept off the loop
        except OSError:
            return {"throttle_time_ms": 0, "error_code": 0,
                    "results": [{"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": path, "topics": []}]}
        result = {"error_code": 0, "log_dir": path, "total_bytes": min(total, LONG_MAX),
                  "usable_bytes": min(usable, LONG_MAX), "is_cordoned": False,
                  "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}
        return {"throttle_time_ms": 0, "error_code": 0, "results": [result]}

    async def alter_replica_log_dirs(self, ctx: RequestContext, req: Request) -> Response:
        # Kafka builds a map partition -> destination: a partition named twice gets the last destination.
        moves: dict[tuple[str, int], str] = {}
        for entry in req.dirs:
            for topic in entry.topics:
                for partition in topic.partitions:
                    moves[(topic.name, partition)] = entry.path
        allowed = ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
        path = self._log_dir_path()
        results: dict[str, list[dict]] = {}
        for (topic, partition), destination in moves.items():
            if not allowed:
                code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            else:
                code = self._move_error(topic, partition, destination, path)
            results.setdefault(topic, []).append({"partition_index": partition, "error_code": int(code)})
        return {"throttle_time_ms": 0,
                "results": [{"topic_name": name, "partitions": parts} for name, parts in results.items()]}

    def _move_error(self, topic: str, partition: int, destination: str, path: str) -> ErrorCode:
        # Kafka's order (ReplicaManager.alterReplicaLogDirs): name length, the directory, then the replica.
        if len(f"{topic}-{partition}".encode()) + FUTURE_DIR_SUFFIX_LENGTH > 255:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        if destination != path:  # Kafka compares with each log dir's absolute path
            return ErrorCode.LOG_DIR_NOT_FOUND
        if self._log_dir_failures.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        info = self._topics.registry.get(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            # Kafka's ReplicaManager: a partition the metadata does not have is UNKNOWN_TOPIC_OR_PARTITION;
            # REPLICA_NOT_AVAILABLE is for one that exists on other brokers only, which one broker never has.
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NONE  # already in the destination directory

    HANDLERS = {ALTER_REPLICA_LOG_DIRS: alter_replica_log_dirs, DESCRIBE_LOG_DIRS: describe_log_dirs}
