"""The broker settings of streams groups that no group config overrides (the others are read per group
through the group configs, `GroupConfig.streams_*`)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.components import ComponentConfig, setting


@dataclass(frozen=True)
class StreamsConfig(ComponentConfig):
    max_size: int = setting("group.streams.max.size")
