"""confluent-kafka (librdkafka 2.16) Producer/Consumer against a real broker process."""

from __future__ import annotations

import pytest

from tests.helpers.confluent_clients import consume_all, create_topic, produce_all

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compressed_roundtrip(broker, compression):
    topic = f"rt-{compression}"
    create_topic(broker.bootstrap, topic)
    n = 100_000 if compression == "lz4" else 20_000
    values = [f"value-{i}-{compression}".encode() * (1 + i % 3) for i in range(n)]
    delivered = produce_all(broker.bootstrap, topic, values, **{"compression.type": compression})
    assert sorted(offset for _, offset in delivered) == list(range(n))
    got = consume_all(broker.bootstrap, topic, n)
    assert [(k, v) for k, v, _ in got] == [(str(i).encode(), values[i]) for i in range(n)]
    assert [o for _, _, o in got] == list(range(n))
