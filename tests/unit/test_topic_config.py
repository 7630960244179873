import pytest

from broker.cluster.topic_config import (
    DEFAULT_CONFIG,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIG,
    TOPIC_CONFIGS,
    effective,
    validate,
)


def broker_lookup(values):
    def lookup(key):
        if key in values:
            return values[key], STATIC_BROKER_CONFIG
        return None, DEFAULT_CONFIG

    return lookup


def test_override_beats_broker_beats_default():
    lookup = broker_lookup({"log.retention.ms": "1000"})
    entry = effective("retention.ms", {"retention.ms": "5"}, lookup)
    assert (entry.value, entry.source) == ("5", TOPIC_CONFIG)
    assert [s[2] for s in entry.synonyms] == [TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG]
    entry = effective("retention.ms", {}, lookup)
    assert (entry.value, entry.source) == ("1000", STATIC_BROKER_CONFIG)
    entry = effective("cleanup.policy", {}, lookup)
    assert (entry.value, entry.source) == ("delete", DEFAULT_CONFIG)


@pytest.mark.parametrize(
    ("name", "value"),
    [("retention.ms", "-2"), ("retention.ms", "abc"), ("cleanup.policy", "shred"), ("no.such.config", "1"),
     ("message.timestamp.type", "Now"), ("min.cleanable.dirty.ratio", "2"), ("preallocate", "maybe")],
)
def test_invalid_values(name, value):
    with pytest.raises(ValueError):
        validate(name, value)


def test_valid_values_round_trip():
    assert validate("cleanup.policy", "compact,delete") == "compact,delete"
    assert validate("retention.ms", " 42 ") == "42"
    assert all(validate(d.name, d.default) == d.default for d in TOPIC_CONFIGS.values())
