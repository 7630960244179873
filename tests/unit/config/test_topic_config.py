import pytest

from broker.config import BrokerConfig
from broker.config.definitions import DEFAULT_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG
from broker.config.topic_config import TOPIC_CONFIGS, canonical, effective, validate


def test_override_beats_broker_beats_default():
    broker = BrokerConfig({"log.retention.ms": "1000"})
    entry = effective("retention.ms", {"retention.ms": "5"}, broker)
    assert (entry.value, entry.source) == ("5", TOPIC_CONFIG)
    assert entry.synonyms == (("retention.ms", "5", TOPIC_CONFIG), ("log.retention.ms", "1000", STATIC_BROKER_CONFIG),
                              ("log.retention.hours", "168", DEFAULT_CONFIG))
    entry = effective("retention.ms", {}, broker)
    assert (entry.value, entry.source) == ("1000", STATIC_BROKER_CONFIG)
    entry = effective("cleanup.policy", {}, broker)
    assert (entry.value, entry.source) == ("delete", DEFAULT_CONFIG)
    # Kafka lists the broker's default, not the topic's own, as the synonym of a defaulted config
    assert entry.synonyms == (("log.cleanup.policy", "delete", DEFAULT_CONFIG),)


def test_synonyms_of_a_derived_broker_key_as_kafka_lists_them():
    """Kafka's ConfigHelper keeps the synonyms from the first one named as the topic config's broker key
    (log.retention.ms): with only log.retention.hours set, there are none, and the source is the default's."""
    broker = BrokerConfig({"log.retention.hours": "24"})
    entry = effective("retention.ms", {}, broker)
    assert (entry.value, entry.source, entry.synonyms) == (str(24 * 3_600_000), DEFAULT_CONFIG, ())
    assert effective("flush.ms", {}, BrokerConfig({})).synonyms == ()  # Kafka's log.flush.interval.ms: no default


def test_overrides_kept_as_given_and_described_as_kafka_prints_them():
    overrides = {"retention.ms": "+5", "cleanup.policy": " compact , delete ", "preallocate": "TRUE",
                 "min.cleanable.dirty.ratio": "5e-1"}
    for name, value in overrides.items():
        assert validate(name, value) == value
    broker = BrokerConfig({})
    described = {n: effective(n, overrides, broker).value for n in overrides}
    assert described == {"retention.ms": "5", "cleanup.policy": "compact,delete", "preallocate": "true",
                         "min.cleanable.dirty.ratio": "0.5"}
    assert effective("retention.ms", overrides, broker, raw=True).value == "+5"  # CreateTopics' answer
    assert canonical("min.cleanable.dirty.ratio", "1e3") == "1000.0"


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
    assert validate("cleanup.policy", "") == ""  # no cleanup at all (Kafka 4.x allows an empty list)
    assert validate("retention.ms", " 42 ") == " 42 "
    assert all(validate(d.name, d.default) == d.default for d in TOPIC_CONFIGS.values() if d.default is not None)


@pytest.mark.parametrize(("name", "value", "message"), [
    # KIP-1030 (Kafka 4.0): segment.bytes is at least 1 MiB
    ("segment.bytes", "1048575", "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("compression.gzip.level", "10", "Invalid value 10 for configuration compression.gzip.level: "
                                     "Value must be between 1 and 9 or equal to -1"),
    ("cleanup.policy", "delete,foo", "Invalid value foo for configuration cleanup.policy: String must be one of: "
                                     "compact, delete"),
    ("cleanup.policy", "compact,", "Configuration 'cleanup.policy' values must not be empty."),
    ("min.cleanable.dirty.ratio", "2147483648", "Invalid value 2.147483648E9 for configuration "
                                                "min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "0x10", "Invalid value 0x10 for configuration min.cleanable.dirty.ratio: "
                                          "Not a number of type DOUBLE"),
    ("preallocate", " ", "Invalid value   for configuration preallocate: Expected value to be either true or false"),
    ("follower.replication.throttled.replicas", "0:1,x", "Invalid value [0:1, x] for configuration "
     "follower.replication.throttled.replicas: follower.replication.throttled.replicas must be the literal '*' or "
     "a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
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
