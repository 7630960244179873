"""The broker's feature versions (KIP-584), as ApiVersions v3+ advertises them, what they switch on, and
UpdateFeatures (FeatureControl).

Kafka finalizes features in the KRaft metadata log (`kafka-storage format --feature`, UpdateFeatures). Here the
finalized levels come from static configs (`transaction.version`) and the components that are enabled
(`group.coordinator.rebalance.protocols`, `group.share.enable`), and an UpdateFeatures change of
transaction.version is a FeatureLevelRecord in the metadata journal, which wins over the config from then on:

- transaction.version (0-2): 2 is KIP-890 part 2 (the epoch bumped by every EndTxn, partitions added by their
  leaders on Produce v12 and TxnOffsetCommit v5). Below 2 the TV2 request versions (Produce v12, EndTxn v5,
  AddPartitionsToTxn v5, TxnOffsetCommit v5) are not served, so no client speaks TV2 to a TV1 broker;
- group.version (0-1): 1 is the consumer rebalance protocol (KIP-848);
- share.version (0-1): 1 is share groups (KIP-932);
- streams.version (0-1): 1 is streams groups (KIP-1071), with `streams` in group.coordinator.rebalance.protocols;
- metadata.version and kraft.version: Kafka 4.0's ranges and a new cluster's levels (4.0-IV3; kraft.version 0, a
  static quorum), reported only: nothing in Shoal depends on them.

As Kafka's ApiVersionsResponse, a finalized level 0 is left out, and so are, below ApiVersions v4, supported
features whose minimum is 0 (older clients cannot parse them, KAFKA-17492).

UpdateFeatures validates as Kafka's FeatureControlManager (unknown upgrade type, a level below 0 or outside the
supported range, an upgrade type that does not match the direction: INVALID_UPDATE_VERSION "Invalid update
version N for feature F. ..."). Only transaction.version changes at run time: the served versions of the TV2
APIs and the transaction coordinator's level follow at once. The others are fixed while running and any other
level is refused with INVALID_UPDATE_VERSION: group.version and share.version follow the components enabled by
configs, metadata.version and kraft.version (a static one-node quorum) are reported only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.config.components import ComponentConfig, ConfigSource, setting
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.config import BrokerConfig
    from broker.router import Router

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"
METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"

# Kafka 4.0's MetadataVersion: MINIMUM_VERSION 3.3-IV3 (7) to LATEST_PRODUCTION 4.0-IV3 (25).
METADATA_VERSION_RANGE = (7, 25)
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: METADATA_VERSION_RANGE,
    KRAFT_VERSION: (0, 1),
    TRANSACTION_VERSION: (0, 2),
    GROUP_VERSION: (0, 1),
    SHARE_VERSION: (0, 1),
    STREAMS_VERSION: (0, 1),
}

# The highest version of each API that transaction.version 2 introduces, served below TV2 (api key -> max).
PRODUCE, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 0, 24, 26, 28
BELOW_TV2_MAX_VERSIONS: dict[int, int] = {PRODUCE: 11, ADD_PARTITIONS_TO_TXN: 4, END_TXN: 4, TXN_OFFSET_COMMIT: 4}


@dataclass(frozen=True)
class Features:
    finalized: Mapping[str, int]
    # Kafka's is the metadata log offset of the last feature change; here the broker's start time (ms), which
    # grows from one start to the next, so a client keeping its connection sees a level changed by a restart.
    epoch: int
    supported: Mapping[str, tuple[int, int]] = field(default_factory=lambda: dict(SUPPORTED))

    def level(self, name: str) -> int:
        return self.finalized.get(name, 0)

    @property
    def transaction_version(self) -> int:
        return self.level(TRANSACTION_VERSION)

    def version_caps(self) -> dict[int, int]:
        """Max versions to serve below the schemas' (api key -> max): the TV2 versions while TV2 is not
        finalized."""
        return {} if self.transaction_version >= 2 else dict(BELOW_TV2_MAX_VERSIONS)

    def api_versions_fields(self, api_version: int) -> dict:
        """SupportedFeatures, FinalizedFeaturesEpoch and FinalizedFeatures of an ApiVersions v3+ response."""
        supported = [{"name": n, "min_version": lo, "max_version": hi} for n, (lo, hi) in self.supported.items()
                     if api_version >= 4 or lo > 0]
        finalized = [{"name": n, "min_version_level": v, "max_version_level": v}
                     for n, v in self.finalized.items() if v > 0]
        return {"supported_features": supported, "finalized_features_epoch": self.epoch,
                "finalized_features": finalized}


@dataclass(frozen=True)
class FeatureConfig(ComponentConfig):
    """The broker settings the finalized features follow (and the group coordinator's protocols)."""

    transaction_version: int = setting("transaction.version")
    partition_verification_enable: bool = setting("transaction.partition.verification.enable")
    rebalance_protocols: tuple[str, ...] = setting("group.coordinator.rebalance.protocols")
    share_enable: bool = setting("group.share.enable")

    @property
    def consumer_groups_enabled(self) -> bool:
        """KIP-848 consumer groups are served (group.version 1)."""
        return "consumer" in self.rebalance_protocols

    @property
    def streams_groups_enabled(self) -> bool:
        """KIP-1071 streams groups are served (streams.version 1)."""
        return "streams" in self.rebalance_protocols

    @property
    def share_groups_enabled(self) -> bool:
        """KIP-932 share groups are served (share.version 1)."""
        return self.share_enable


def finalized_transaction_version(config: ConfigSource, journaled: int | None = None) -> int:
    """`transaction.version` (the level UpdateFeatures journaled, else the config), but at most 1 without
    partition verification: TV2 clients rely on the produce path's verification to add their partitions (Kafka's
    leaders do it in the same step)."""
    settings = FeatureConfig.from_config(config)
    tv = settings.transaction_version if journaled is None else journaled
    return tv if settings.partition_verification_enable else min(tv, 1)


def broker_features(config: ConfigSource, epoch: int, levels: Mapping[str, int] | None = None) -> Features:
    tv = finalized_transaction_version(config, (levels or {}).get(TRANSACTION_VERSION))
    settings = FeatureConfig.from_config(config)
    return Features(finalized={
        METADATA_VERSION: METADATA_VERSION_RANGE[1],
        KRAFT_VERSION: 0,
        TRANSACTION_VERSION: tv,
        GROUP_VERSION: 1 if settings.consumer_groups_enabled else 0,
        SHARE_VERSION: 1 if settings.share_groups_enabled else 0,
        STREAMS_VERSION: 1 if settings.streams_groups_enabled else 0,
    }, epoch=epoch)


# --- UpdateFeatures ---------------------------------------------------------------------------------------------
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
FEATURE_LEVEL_RECORD = 12
# Features fixed while running, and what sets them.
FIXED = {GROUP_VERSION: "group.coordinator.rebalance.protocols", SHARE_VERSION: "group.share.enable",
         STREAMS_VERSION: "group.coordinator.rebalance.protocols",
         METADATA_VERSION: "this Shoal version", KRAFT_VERSION: "a static one-node quorum"}
FAILED_PREFIX = "The update failed for all features since the following feature had an error: "


def check_update(features: Features, node_id: int, name: str, level: int, upgrade_type: int, *,
                 verification_enabled: bool) -> str | None:
    """Why Kafka's FeatureControlManager (with Shoal's fixed features) refuses this update, or None."""
    def invalid(reason: str) -> str:
        return f"Invalid update version {level} for feature {name}. {reason}"

    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return invalid("The controller does not support the given upgrade type.")
    if level < 0:
        return invalid("A feature version cannot be less than 0.")
    lo, hi = features.supported.get(name, (0, 0))
    if name not in features.supported or not lo <= level <= hi:
        what = f"Local controller {node_id}"
        return invalid(f"{what} does not support this feature." if hi == 0 else
                       f"{what} only supports versions {lo}-{hi}")
    current = features.level(name)
    if level < current and upgrade_type == UPGRADE:
        return invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe "
                       "or unsafe downgrade.")
    if level > current and upgrade_type != UPGRADE:
        return invalid("Can't downgrade to a newer version.")
    if name == KRAFT_VERSION and level < current:
        return invalid("Can't downgrade the version of this feature.")
    if name in FIXED and level != current:
        return invalid(f"Shoal cannot change it while running: it follows {FIXED[name]}.")
    if name == TRANSACTION_VERSION and level >= 2 and not verification_enabled:
        return invalid("transaction.version 2 needs transaction.partition.verification.enable.")
    return None


class FeatureControl:
    """The finalized features and their changes (Kafka's FeatureControlManager for one node): UpdateFeatures
    journals FeatureLevelRecords, then applies them: ApiVersions' finalized levels and epoch, the TV2 API
    versions the router serves, and whoever follows transaction.version (the transaction coordinator)."""

    def __init__(self, config: BrokerConfig, topics: TopicManager, router: Router, node_id: int) -> None:
        self._config = config
        self._topics = topics
        self._router = router
        self._node_id = node_id
        self.features = broker_features(config, epoch=int(time.time() * 1000), levels=topics.registry.feature_levels)
        self._tv_followers: list[Callable[[int], None]] = []

    def follow_transaction_version(self, fn: Callable[[int], None]) -> None:
        """`fn(level)` now and whenever the finalized transaction.version changes."""
        self._tv_followers.append(fn)
        fn(self.features.transaction_version)

    async def update(self, updates: Mapping[str, tuple[int, int]], *, validate_only: bool) -> tuple[ErrorCode, str | None]:
        """Apply `updates` (name -> (level, upgrade type)) all or none, as Kafka's controller."""
        settings = FeatureConfig.from_config(self._config)
        for name, (level, upgrade_type) in updates.items():
            reason = check_update(self.features, self._node_id, name, level, upgrade_type,
                                  verification_enabled=settings.partition_verification_enable)
            if reason is not None:
                return ErrorCode.INVALID_UPDATE_VERSION, FAILED_PREFIX + reason
        changes = {name: level for name, (level, _) in updates.items() if level != self.features.level(name)}
        if validate_only or not changes:
            return ErrorCode.NONE, None
        await self._topics.commit_records(
            [(FEATURE_LEVEL_RECORD, {"name": name, "feature_level": level}) for name, level in changes.items()],
            then=self._apply)
        return ErrorCode.NONE, None

    def _apply(self) -> None:
        # the journal's levels are applied (TopicRegistry.apply); the epoch grows with every change
        previous = self.features
        levels = self._topics.registry.feature_levels
        self.features = broker_features(self._config, epoch=max(previous.epoch + 1, int(time.time() * 1000)),
                                        levels=levels)
        caps = self.features.version_caps()
        for api_key in BELOW_TV2_MAX_VERSIONS:
            if self._router.version_range(api_key) is not None:
                self._router.set_max_version(api_key, caps.get(api_key))
        if self.features.transaction_version != previous.transaction_version:
            for fn in self._tv_followers:
                fn(self.features.transaction_version)
