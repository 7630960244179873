"""confluent_kafka.ShareConsumer helpers for tests: make a member of a share group, poll its messages, drain
it, set a topic up with records for it, and poll members until each was served (see bounded_close for closing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from confluent_kafka import ShareConsumer

from tests.helpers.confluent_clients import create_topic, produce_all, share_from_earliest

Key = tuple[int, int]  # (partition, offset)


def poll_until_served(consumers: Sequence[ShareConsumer], check: Callable[[list[set[int]]], bool],
                      timeout: float = 30.0) -> list[set[int]]:
    """Poll the consumers until `check(partitions each consumer received records from)` holds, and return those
    sets. A record from a partition shows that the consumer applied an assignment holding it and opened its
    share session there (the broker serves a member only its assigned partitions)."""
    end = time.monotonic() + timeout
    served: list[set[int]] = [set() for _ in consumers]
    while not check(served):
        assert time.monotonic() < end, f"consumers were served partitions {served} after {timeout:.0f} s"
        for c, parts in zip(consumers, served, strict=True):
            for m in c.poll(0.1):
                assert m.error() is None, m.error()
                parts.add(m.partition())
    return served


def earliest(broker, group: str) -> None:
    share_from_earliest(broker.bootstrap, group)


def consumer(broker, group: str, topic: str, mode: str = "implicit", **conf) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "share.acknowledgement.mode": mode, **conf})
    c.subscribe([topic])
    return c


def messages(c: ShareConsumer, timeout: float = 1.0) -> list:
    out = []
    for m in c.poll(timeout):
        assert m.error() is None, m.error()
        out.append(m)
    return out


def drain(c: ShareConsumer, want: int, deadline_s: float, seen: list) -> None:
    end = time.monotonic() + deadline_s
    while len(seen) < want and time.monotonic() < end:
        seen.extend((m.partition(), m.offset()) for m in messages(c))


def setup(broker, topic: str, group: str, n: int, partitions: int = 2, *, produce: bool = True) -> set[Key]:
    create_topic(broker.bootstrap, topic, partitions)
    earliest(broker, group)
    return send(broker, topic, n) if produce else set()


def send(broker, topic: str, n: int) -> set[Key]:
    # Small producer batches (~100 records): acquisition takes whole batches, so big ones would go to one consumer.
    delivered = produce_all(broker.bootstrap, topic, [f"r{i}".encode() for i in range(n)], **{"batch.size": 2000})
    assert len(delivered) == n
    return set(delivered)
