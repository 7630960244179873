"""broker.features: the finalized levels from the broker's configs, the TV2 versions gated by transaction.version,
and the ApiVersions fields as Kafka's ApiVersionsResponse builds them."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from broker.features import Features, broker_features

PRODUCE, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 0, 24, 26, 28


def test_defaults_finalize_transaction_version_2_and_serve_every_version() -> None:
    f = broker_features(BrokerConfig(), epoch=5)
    assert f.transaction_version == 2
    assert f.version_caps() == {}
    assert f.finalized == {"metadata.version": 25, "kraft.version": 0, "transaction.version": 2,
                           "group.version": 1, "share.version": 1, "streams.version": 1}


@pytest.mark.parametrize("tv", [0, 1])
def test_below_tv2_the_tv2_versions_are_not_served(tv: int) -> None:
    f = broker_features(BrokerConfig({"transaction.version": str(tv)}), epoch=5)
    assert f.transaction_version == tv
    assert f.version_caps() == {PRODUCE: 11, ADD_PARTITIONS_TO_TXN: 4, END_TXN: 4, TXN_OFFSET_COMMIT: 4}


def test_tv2_needs_partition_verification() -> None:
    f = broker_features(BrokerConfig({"transaction.partition.verification.enable": "false"}), epoch=5)
    assert f.transaction_version == 1


def test_transaction_version_is_validated() -> None:
    with pytest.raises(Exception):  # noqa: B017 - the config error type is the config module's
        BrokerConfig({"transaction.version": "3"}).get("transaction.version")


def test_groups_and_share_groups_follow_their_switches() -> None:
    f = broker_features(BrokerConfig({"group.coordinator.rebalance.protocols": "classic",
                                      "group.share.enable": "false"}), epoch=5)
    assert (f.level("group.version"), f.level("share.version"), f.level("streams.version")) == (0, 0, 0)
    streams_only = broker_features(BrokerConfig({"group.coordinator.rebalance.protocols": "classic,streams"}), epoch=5)
    assert (streams_only.level("group.version"), streams_only.level("streams.version")) == (0, 1)


def test_api_versions_fields_leave_out_level_0_and_min_0_below_v4() -> None:
    f = Features(finalized={"transaction.version": 2, "kraft.version": 0}, epoch=9,
                 supported={"metadata.version": (7, 25), "transaction.version": (0, 2)})
    v4 = f.api_versions_fields(4)
    assert v4 == {"supported_features": [{"name": "metadata.version", "min_version": 7, "max_version": 25},
                                         {"name": "transaction.version", "min_version": 0, "max_version": 2}],
                  "finalized_features_epoch": 9,
                  "finalized_features": [{"name": "transaction.version", "min_version_level": 2,
                                          "max_version_level": 2}]}
    v3 = f.api_versions_fields(3)
    assert [s["name"] for s in v3["supported_features"]] == ["metadata.version"]
    assert v3["finalized_features"] == v4["finalized_features"]
