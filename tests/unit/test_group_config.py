import pytest

from broker.cluster.group_config import duration_ms, validate


def test_durations():
    assert duration_ms("PT1H") == 3_600_000
    assert duration_ms("P1DT30M") == 86_400_000 + 1_800_000
    assert duration_ms("PT1.5S") == 1500
    for bad in ("1h", "P", "PT", "P1H"):
        with pytest.raises(ValueError):
            duration_ms(bad)


def test_auto_offset_reset_values():
    assert validate("share.auto.offset.reset", "earliest") == "earliest"
    assert validate("share.auto.offset.reset", "by_duration:P2D") == "by_duration:P2D"
    with pytest.raises(ValueError):
        validate("share.auto.offset.reset", "by_duration:")
