"""Group configs (share.auto.offset.reset, ...) through AdminClient on the GROUP resource, kept across restarts."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType

from tests.helpers.confluent_clients import admin_client, alter_group_config, describe_group_config

pytestmark = pytest.mark.integration


def test_share_auto_offset_reset_on_the_group_resource(broker):
    admin = admin_client(broker.bootstrap)
    assert describe_group_config(admin, "g1")["share.auto.offset.reset"].value == "latest"
    alter_group_config(admin, "g1", "share.auto.offset.reset", "earliest")
    alter_group_config(admin, "g2", "share.auto.offset.reset", "by_duration:PT1H")
    assert describe_group_config(admin, "g1")["share.auto.offset.reset"].value == "earliest"
    assert describe_group_config(admin, "g2")["share.auto.offset.reset"].value == "by_duration:PT1H"
    assert describe_group_config(admin, "g3")["share.record.lock.duration.ms"].value == "30000"
    for bad in [("share.auto.offset.reset", "sometimes"), ("share.auto.offset.reset", "by_duration:1h"),
                ("no.such.group.config", "1"), ("share.record.lock.duration.ms", "10")]:
        with pytest.raises(KafkaException) as err:
            alter_group_config(admin, "g1", *bad)
        assert err.value.args[0].code() == KafkaError.INVALID_CONFIG, bad

    broker.restart()
    admin = admin_client(broker.bootstrap)
    assert describe_group_config(admin, "g1")["share.auto.offset.reset"].value == "earliest"
    alter_group_config(admin, "g1", "share.auto.offset.reset", None, AlterConfigOpType.DELETE)
    assert describe_group_config(admin, "g1")["share.auto.offset.reset"].value == "latest"


SHARE_CONFIGS = ["share.auto.offset.reset", "share.isolation.level", "share.record.lock.duration.ms",
                 "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.delivery.count.limit",
                 "share.partition.max.record.locks", "share.renew.acknowledge.enable"]
GROUP_SOURCE, STATIC_BROKER_SOURCE, DEFAULT_SOURCE = 8, 4, 5


def test_every_share_group_config_is_described_with_its_source(broker_factory):
    from confluent_kafka.admin import ConfigSource

    broker = broker_factory({"group.share.delivery.count.limit": "3"})
    admin = admin_client(broker.bootstrap)
    described = describe_group_config(admin, "g")
    assert set(SHARE_CONFIGS) <= set(described)
    assert described["share.delivery.count.limit"].value == "3"  # the broker's setting
    assert described["share.delivery.count.limit"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert described["share.partition.max.record.locks"].value == "2000"
    assert described["share.partition.max.record.locks"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["share.renew.acknowledge.enable"].value == "true"
    values = {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed",
              "share.record.lock.duration.ms": "20000", "share.session.timeout.ms": "50000",
              "share.heartbeat.interval.ms": "6000", "share.delivery.count.limit": "7",
              "share.partition.max.record.locks": "300", "share.renew.acknowledge.enable": "false"}
    for name, value in values.items():
        alter_group_config(admin, "g", name, value)
    described = describe_group_config(admin, "g")
    for name, value in values.items():
        assert described[name].value == value, name
        assert described[name].source == ConfigSource.GROUP_CONFIG.value, name
    assert describe_group_config(admin, "other")["share.delivery.count.limit"].value == "3"


def test_out_of_bounds_values_are_invalid_config_with_kafkas_messages(broker):
    admin = admin_client(broker.bootstrap)
    cases = [("share.delivery.count.limit", "1",
              "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
             ("share.delivery.count.limit", "11", "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
             ("share.partition.max.record.locks", "5000",
              "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
             ("share.record.lock.duration.ms", "90000",
              "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
             ("share.session.timeout.ms", "30000",
              "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
             ("share.heartbeat.interval.ms", "20000",
              "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
             ("share.renew.acknowledge.enable", "maybe", None),
             ("share.isolation.level", "dirty", None)]
    for name, value, message in cases:
        with pytest.raises(KafkaException) as err:
            alter_group_config(admin, "g", name, value)
        assert err.value.args[0].code() == KafkaError.INVALID_CONFIG, (name, value)
        if message is not None:
            assert message in err.value.args[0].str(), err.value.args[0].str()


def test_lock_duration_delivery_limit_and_record_locks_apply_to_a_running_group(broker_factory):
    """Regression: the lock duration was fixed when the share-partition loaded (responses advertised the new
    value), share.delivery.count.limit was refused as unknown, and max record locks were the broker's."""
    from tests.helpers.raw_requests import produce
    from tests.helpers.share_raw import RELEASE, acquired, batch, fetch, setup
    from tests.helpers.share_raw import part as partition_of

    broker = broker_factory({"group.share.min.record.lock.duration.ms": "1000"})
    admin = admin_client(broker.bootstrap)
    client, tid = setup(broker, "gc-live")
    with client:
        assert fetch(client, "g", "a", 0, tid).error_code == 0  # the share-partition is loaded now (30 s locks)
        # b joins and opens its session before anything is produced: joining can take longer than a's 1 s lock
        # on a loaded machine, and an epoch-0 fetch after that would take the records itself.
        assert fetch(client, "g", "b", 0, tid).error_code == 0
        produce(client, "gc-live", batch(2))
        alter_group_config(admin, "g", "share.record.lock.duration.ms", "1000")
        alter_group_config(admin, "g", "share.delivery.count.limit", "2")
        resp = fetch(client, "g", "a", 1, tid)
        assert acquired(resp) == [(0, 1, 1)] and resp.acquisition_lock_timeout_ms == 1000
        # a holds 0-1 and goes quiet: the 1 s lock expires and b gets them (a 30 s lock would still hold them).
        deadline = time.monotonic() + 15  # well inside the 30 s lock a's records would have without the config
        got, epoch = [], 1
        while not got and time.monotonic() < deadline:
            got = acquired(fetch(client, "g", "b", epoch, tid, max_wait_ms=500))
            epoch += 1
        assert got == [(0, 1, 2)]
        # Delivery 2 of 2: released once more, the records are archived instead of delivered a third time.
        resp = fetch(client, "g", "b", epoch, tid, acks={0: [(0, 1, RELEASE)]})
        assert partition_of(resp).acknowledge_error_code == 0 and acquired(resp) == []
        # share.partition.max.record.locks: at most 100 records in flight, whatever MaxRecords says.
        alter_group_config(admin, "g", "share.partition.max.record.locks", "100")
        for _ in range(150):
            produce(client, "gc-live", batch(1))
        resp = fetch(client, "g", "b", epoch + 1, tid, max_records=500)
        assert sum(last - first + 1 for first, last, _ in acquired(resp)) == 100


def test_renew_can_be_disabled_for_a_group(broker):
    from tests.helpers.raw_requests import produce
    from tests.helpers.share_raw import SHARE_ACK, acquired, batch, fetch, part, setup

    admin = admin_client(broker.bootstrap)
    client, tid = setup(broker, "gc-renew")
    with client:
        assert fetch(client, "g", "m", 0, tid, version=2).error_code == 0
        produce(client, "gc-renew", batch(2))
        assert acquired(fetch(client, "g", "m", 1, tid, version=2)) == [(0, 1, 1)]

        def renew(epoch: int):
            return client.call(SHARE_ACK, 2, {"group_id": "g", "member_id": "m", "share_session_epoch": epoch,
                                              "is_renew_ack": True, "topics": [{"topic_id": tid, "partitions": [
                                                  {"partition_index": 0, "acknowledgement_batches": [
                                                      {"first_offset": 0, "last_offset": 1,
                                                       "acknowledge_types": [4]}]}]}]})

        assert part(renew(2)).error_code == 0
        alter_group_config(admin, "g", "share.renew.acknowledge.enable", "false")
        assert part(renew(3)).error_code == KafkaError.INVALID_RECORD_STATE


def test_heartbeat_interval_and_session_timeout_apply_to_a_running_group(broker_factory):
    from tests.helpers.confluent_clients import create_topic
    from tests.helpers.raw_client import RawClient
    from tests.helpers.share_raw import describe, heartbeat

    broker = broker_factory({"group.share.min.session.timeout.ms": "1000",
                             "group.share.min.heartbeat.interval.ms": "200",
                             "group.share.heartbeat.interval.ms": "500"})
    admin = admin_client(broker.bootstrap)
    create_topic(broker.bootstrap, "gc-session", 1)
    with RawClient(broker.port) as c:
        resp = heartbeat(c, "g", "m", 0, ["gc-session"])
        assert resp.error_code == 0 and resp.heartbeat_interval_ms == 500
        alter_group_config(admin, "g", "share.heartbeat.interval.ms", "300")
        alter_group_config(admin, "g", "share.session.timeout.ms", "1500")
        resp = heartbeat(c, "g", "m", resp.member_epoch)
        assert resp.error_code == 0 and resp.heartbeat_interval_ms == 300
        # No more heartbeats: the member is gone after the group's 1.5 s, not the broker's 45 s.
        deadline = time.monotonic() + 30
        while describe(c, "g").groups[0].members and time.monotonic() < deadline:
            time.sleep(0.1)
        assert describe(c, "g").groups[0].members == []
