"""The broker settings of streams groups that no group config overrides (the others are read per group
through the group configs, `GroupConfig.streams_*`)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.components import ComponentConfig, setting


@dataclass(frozen=True)
class StreamsConfig(ComponentConfig):
    max_size: int = setting("group.streams.max.size")
    # How often members report their tasks' changelog offsets; the lag under which a task counts as caught up.
    task_offset_interval_ms: int = setting("group.streams.task.offset.interval.ms")
    acceptable_recovery_lag: int = setting("group.streams.acceptable.recovery.lag")
