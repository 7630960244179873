"""Share coordinator settings, under Kafka's names (ShareCoordinatorConfig); defaults from the broker's
table."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.components import ComponentConfig, setting


@dataclass(frozen=True)
class ShareCoordinatorConfig(ComponentConfig):
    state_topic_num_partitions: int = setting("share.coordinator.state.topic.num.partitions")
    # ShareUpdate records written for a share-partition before the next write is a full ShareSnapshot.
    snapshot_update_records_per_snapshot: int = setting(
        "share.coordinator.snapshot.update.records.per.snapshot")
    state_topic_prune_interval_ms: int = setting("share.coordinator.state.topic.prune.interval.ms")
    # how long a written __share_group_state record may wait for its fsync (0: answered once fsynced)
    state_fsync_interval_ms: int = setting("shoal.share.state.fsync.interval.ms")

    def __post_init__(self) -> None:
        # Kafka's ranges (0 records per snapshot makes every write a snapshot).
        self.check("state_topic_num_partitions", "snapshot_update_records_per_snapshot")
