"""UpdateFeatures validation (broker.features.check_update) as Kafka's FeatureControlManager, with the features
Shoal fixes while running."""

from __future__ import annotations

from broker.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, Features, check_update


def _features(tv: int) -> Features:
    return Features(finalized={"metadata.version": 25, "kraft.version": 0, "transaction.version": tv,
                               "group.version": 1, "share.version": 1}, epoch=1)


def _check(tv: int, name: str, level: int, kind: int = UPGRADE, verification: bool = True) -> str | None:
    return check_update(_features(tv), 1, name, level, kind, verification_enabled=verification)


def test_transaction_version_moves_within_its_range():
    assert _check(1, "transaction.version", 2) is None
    assert _check(2, "transaction.version", 0, SAFE_DOWNGRADE) is None
    assert _check(2, "transaction.version", 1, UNSAFE_DOWNGRADE) is None
    assert _check(2, "transaction.version", 2) is None  # unchanged


def test_kafka_refusals():
    assert _check(1, "transaction.version", 3) == \
        "Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2"
    assert _check(1, "transaction.version", 2, SAFE_DOWNGRADE) == \
        "Invalid update version 2 for feature transaction.version. Can't downgrade to a newer version."
    assert "without setting the upgrade type" in _check(2, "transaction.version", 1)
    assert _check(2, "transaction.version", -1, SAFE_DOWNGRADE).endswith("A feature version cannot be less than 0.")
    assert _check(2, "transaction.version", 1, 0).endswith("does not support the given upgrade type.")
    assert _check(2, "x.version", 1).endswith("Local controller 1 does not support this feature.")
    assert _check(2, "kraft.version", 0, SAFE_DOWNGRADE) is None  # unchanged


def test_fixed_features_and_verification():
    assert "it follows group.coordinator.rebalance.protocols" in _check(2, "group.version", 0, SAFE_DOWNGRADE)
    assert "share.enable" in _check(2, "share.version", 0, SAFE_DOWNGRADE)
    assert "Shoal cannot change it" in _check(2, "kraft.version", 1)
    assert "Shoal cannot change it" in _check(2, "metadata.version", 24, SAFE_DOWNGRADE)
    assert "transaction.partition.verification.enable" in _check(1, "transaction.version", 2, verification=False)


def test_router_caps_and_lifts_the_tv2_versions(tmp_path):
    """UpdateFeatures moves the served maximum of a TV2 API between its cap and the ceiling register_all gave
    it (the module's versions, unstable ones left out), never beyond."""
    from broker.features import BELOW_TV2_MAX_VERSIONS, PRODUCE  # noqa: PLC0415
    from broker.handlers import register_all  # noqa: PLC0415
    from broker.router import Router  # noqa: PLC0415
    from protocol import schema  # noqa: PLC0415
    from tests.helpers.api_objects import partition_apis  # noqa: PLC0415

    router = Router()
    with partition_apis(tmp_path) as apis:
        register_all(router, apis, max_versions=BELOW_TV2_MAX_VERSIONS)
    assert router.version_range(PRODUCE)[1] == 11
    router.set_max_version(PRODUCE, None)
    assert router.version_range(PRODUCE)[1] == schema.api_specs()[PRODUCE].max_version
    router.set_max_version(PRODUCE, 11)
    assert router.version_range(PRODUCE)[1] == 11
    init_producer_id = 22
    ceiling = router.version_range(init_producer_id)[1]
    router.set_max_version(init_producer_id, None)  # its unstable version stays unserved
    assert router.version_range(init_producer_id)[1] == ceiling
