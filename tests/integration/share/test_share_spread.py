"""More share consumers than partitions: every consumer gets records, none twice (KIP-932 partition sharing)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from tests.helpers.confluent_clients import create_topic, produce_all
from tests.helpers.raw_client import RawClient
from tests.helpers.share_consumers import consumer, earliest, messages
from tests.helpers.share_raw import describe
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration


def all_reconciled(group, members: int) -> bool:
    """ShareGroupDescribe shows `members` members, each at the group's assignment epoch (it was sent the target
    assignment) and holding partitions."""
    return group.error_code == 0 and len(group.members) == members and all(
        m.member_epoch == group.assignment_epoch and m.assignment.topic_partitions for m in group.members)


def test_more_consumers_than_partitions_all_receive_records(broker):
    n = 20_000
    create_topic(broker.bootstrap, "spread", partitions=2)
    earliest(broker, "g-spread")
    consumers = [consumer(broker, "g-spread", "spread") for _ in range(4)]
    seen: list[list[tuple[int, int]]] = [[] for _ in consumers]
    done = threading.Event()

    def run(i: int) -> None:
        while not done.is_set():
            seen[i].extend((m.partition(), m.offset()) for m in messages(consumers[i], 0.3))
            if sum(len(s) for s in seen) >= n:
                done.set()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(consumers))]
    for t in threads:
        t.start()
    # Let every member get its assignment (members that joined early take the final one on their second
    # heartbeat, 5 s in), then produce in rounds with small batches, so each shared partition keeps offering
    # batches while all of its members are fetching.
    with RawClient(broker.port) as raw:
        wait_until(lambda: all_reconciled(describe(raw, "g-spread").groups[0], len(consumers)), 30,
                   "every member to hold its final assignment")
    delivered: list[tuple[int, int]] = []
    for start in range(0, n, n // 10):
        delivered += produce_all(broker.bootstrap, "spread", [f"s{i}".encode() for i in range(start, start + n // 10)],
                                 partition=None, **{"batch.size": 2000})
        time.sleep(0.2)  # pacing, not a wait: the rounds spread over time
    assert {p for p, _ in delivered} == {0, 1}
    done.wait(90)
    done.set()
    for t in threads:
        t.join(30)
    for c in consumers:
        c.close()
    every = [k for s in seen for k in s]
    assert not [k for k, cnt in Counter(every).items() if cnt > 1]
    assert set(every) == set(delivered)
    assert all(seen), f"a consumer got nothing: {[len(s) for s in seen]}"
