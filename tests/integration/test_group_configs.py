"""Group configs (share.auto.offset.reset, ...) through AdminClient on the GROUP resource, kept across restarts."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

pytestmark = pytest.mark.integration


def _alter(admin: AdminClient, group: str, name: str, value: str | None, op=AlterConfigOpType.SET) -> None:
    resource = ConfigResource(ResourceType.GROUP, group,
                              incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def _describe(admin: AdminClient, group: str) -> dict:
    resource = ConfigResource(ResourceType.GROUP, group)
    return admin.describe_configs([resource])[resource].result(timeout=30)


def test_share_auto_offset_reset_on_the_group_resource(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _describe(admin, "g1")["share.auto.offset.reset"].value == "latest"
    _alter(admin, "g1", "share.auto.offset.reset", "earliest")
    _alter(admin, "g2", "share.auto.offset.reset", "by_duration:PT1H")
    assert _describe(admin, "g1")["share.auto.offset.reset"].value == "earliest"
    assert _describe(admin, "g2")["share.auto.offset.reset"].value == "by_duration:PT1H"
    assert _describe(admin, "g3")["share.record.lock.duration.ms"].value == "30000"
    for bad in [("share.auto.offset.reset", "sometimes"), ("share.auto.offset.reset", "by_duration:1h"),
                ("no.such.group.config", "1"), ("share.record.lock.duration.ms", "10")]:
        with pytest.raises(KafkaException) as err:
            _alter(admin, "g1", *bad)
        assert err.value.args[0].code() == KafkaError.INVALID_CONFIG, bad

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _describe(admin, "g1")["share.auto.offset.reset"].value == "earliest"
    _alter(admin, "g1", "share.auto.offset.reset", None, AlterConfigOpType.DELETE)
    assert _describe(admin, "g1")["share.auto.offset.reset"].value == "latest"
