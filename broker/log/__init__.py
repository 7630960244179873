"""Partition logs on Kafka's on-disk layout: segments (.log/.index/.timeindex), append, read, recovery, retention,
and group-commit durability. See partition_log.PartitionLog and log_manager.LogManager."""

from broker.log.config import LogConfig
from broker.log.flusher import GroupCommitFlusher
from broker.log.log_manager import LogManager
from broker.log.partition_log import AppendInfo, OffsetOutOfRangeError, PartitionLog, ReadResult

__all__ = ["AppendInfo", "GroupCommitFlusher", "LogConfig", "LogManager", "OffsetOutOfRangeError", "PartitionLog",
           "ReadResult"]
