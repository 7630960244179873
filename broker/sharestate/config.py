"""Share coordinator settings, under Kafka's names and with Kafka's defaults (ShareCoordinatorConfig)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.config.broker_defs import BROKER_CONFIGS

NUM_PARTITIONS = "share.coordinator.state.topic.num.partitions"
SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT = "share.coordinator.snapshot.update.records.per.snapshot"


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    state_topic_num_partitions: int = BROKER_CONFIGS[NUM_PARTITIONS].default
    # ShareUpdate records written for a share-partition before the next write is a full ShareSnapshot.
    snapshot_update_records_per_snapshot: int = BROKER_CONFIGS[SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT].default

    def __post_init__(self) -> None:
        if self.state_topic_num_partitions < 1:
            raise ValueError(f"{NUM_PARTITIONS} must be at least 1")
        # Kafka's range is [0, 500]; 0 makes every write a snapshot.
        if not 0 <= self.snapshot_update_records_per_snapshot <= 500:
            raise ValueError(f"{SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT} must be in [0, 500]")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | Callable[[str], Any]) -> ShareCoordinatorConfig:
        """Build from Kafka-named properties: a mapping (values may be strings, as read from a properties
        file) or a getter such as the broker config's `get` (KeyError for an unset key)."""
        d = cls()

        def get(name: str, default: int) -> int:
            try:
                value = props(name) if callable(props) else props[name]
            except KeyError:
                return default
            return default if value is None else int(value)

        return cls(
            state_topic_num_partitions=get(NUM_PARTITIONS, d.state_topic_num_partitions),
            snapshot_update_records_per_snapshot=get(SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT,
                                                     d.snapshot_update_records_per_snapshot),
        )
