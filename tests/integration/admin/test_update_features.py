"""UpdateFeatures (57): kafka-python's update_features/describe_features over TCP, raw requests for the errors;
transaction.version changes the served TV2 versions and the finalized levels at once and survives a restart."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient

from protocol import schema
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.integration

PRODUCE, END_TXN, API_VERSIONS, UPDATE_FEATURES = 0, 26, 18, 57
NONE, INVALID_UPDATE_VERSION = 0, 95
TV2_PRODUCE, TV2_END_TXN = schema.api_specs()[PRODUCE].max_version, schema.api_specs()[END_TXN].max_version
UPGRADE, SAFE_DOWNGRADE = 1, 2


def _versions(broker) -> tuple[dict, dict, int]:
    """(api key -> max version, finalized feature -> level, epoch) from ApiVersions v4."""
    with RawClient(broker.port) as client:
        resp = client.call(API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
    return ({k.api_key: k.max_version for k in resp.api_keys},
            {f.name: f.max_version_level for f in resp.finalized_features}, resp.finalized_features_epoch)


def _update(broker, feature: str, level: int, upgrade_type: int = UPGRADE, *, version: int = 2,
            validate_only: bool = False):
    update = {"feature": feature, "max_version_level": level, "allow_downgrade": upgrade_type != UPGRADE,
              "upgrade_type": upgrade_type}
    with RawClient(broker.port) as client:
        return client.call(UPDATE_FEATURES, version, {"timeout_ms": 10_000, "feature_updates": [update],
                                                      "validate_only": validate_only})


def test_transaction_version_changes_at_run_time_and_sticks(broker):
    apis, finalized, epoch = _versions(broker)
    assert finalized["transaction.version"] == 2 and apis[PRODUCE] == TV2_PRODUCE and apis[END_TXN] == TV2_END_TXN
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert "transaction.version" in repr(admin.describe_features())
        result = admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)})
        assert result == {"transaction.version": "OK"} or "OK" in repr(result), result
    finally:
        admin.close()
    apis, finalized, later = _versions(broker)
    assert finalized["transaction.version"] == 1 and later > epoch
    assert apis[PRODUCE] == 11 and apis[END_TXN] == 4  # TV2 versions no longer served
    broker.restart()
    apis, finalized, _ = _versions(broker)
    assert finalized["transaction.version"] == 1 and apis[PRODUCE] == 11
    resp = _update(broker, "transaction.version", 2, version=1)
    assert resp.error_code == NONE
    assert [(r.feature, r.error_code) for r in resp.results] == [("transaction.version", NONE)]
    apis, finalized, _ = _versions(broker)
    assert finalized["transaction.version"] == 2 and apis[PRODUCE] == TV2_PRODUCE and apis[END_TXN] == TV2_END_TXN


def test_update_features_errors(broker):
    def refused(*args, **kwargs) -> str:
        resp = _update(broker, *args, **kwargs)
        assert resp.error_code == INVALID_UPDATE_VERSION, resp
        assert resp.get("results", []) == []
        assert resp.error_message.startswith("The update failed for all features since the following feature "
                                             "had an error: Invalid update version")
        return resp.error_message

    assert "only supports versions 0-2" in refused("transaction.version", 3)
    assert "without setting the upgrade type" in refused("transaction.version", 1)
    assert "cannot be less than 0" in refused("transaction.version", -1, SAFE_DOWNGRADE)
    assert "does not support this feature" in refused("no.such.feature", 1)
    assert "does not support the given upgrade type" in refused("transaction.version", 1, 7)
    assert "group.coordinator.rebalance.protocols" in refused("group.version", 0, SAFE_DOWNGRADE)
    assert "only supports versions" in refused("metadata.version", 99)
    # validate_only and v0's AllowDowngrade
    assert _update(broker, "transaction.version", 1, SAFE_DOWNGRADE, validate_only=True).error_code == NONE
    assert _versions(broker)[1]["transaction.version"] == 2
    resp = _update(broker, "transaction.version", 2, version=0)  # no change: fine
    assert resp.error_code == NONE and [r.feature for r in resp.results] == ["transaction.version"]
    # an unchanged fixed feature is no error
    assert _update(broker, "group.version", 1).error_code == NONE
