"""The broker's feature versions (KIP-584), as ApiVersions v3+ advertises them, and what they switch on.

Kafka finalizes features in the KRaft metadata log (`kafka-storage format --feature`, UpdateFeatures); Shoal is a
single broker without a metadata log, so the finalized levels come from static configs (`transaction.version`)
and the components that are enabled (`group.coordinator.rebalance.protocols`, `group.share.enable`):

- transaction.version (0-2): 2 is KIP-890 part 2 (the epoch bumped by every EndTxn, partitions added by their
  leaders on Produce v12 and TxnOffsetCommit v5). Below 2 the TV2 request versions (Produce v12, EndTxn v5,
  AddPartitionsToTxn v5, TxnOffsetCommit v5) are not served, so no client speaks TV2 to a TV1 broker;
- group.version (0-1): 1 is the consumer rebalance protocol (KIP-848);
- share.version (0-1): 1 is share groups (KIP-932);
- metadata.version and kraft.version: Kafka 4.0's ranges and a new cluster's levels (4.0-IV3; kraft.version 0, a
  static quorum), reported only: nothing in Shoal depends on them.

As Kafka's ApiVersionsResponse, a finalized level 0 is left out, and so are, below ApiVersions v4, supported
features whose minimum is 0 (older clients cannot parse them, KAFKA-17492).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.config import BrokerConfig

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
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


def finalized_transaction_version(config: BrokerConfig) -> int:
    """`transaction.version`, but at most 1 without partition verification: TV2 clients rely on the produce
    path's verification to add their partitions (Kafka's leaders do it in the same step)."""
    tv = config.get("transaction.version")
    return tv if config.get("transaction.partition.verification.enable") else min(tv, 1)


def broker_features(config: BrokerConfig, epoch: int) -> Features:
    tv = finalized_transaction_version(config)
    return Features(finalized={
        METADATA_VERSION: METADATA_VERSION_RANGE[1],
        KRAFT_VERSION: 0,
        TRANSACTION_VERSION: tv,
        GROUP_VERSION: 1 if "consumer" in config.get("group.coordinator.rebalance.protocols") else 0,
        SHARE_VERSION: 1 if config.get("group.share.enable") else 0,
    }, epoch=epoch)
