from pathlib import Path

import pytest

from broker.config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    BrokerConfig,
    ConfigError,
    Listener,
    ensure_meta_properties,
    load_config,
    parse_listeners,
    parse_overrides,
    parse_properties,
)
from broker.config.broker_defs import INERT_DOC, update_mode


def test_defaults():
    c = BrokerConfig()
    assert c.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert c.advertised_listeners == c.listeners
    assert c.log_dirs == [Path("./data")]
    assert c.get("num.partitions") == 1
    assert c.get("auto.create.topics.enable") is True
    assert c.get("log.retention.ms") == 168 * 3_600_000
    assert c.get("log.roll.ms") == 168 * 3_600_000
    assert c.get("log.flush.interval.ms") == 0
    assert c.get("message.max.bytes") == 1_048_588
    assert c.get("socket.request.max.bytes") == 104_857_600
    assert c.get("group.share.record.lock.duration.ms") == 30_000
    assert c.get("group.share.delivery.count.limit") == 5
    assert c.get("group.share.partition.max.record.locks") == 2000
    assert c.get("share.coordinator.snapshot.update.records.per.snapshot") == 500
    assert c.node_id == 1
    assert c.source("num.partitions") == DEFAULT_CONFIG


def test_properties_file_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "# comment\n! other comment\n"
        "num.partitions = 3\n"
        "log.dirs=/tmp/a,/tmp/b\n"
        "listeners: PLAINTEXT://0.0.0.0:0\n"
        "advertised.listeners=PLAINTEXT://broker.example:19092\n"
        "log.retention.minutes 5\n"
        "broker.rack=r\\\n  ack-1\n"
        "custom.thing=x\n"
    )
    c = load_config(path, ["num.partitions=4", "auto.create.topics.enable=false"])
    assert c.get("num.partitions") == 4
    assert c.source("num.partitions") == STATIC_BROKER_CONFIG
    assert c.log_dirs == [Path("/tmp/a"), Path("/tmp/b")]
    assert c.listeners == [Listener("PLAINTEXT", "0.0.0.0", 0)]
    assert c.advertised_listeners == [Listener("PLAINTEXT", "broker.example", 19092)]
    assert c.get("log.retention.ms") == 300_000
    assert c.source("log.retention.ms") == STATIC_BROKER_CONFIG
    assert c.get("broker.rack") == "rack-1"
    assert c.get("auto.create.topics.enable") is False
    assert c.unknown == {"custom.thing": "x"}
    assert c.get("custom.thing") == "x"


def test_log_dir_fallback_and_retention_precedence():
    c = BrokerConfig({"log.dir": "/x", "log.retention.hours": "1", "log.retention.ms": "42"})
    assert c.log_dirs == [Path("/x")]
    assert c.get("log.retention.ms") == 42
    assert BrokerConfig({"log.retention.hours": "-1"}).get("log.retention.ms") == -1


@pytest.mark.parametrize(
    "props",
    [
        {"num.partitions": "0"},
        {"num.partitions": "many"},
        {"auto.create.topics.enable": "yes"},
        {"listeners": "PLAINTEXT://127.0.0.1"},
        {"listeners": "SSL://127.0.0.1:9093"},
        {"listeners": "PLAINTEXT://127.0.0.1:70000"},
        {"advertised.listeners": "OTHER://h:1"},
        {"group.share.delivery.count.limit": "11"},
        {"group.share.heartbeat.interval.ms": "50000"},
        {"group.share.record.lock.duration.ms": "90000"},
        {"message.max.bytes": str(2**40)},
        {"log.message.timestamp.type": "Now"},
    ],
)
def test_invalid_values(props):
    with pytest.raises(ConfigError):
        BrokerConfig(props)


def test_consumer_group_timings_within_their_bounds_with_kafkas_messages():
    BrokerConfig({"group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
                  "group.consumer.heartbeat.interval.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "1000"})
    cases = [
        ({"group.consumer.session.timeout.ms": "10000"},
         "group.consumer.session.timeout.ms must be greater than or equals to group.consumer.min.session.timeout.ms"),
        ({"group.consumer.session.timeout.ms": "70000"},
         "group.consumer.session.timeout.ms must be less than or equals to group.consumer.max.session.timeout.ms"),
        ({"group.consumer.max.session.timeout.ms": "40000", "group.consumer.session.timeout.ms": "40000"},
         "group.consumer.max.session.timeout.ms must be greater than or equals to "
         "group.consumer.min.session.timeout.ms"),
        ({"group.consumer.heartbeat.interval.ms": "1000"},
         "group.consumer.heartbeat.interval.ms must be greater than or equals to "
         "group.consumer.min.heartbeat.interval.ms"),
        ({"group.consumer.heartbeat.interval.ms": "20000"},
         "group.consumer.heartbeat.interval.ms must be less than or equals to group.consumer.max.heartbeat.interval.ms"),
    ]
    for props, message in cases:
        with pytest.raises(ConfigError) as err:
            BrokerConfig(props)
        assert str(err.value) == message, props


def test_listener_parsing():
    assert parse_listeners("PLAINTEXT://:9092") == [Listener("PLAINTEXT", "", 9092)]
    assert parse_listeners("PLAINTEXT://[::1]:0") == [Listener("PLAINTEXT", "::1", 0)]
    assert str(Listener("PLAINTEXT", "::1", 5)) == "PLAINTEXT://[::1]:5"
    with pytest.raises(ValueError):
        parse_listeners("PLAINTEXT://a:1,PLAINTEXT://b:2")


def test_properties_syntax():
    props = parse_properties("a=1\nb : two words \nc\\=d=e\n  # indented comment\nf=\\u0041\\n\nempty=\n")
    assert props == {"a": "1", "b": "two words ", "c=d": "e", "f": "A\n", "empty": ""}
    assert parse_overrides(["x=1", "y=a=b"]) == {"x": "1", "y": "a=b"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


def test_dynamic_overrides_and_describe():
    c = BrokerConfig({"log.retention.hours": "2"})
    rows = {r.name: r for r in c.describe()}
    assert rows["log.retention.hours"][:5] == ("log.retention.hours", "2", STATIC_BROKER_CONFIG, False, True)
    # as Kafka: a derived key shows its own value (unset), the hours its synonyms
    assert (rows["log.retention.ms"].value, rows["log.retention.ms"].synonyms) == (None, ())
    assert rows["message.max.bytes"].read_only is False
    assert rows["node.id"].read_only is True
    c.set_dynamic("log.retention.ms", "1000")
    assert c.get("log.retention.ms") == 1000
    assert c.source("log.retention.ms") == DYNAMIC_DEFAULT_BROKER_CONFIG
    synonyms = c.describe(["log.retention.ms"], include_synonyms=True)[0].synonyms
    assert synonyms[0] == ("log.retention.ms", "1000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert ("log.retention.hours", "2", STATIC_BROKER_CONFIG) in synonyms
    c.set_dynamic("log.retention.ms", None)
    assert c.get("log.retention.ms") == 2 * 3_600_000
    with pytest.raises(ConfigError):
        c.set_dynamic("node.id", "3")
    with pytest.raises(ConfigError):
        c.set_dynamic("message.max.bytes", "-5")


def test_topic_values_follow_broker_synonyms():
    c = BrokerConfig({"log.retention.hours": "1", "message.max.bytes": "2000"})
    assert c.topic_value("retention.ms", {}) == "3600000"
    assert c.topic_value("retention.ms", {"retention.ms": "5"}) == "5"
    assert c.topic_value("max.message.bytes", {}) == "2000"
    assert c.topic_value("cleanup.policy", {}) == "delete"
    entries = {e.name: e for e in c.describe_topic({"segment.bytes": "1000"})}
    assert entries["segment.bytes"].value == "1000"
    # as Kafka: only log.retention.ms itself would be a synonym of retention.ms (the hours are dropped)
    assert entries["retention.ms"].source == DEFAULT_CONFIG
    assert entries["compression.type"].source == DEFAULT_CONFIG
    assert set(c.log_config({})) >= {"retention.ms", "segment.bytes", "cleanup.policy"}


def test_meta_properties(tmp_path):
    cid = ensure_meta_properties(tmp_path / "d", 1, None)
    assert len(cid) == 22
    assert ensure_meta_properties(tmp_path / "d", 1, None) == cid
    assert ensure_meta_properties(tmp_path / "d", 1, cid) == cid
    with pytest.raises(ConfigError):
        ensure_meta_properties(tmp_path / "d", 1, "other-cluster-id")
    with pytest.raises(ConfigError):
        ensure_meta_properties(tmp_path / "d", 2, None)
    assert ensure_meta_properties(tmp_path / "e", 1, "fixed") == "fixed"


@pytest.mark.parametrize("damage", ["missing", "empty", "zeros"])
def test_meta_properties_lost_next_to_logs_is_refused_with_how_to_repair(tmp_path, damage):
    """What a power loss left before meta.properties was fsynced: never a new cluster id for existing logs."""
    data = tmp_path / "d"
    cid = ensure_meta_properties(data, 3, None)
    meta = data / "meta.properties"
    if damage == "missing":
        meta.unlink()
    else:
        meta.write_bytes(b"" if damage == "empty" else b"\0" * 90)
    with pytest.raises(ConfigError) as err:
        ensure_meta_properties(data, 3, None, existing_logs=["__cluster_metadata-0", "t-0"])
    message = str(err.value)
    assert str(meta) in message and "__cluster_metadata-0" in message
    assert "`version=1`, `node.id=3` and `cluster.id=<id>`" in message and "cluster.id=<id>" in message
    assert not meta.exists() or meta.read_bytes().strip(b"\0") == b""  # left as it was
    # the configured cluster id (the operator's repair) is written; then the file is found as usual
    assert ensure_meta_properties(data, 3, cid, existing_logs=["t-0"]) == cid
    assert ensure_meta_properties(data, 3, None, existing_logs=["t-0"]) == cid


def test_meta_properties_empty_in_a_directory_without_logs_gets_a_new_one(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    (data / "meta.properties").write_bytes(b"")
    cid = ensure_meta_properties(data, 1, None)
    assert f"cluster.id={cid}" in (data / "meta.properties").read_text()


def test_meta_properties_without_cluster_id_is_refused_with_how_to_repair(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    (data / "meta.properties").write_text("version=1\nnode.id=1\n")
    with pytest.raises(ConfigError, match="has no cluster.id. To repair it, write .*cluster.id=<id>"):
        ensure_meta_properties(data, 1, None)


def test_kafka_broker_configs_by_update_mode():
    """Every broker config Kafka defines is known (those Shoal does not use are inert); the update modes are
    Kafka's, except Kafka-dynamic configs Shoal reads only at start (read-only here)."""
    c = BrokerConfig({})
    assert update_mode("sasl.kerberos.min.time.before.relogin") == "per-broker"
    assert update_mode("num.io.threads") == "cluster-wide"
    assert update_mode("log.dirs") == "read-only"
    assert update_mode("listeners") == "read-only"  # per-broker in Kafka; bound once here
    assert update_mode("group.share.record.lock.duration.ms") == "read-only"  # as Kafka
    assert c.get("num.io.threads") == 8
    row = c.describe(["sasl.kerberos.min.time.before.relogin"])[0]
    assert (row.value, row.read_only, row.documentation) == ("60000", False, INERT_DOC)
    with pytest.raises(ConfigError, match="broker id must be specified"):
        c.set_dynamic("sasl.kerberos.min.time.before.relogin", "1000")
    c.set_dynamic("sasl.kerberos.min.time.before.relogin", "1000", per_broker=True)
    c.set_dynamic("num.io.threads", "4")
    assert c.source("num.io.threads") == DYNAMIC_DEFAULT_BROKER_CONFIG
    c.set_dynamic("num.io.threads", "2", per_broker=True)
    assert c.get("num.io.threads") == 2 and c.source("num.io.threads") == DYNAMIC_BROKER_CONFIG
    assert [r.name for r in c.describe(cluster_defaults=True)] == ["num.io.threads"]
    with pytest.raises(ConfigError, match=r"Cannot update these configs dynamically: \[log.dirs\]"):
        c.set_dynamic("log.dirs", "/x")
    # internal configs are not listed unless set
    assert "unstable.api.versions.enable" not in {r.name for r in c.describe()}


def test_socket_settings():
    """Buffers: -1 leaves the kernel's (autotuned) buffers, Shoal's default; a size in bytes sets them; 0 or below
    -1 is refused at start. The listen backlog: at least 1."""
    assert BrokerConfig().get("socket.send.buffer.bytes") == -1
    assert BrokerConfig().get("socket.receive.buffer.bytes") == -1
    assert BrokerConfig().get("socket.listen.backlog.size") == 1024
    with pytest.raises(ConfigError):
        BrokerConfig({"socket.listen.backlog.size": "0"})
    c = BrokerConfig({"socket.send.buffer.bytes": "102400", "socket.receive.buffer.bytes": "65536"})
    assert (c.get("socket.send.buffer.bytes"), c.get("socket.receive.buffer.bytes")) == (102400, 65536)
    for name in ("socket.send.buffer.bytes", "socket.receive.buffer.bytes"):
        for bad in ("0", "-2"):
            with pytest.raises(ConfigError):
                BrokerConfig({name: bad})


def test_segment_jitter_from_the_topic_or_the_broker():
    """segment.jitter.ms: the topic's own, else log.roll.jitter.ms, else log.roll.jitter.hours (Kafka's family)."""
    from broker.log.config import LogConfig

    def jitter(broker: dict, topic: dict) -> int:
        return LogConfig.coerce(BrokerConfig(broker).log_config(topic)).segment_jitter_ms

    assert jitter({}, {}) == 0
    assert jitter({"log.roll.jitter.hours": "2"}, {}) == 7_200_000
    assert jitter({"log.roll.jitter.hours": "2", "log.roll.jitter.ms": "5"}, {}) == 5
    assert jitter({"log.roll.jitter.ms": "5"}, {"segment.jitter.ms": "9"}) == 9


def test_sensitive_values_are_null_in_every_synonym():
    """DescribeConfigs with synonyms never shows a password-typed value, static or default: a synonym carrying
    the secret that the described value hides would hand it to anyone with DESCRIBE_CONFIGS. Shoal reads every
    password config only at start, so none can sit in a dynamic layer: setting one dynamically is refused."""
    from broker.config.broker_defs import BROKER_CONFIGS

    secrets = sorted(name for name, d in BROKER_CONFIGS.items() if d.sensitive)
    assert "delegation.token.secret.key" in secrets and "ssl.key.password" in secrets
    config = BrokerConfig({name: f"static-{name}" for name in secrets})
    for name in secrets:
        for per_broker in (True, False):
            with pytest.raises(ConfigError):
                config.set_dynamic(name, f"dynamic-{name}", per_broker=per_broker)
    rows = {row.name: row for row in config.describe(secrets, include_synonyms=True)}
    assert set(rows) == set(secrets)
    for name, row in rows.items():
        assert row.is_sensitive and row.value is None, row
        assert row.synonyms, f"{name} has no synonyms to check"
        assert all(value is None for _key, value, _source in row.synonyms), row.synonyms
    every = config.describe(None, include_synonyms=True)
    assert not [row for row in every if row.is_sensitive and (row.value is not None or
                                                                any(v is not None for _k, v, _s in row.synonyms))]
