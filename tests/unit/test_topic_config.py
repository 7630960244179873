import pytest

from broker.config.definitions import DEFAULT_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG
from broker.config.topic_config import TOPIC_CONFIGS, effective, validate


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
    assert all(validate(d.name, d.default) == d.default for d in TOPIC_CONFIGS.values() if d.default is not None)


@pytest.mark.parametrize(("name", "value", "message"), [
    # KIP-1030 (Kafka 4.0): segment.bytes is at least 1 MiB
    ("segment.bytes", "1048575", "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("compression.gzip.level", "10", "Invalid value 10 for configuration compression.gzip.level: "
                                     "Value must be no more than 9"),
    ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ("max.message.bytes", "2147483648", "Invalid value 2147483648 for configuration max.message.bytes: "
                                        "Not a number of type INT"),
])
def test_kafka_messages(name, value, message):
    with pytest.raises(ValueError) as err:
        validate(name, value)
    assert str(err.value) == message


def test_segment_bytes_minimum_and_the_internal_override():
    assert validate("segment.bytes", "1048576") == "1048576"
    assert validate("internal.segment.bytes", "700") == "700"  # Kafka's test-only way to small segments
