from broker.log.config import LogConfig


def test_compact_only_topics_are_never_trimmed():
    compact = LogConfig.from_topic_config({"cleanup.policy": "compact", "retention.ms": "1000"})
    assert (compact.retention_ms, compact.retention_bytes) == (-1, -1)
    both = LogConfig.from_topic_config({"cleanup.policy": "compact,delete", "retention.ms": "1000"})
    assert both.retention_ms == 1000


def test_the_append_settings_come_from_the_effective_topic_configs():
    """Produce reads max.message.bytes and message.timestamp.type from the partition log's settings."""
    default = LogConfig()
    assert not default.log_append_time and default.max_message_bytes == 1_048_588
    changed = LogConfig.from_topic_config({"message.timestamp.type": "LogAppendTime", "max.message.bytes": "300"})
    assert changed.log_append_time and changed.max_message_bytes == 300
    back = LogConfig.from_topic_config({"message.timestamp.type": "CreateTime"}, changed)
    assert not back.log_append_time and back.max_message_bytes == 300
