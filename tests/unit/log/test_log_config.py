from broker.log.config import LogConfig


def test_compact_only_topics_are_never_trimmed():
    compact = LogConfig.from_topic_config({"cleanup.policy": "compact", "retention.ms": "1000"})
    assert (compact.retention_ms, compact.retention_bytes) == (-1, -1)
    both = LogConfig.from_topic_config({"cleanup.policy": "compact,delete", "retention.ms": "1000"})
    assert both.retention_ms == 1000
