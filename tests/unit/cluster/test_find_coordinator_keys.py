"""FindCoordinator's share keys read as Kafka's SharePartitionKey reads them (broker/handlers/cluster.py)."""

from __future__ import annotations

import base64
import uuid

from broker.handlers.cluster import valid_share_key

TOPIC_ID = base64.urlsafe_b64encode(uuid.UUID(int=12345).bytes).decode().rstrip("=")


def test_share_keys_as_kafka_parses_them():
    for key in (f"g:{TOPIC_ID}:0", f"g:{TOPIC_ID}:-1", f"g:{TOPIC_ID}:+7", f"a:b:{TOPIC_ID}:3",
                f"g:{TOPIC_ID}:0:", f"g:{TOPIC_ID}==:2147483647", f"g:{TOPIC_ID}:٣"):
        assert valid_share_key(key), key
    for key in ("bad", f"g:{TOPIC_ID}", f":{TOPIC_ID}:0", f"  :{TOPIC_ID}:0", f"g:{TOPIC_ID}: 1", f"g:{TOPIC_ID}:1_0",
                f"g:{TOPIC_ID}:2147483648", f"g:{uuid.UUID(int=1)}:0", f"g:{TOPIC_ID[:-1]}!:0", f"g:{TOPIC_ID}:",
                f"g:{TOPIC_ID}:-", f"g:{TOPIC_ID}:+"):
        assert not valid_share_key(key), key
