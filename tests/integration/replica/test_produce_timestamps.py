"""Produce refuses records whose CreateTime lies outside message.timestamp.{before,after}.max.ms of the broker's
clock (INVALID_TIMESTAMP, as Kafka's LogValidator): a confluent Producer's delivery fails, raw requests get Kafka's
record errors, and the broker's dynamic defaults and topic overrides apply to the next batch."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import KafkaError, Producer

from protocol import records as rec
from protocol.errors import ErrorCode
from tests.helpers.confluent_clients import create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import BROKER_RESOURCE, TOPIC_RESOURCE, alter_config, end_offset, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
OUT_OF_RANGE = re.compile(r"Timestamp (-?\d+) of message with offset (\d+) is out of range\. The timestamp should "
                          r"be within \[(-?\d+), (-?\d+)\]")


def now_ms() -> int:
    return int(time.time() * 1000)


def deliver(bootstrap: str, topic: str, timestamp: int) -> KafkaError | None:
    """Produce one record with `timestamp` through a confluent Producer; its delivery error, or None."""
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20_000})
    producer.produce(topic, value=b"v", timestamp=timestamp, on_delivery=lambda err, _msg: outcome.append(err))
    assert producer.flush(30) == 0
    return outcome[0]


def test_a_confluent_producer_far_in_the_future_is_refused(broker):
    create_topic(broker.bootstrap, "ts-future")
    assert deliver(broker.bootstrap, "ts-future", now_ms()) is None
    err = deliver(broker.bootstrap, "ts-future", now_ms() + 2 * HOUR)  # Kafka's default window: one hour ahead
    assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP
    with RawClient(broker.port) as raw:
        assert end_offset(raw, "ts-future") == 1


def test_record_errors_name_each_refused_record(broker):
    create_topic(broker.bootstrap, "ts-window", config={"message.timestamp.before.max.ms": "60000"})
    now = now_ms()
    with RawClient(broker.port) as raw:
        assert produce(raw, "ts-window", rec.build_batch([rec.Record(b"k", b"ok")], timestamp=now)).error_code == 0
        stamps = [now, now - 2 * HOUR, -1, now + 2 * HOUR]
        refused = produce(raw, "ts-window", rec.build_batch(
            [rec.Record(b"k", b"v", timestamp=ts) for ts in stamps]))
        assert refused.error_code == ErrorCode.INVALID_TIMESTAMP
        assert refused.error_message == "One or more records have been rejected due to invalid timestamp"
        assert (refused.base_offset, refused.log_start_offset) == (-1, 0)
        assert [e.batch_index for e in refused.record_errors] == [1, 3]
        for error, index in zip(refused.record_errors, (1, 3), strict=True):
            ts, offset, low, high = map(int, OUT_OF_RANGE.fullmatch(error.batch_index_error_message).groups())
            assert (ts, offset) == (stamps[index], index)
            assert high - low == 60_000 + HOUR and now - 5_000 <= low + 60_000 <= now + 30_000
        assert end_offset(raw, "ts-window") == 1  # nothing of the refused batch was appended


def test_a_compacted_topic_lists_missing_keys_and_bad_timestamps_together(broker):
    create_topic(broker.bootstrap, "ts-compact", config={"cleanup.policy": "compact"})
    now = now_ms()
    with RawClient(broker.port) as raw:
        refused = produce(raw, "ts-compact", rec.build_batch([
            rec.Record(None, b"a", timestamp=now + 2 * HOUR),  # no key: judged for that alone
            rec.Record(b"k", b"b", timestamp=now + 2 * HOUR),
            rec.Record(None, b"c", timestamp=now)]))
        assert refused.error_code == ErrorCode.INVALID_TIMESTAMP
        assert [e.batch_index for e in refused.record_errors] == [0, 1, 2]
        key_message = "Compacted topic cannot accept message without key in topic partition ts-compact-0"
        assert refused.record_errors[0].batch_index_error_message == key_message
        assert OUT_OF_RANGE.fullmatch(refused.record_errors[1].batch_index_error_message)
        assert refused.record_errors[2].batch_index_error_message == key_message
        # only missing keys: INVALID_RECORD, as before
        only_keys = produce(raw, "ts-compact", rec.build_batch([rec.Record(None, b"a", timestamp=now)]))
        assert (only_keys.error_code, only_keys.log_start_offset) == (ErrorCode.INVALID_RECORD, 0)


def test_the_windows_follow_live_config_changes(broker):
    create_topic(broker.bootstrap, "ts-live")
    ahead = rec.build_batch([rec.Record(b"k", b"v", timestamp=now_ms() + 600_000)])  # ten minutes ahead
    with RawClient(broker.port) as raw:
        assert produce(raw, "ts-live", ahead).error_code == 0
        alter_config(raw, BROKER_RESOURCE, "", "log.message.timestamp.after.max.ms", "60000")  # the cluster-wide default
        assert produce(raw, "ts-live", ahead).error_code == ErrorCode.INVALID_TIMESTAMP
        alter_config(raw, TOPIC_RESOURCE, "ts-live", "message.timestamp.after.max.ms", str(HOUR))  # the topic's own
        assert produce(raw, "ts-live", ahead).error_code == 0
        alter_config(raw, TOPIC_RESOURCE, "ts-live", "message.timestamp.after.max.ms", None)
        alter_config(raw, TOPIC_RESOURCE, "ts-live", "message.timestamp.type", "LogAppendTime")  # the broker stamps it
        assert produce(raw, "ts-live", ahead).error_code == 0
        alter_config(raw, BROKER_RESOURCE, "", "log.message.timestamp.after.max.ms", None)
        assert end_offset(raw, "ts-live") == 3
