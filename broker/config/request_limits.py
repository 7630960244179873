"""Limits on what one request may ask for, read by the handlers (Kafka's ServerConfigs; defaults from the
table)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.components import ComponentConfig, setting


@dataclass(frozen=True)
class RequestLimitsConfig(ComponentConfig):
    # the most bytes a Fetch or ShareFetch returns, whatever its MaxBytes asks
    fetch_max_bytes: int = setting("fetch.max.bytes")
    # the most partitions one DescribeTopicPartitions response holds
    max_request_partition_size_limit: int = setting("max.request.partition.size.limit")
