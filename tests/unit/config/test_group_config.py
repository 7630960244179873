import pytest

from broker.config.group_config import duration_ms, validate


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


BROKER = {"group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
          "group.share.session.timeout.ms": 45000, "group.share.min.heartbeat.interval.ms": 5000,
          "group.share.max.heartbeat.interval.ms": 15000, "group.share.heartbeat.interval.ms": 5000,
          "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
          "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10,
          "group.share.min.partition.max.record.locks": 100, "group.share.max.partition.max.record.locks": 4000,
          "group.consumer.session.timeout.ms": 45000, "group.consumer.heartbeat.interval.ms": 5000,
          "group.consumer.min.session.timeout.ms": 45000, "group.consumer.max.session.timeout.ms": 60000,
          "group.consumer.min.heartbeat.interval.ms": 5000, "group.consumer.max.heartbeat.interval.ms": 15000}


def check(changes: dict[str, str], overrides: dict[str, str] | None = None) -> None:
    from broker.config.group_config import validate_all

    validate_all({**(overrides or {}), **changes}, BROKER.__getitem__)


def test_share_configs_within_the_brokers_bounds_with_kafkas_messages():
    check({"share.delivery.count.limit": "10", "share.partition.max.record.locks": "100",
           "share.record.lock.duration.ms": "15000", "share.heartbeat.interval.ms": "15000"})
    cases = {
        "share.delivery.count.limit": ("11", "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
        "share.partition.max.record.locks": (
            "4001", "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
        "share.record.lock.duration.ms": (
            "14999", "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
        "share.session.timeout.ms": ("60001", "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
        "share.heartbeat.interval.ms": ("4999", "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    }
    for name, (value, message) in cases.items():
        with pytest.raises(ValueError) as err:
            check({name: value})
        assert str(err.value) == message


def test_consumer_configs_within_the_brokers_bounds_with_kafkas_messages():
    from broker.config.group_config import clamped

    check({"consumer.session.timeout.ms": "60000", "consumer.heartbeat.interval.ms": "15000"})
    cases = {
        "consumer.session.timeout.ms": ("6000", "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
        "consumer.heartbeat.interval.ms": (
            "15001", "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    }
    for name, (value, message) in cases.items():
        with pytest.raises(ValueError) as err:
            check({name: value})
        assert str(err.value) == message
    # An override set before the broker's bounds narrowed is capped to them (Kafka's GroupConfig clamping).
    assert clamped("consumer.session.timeout.ms", "90000", BROKER.__getitem__) == "60000"


def test_session_timeout_must_exceed_heartbeat_interval_with_broker_values_for_the_missing_one():
    broker = dict(BROKER)
    broker["group.share.min.session.timeout.ms"] = 1000
    from broker.config.group_config import validate_all

    with pytest.raises(ValueError, match="^share.session.timeout.ms must be greater than share.heartbeat.interval.ms$"):
        validate_all({"share.session.timeout.ms": "5000"}, broker.__getitem__)  # the broker's heartbeat interval is 5000
    validate_all({"share.session.timeout.ms": "5001"}, broker.__getitem__)


def test_deleting_an_override_is_refused_when_the_session_would_not_exceed_the_heartbeat_interval():
    broker = dict(BROKER)
    broker["group.consumer.min.session.timeout.ms"] = 1000
    broker["group.consumer.min.heartbeat.interval.ms"] = 50
    from broker.config.group_config import validate_all

    # session 1500 with heartbeat 500 is fine; deleting the heartbeat override brings back the broker's 5000
    validate_all({"consumer.heartbeat.interval.ms": "500", "consumer.session.timeout.ms": "1500"},
                 broker.__getitem__)
    with pytest.raises(ValueError, match="^consumer.session.timeout.ms must be greater than "
                                         "consumer.heartbeat.interval.ms$"):
        validate_all({"consumer.session.timeout.ms": "1500"}, broker.__getitem__)
    validate_all({}, broker.__getitem__)


def test_syntax_of_the_kafka_4_3_and_4_4_group_configs():
    assert validate("share.renew.acknowledge.enable", "FALSE") == "FALSE"  # kept as given, as Kafka
    assert validate("errors.deadletterqueue.copy.record.enable", "true") == "true"
    assert validate("errors.deadletterqueue.topic.name", "dlq.orders") == "dlq.orders"
    assert validate("share.isolation.level", "read_committed") == "read_committed"
    bad = [("share.renew.acknowledge.enable", "yes", "Expected value to be either true or false"),
           ("share.delivery.count.limit", "five", "Not a number of type INT"),
           ("errors.deadletterqueue.topic.name", "__consumer_offsets", "DLQ topic name must not start with '__'"),
           ("share.isolation.level", "serializable", "String must be one of: read_committed, read_uncommitted")]
    for name, value, message in bad:
        with pytest.raises(ValueError, match=message):
            validate(name, value)
    with pytest.raises(ValueError, match="^Unknown group config name: share.nope$"):
        validate("share.nope", "1")


def test_streams_warmup_configs_with_kafkas_bounds_and_clamping():
    """Kafka 4.4's internal streams configs: the task offset interval no lower than the broker's minimum, the
    warm-up replicas no more than its maximum (validateIntMin / validateIntMax), and an override set before the
    broker's bound moved is capped to it (clampToMin / clampToMax)."""
    from broker.config.group_config import GROUP_CONFIGS, clamped

    broker = {**BROKER, "group.streams.min.task.offset.interval.ms": 15000, "group.streams.max.warmup.replicas": 20,
              "group.streams.max.standby.replicas": 2}
    get = broker.__getitem__
    from broker.config.group_config import validate_all

    validate_all({"streams.task.offset.interval.ms": "15000", "streams.num.warmup.replicas": "20",
                  "streams.acceptable.recovery.lag": "123456789012", "streams.assignor.offload.enable": "False"}, get)
    for name, value, message in (
            ("streams.task.offset.interval.ms", "14999",
             "streams.task.offset.interval.ms must be greater than or equal to 15000"),
            ("streams.num.warmup.replicas", "21", "streams.num.warmup.replicas must be less than or equal to 20"),
            ("streams.num.warmup.replicas", "-1", "Value must be at least 0"),
            ("streams.acceptable.recovery.lag", "x", "Not a number of type LONG"),
            ("streams.assignor.offload.enable", "maybe", "Expected value to be either true or false")):
        with pytest.raises(ValueError, match=message):
            validate_all({name: value}, get)
    assert clamped("streams.task.offset.interval.ms", "1000", get) == "15000"
    assert clamped("streams.num.warmup.replicas", "30", get) == "20"
    assert clamped("streams.num.standby.replicas", "5", get) == "2"
    assert all(GROUP_CONFIGS[n].internal for n in ("streams.task.offset.interval.ms", "streams.num.warmup.replicas",
                                                   "streams.acceptable.recovery.lag",
                                                   "streams.assignor.offload.enable"))


def test_an_internal_group_config_is_described_as_given():
    from broker.config.group_config import effective

    class Broker:
        def broker_value(self, key: str) -> tuple[str | None, int]:
            return None, 5

        def topic_synonyms(self, key: str) -> list[tuple[str, str | None, int]]:
            return []

    row = effective("streams.num.warmup.replicas", {"streams.num.warmup.replicas": " 3 "}, Broker())
    assert row.value == " 3 " and row.synonyms[0][1] == " 3 "
    row = effective("streams.num.standby.replicas", {"streams.num.standby.replicas": " 1 "}, Broker())
    assert row.value == "1"
