"""group.initial.rebalance.delay.ms with real confluent-kafka (librdkafka) classic-protocol consumers.

Shoal's default is 0 (as Kafka's own config/server.properties): a new classic group forms as soon as its first
member has joined, so members that start together may see one extra rebalance (docs/features.md, consumer
groups). With Kafka's default of 3000 the members that start together land in one generation: each is assigned
once, never revoked.
"""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer

from tests.helpers.broker_process import start_broker
from tests.helpers.confluent_clients import create_topic, produce_all
from tests.helpers.waiting import wait_until


class _Member:
    def __init__(self, bootstrap: str, group: str, instance: str, pattern: str, strategy: str = "range") -> None:
        self.assigns: list[set[int]] = []
        self.revokes: list[set[int]] = []
        self.owned: set[int] = set()
        self.records = 0
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": instance,
                                   "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                   "partition.assignment.strategy": strategy, "session.timeout.ms": 10000,
                                   "topic.metadata.refresh.interval.ms": 1000})
        self._consumer.subscribe([pattern], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_assign(self, _c, partitions) -> None:
        got = {tp.partition for tp in partitions}
        self.assigns.append(got)
        self.owned |= got

    def _on_revoke(self, _c, partitions) -> None:
        got = {tp.partition for tp in partitions}
        self.revokes.append(got)
        self.owned -= got

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self._consumer.consume(100, 0.1):
                if m.error() is None:
                    self.records += 1

    def start(self) -> _Member:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def _form(bootstrap: str, tag: str) -> tuple[list[_Member], list[set[int]]]:
    """Two static members of a new group subscribe to a regex matching a 3-partition topic; returns them (closed)
    and what each owned once both were consuming."""
    create_topic(bootstrap, f"gid-{tag}", 3)
    for p in range(3):
        assert len(produce_all(bootstrap, f"gid-{tag}", [b"v"] * 5, partition=p)) == 5
    members = [_Member(bootstrap, f"gid-g-{tag}", f"static-{i}", f"^gid-{tag}$").start() for i in range(2)]
    try:
        wait_until(lambda: sum(m.records for m in members) == 15 and all(m.owned for m in members)
                   and set().union(*(m.owned for m in members)) == {0, 1, 2}, 60, "both members consuming")
        owned = [set(m.owned) for m in members]
    finally:
        for m in members:
            m.close()
    return members, owned


@pytest.fixture
def kafka_delay(tmp_path):
    proc = start_broker(tmp_path, {"group.initial.rebalance.delay.ms": "3000"})
    try:
        yield proc
    finally:
        proc.stop()


def test_members_starting_together_form_one_generation_with_kafkas_delay(kafka_delay):
    members, owned = _form(kafka_delay.bootstrap, "delay")
    for m in members:
        # one assignment; the only revocation is the one of close()
        assert len(m.assigns) == 1 and m.revokes in ([], [m.assigns[0]]), (m.assigns, m.revokes)
    assert sorted(len(o) for o in owned) == [1, 2]


def test_with_the_default_delay_the_group_forms_at_once_and_converges(broker):
    members, owned = _form(broker.bootstrap, "nodelay")
    # at most one extra rebalance: the first member may get all partitions alone, then share them
    for m in members:
        assert 1 <= len(m.assigns) <= 2, (m.assigns, m.revokes)
    assert sorted(len(o) for o in owned) == [1, 2]
