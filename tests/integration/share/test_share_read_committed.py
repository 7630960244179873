"""Share groups and transactions over TCP (KIP-932 share.isolation.level): a read_committed share group gets the
committed records only, never an aborted transaction's, and an open transaction's once it commits; a
read_uncommitted group gets every data record. Transactions come from a confluent_kafka transactional Producer;
consumers are confluent_kafka ShareConsumers."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer, ShareConsumer

from tests.helpers.confluent_clients import admin_client, alter_group_config, create_topic, produce_all
from tests.helpers.share_consumers import consumer, messages

pytestmark = pytest.mark.integration


def txn_producer(broker, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(30)
    return p


def transaction(p: Producer, topic: str, values: list[str], *, commit: bool | None) -> None:
    """One transaction of `values`; commit, abort, or leave it open (None; its records are flushed)."""
    p.begin_transaction()
    for v in values:
        p.produce(topic, v.encode(), partition=0)
    p.flush(30)
    if commit is True:
        p.commit_transaction(30)
    elif commit is False:
        p.abort_transaction(30)


def plain(broker, topic: str, values: list[str]) -> None:
    assert len(produce_all(broker.bootstrap, topic, [v.encode() for v in values])) == len(values)


def group(broker, name: str, level: str | None) -> None:
    admin = admin_client(broker.bootstrap)
    alter_group_config(admin, name, "share.auto.offset.reset", "earliest")
    if level is not None:
        alter_group_config(admin, name, "share.isolation.level", level)


def receive(c: ShareConsumer, want: set[str], got: list[str], timeout: float = 30.0) -> None:
    """Poll until every value of `want` is in `got` (everything received is appended)."""
    end = time.monotonic() + timeout
    while not want <= set(got):
        assert time.monotonic() < end, f"missing {sorted(want - set(got))}; got {got}"
        got.extend(m.value().decode() for m in messages(c, 0.5))


def quiet(c: ShareConsumer, got: list[str], seconds: float) -> None:
    """Keep polling for `seconds` (asserting that nothing more arrives is the caller's job)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got.extend(m.value().decode() for m in messages(c, 0.3))


def test_read_committed_share_group_gets_committed_records_only(broker):
    topic = "src-txn"
    create_topic(broker.bootstrap, topic, 1)
    group(broker, "g-rc", "read_committed")
    group(broker, "g-ru", None)  # the default, read_uncommitted
    committer, opener = txn_producer(broker, "tx-a"), txn_producer(broker, "tx-open")
    transaction(committer, topic, ["c1", "c2", "c3"], commit=True)
    transaction(committer, topic, ["a1", "a2"], commit=False)
    plain(broker, topic, ["p1"])
    transaction(opener, topic, ["o1", "o2"], commit=None)  # the LSO stays here
    plain(broker, topic, ["p2"])
    transaction(committer, topic, ["c4"], commit=True)  # committed, but past the open transaction

    rc, ru = consumer(broker, "g-rc", topic), consumer(broker, "g-ru", topic)
    got_rc: list[str] = []
    got_ru: list[str] = []
    try:
        receive(rc, {"c1", "c2", "c3", "p1"}, got_rc)
        receive(ru, {"c1", "c2", "c3", "a1", "a2", "p1", "o1", "o2", "p2", "c4"}, got_ru)
        quiet(rc, got_rc, 2.0)
        assert sorted(got_rc) == ["c1", "c2", "c3", "p1"], "read_committed went past the LSO or got aborted data"

        transaction(committer, topic, ["a3"], commit=False)
        opener.commit_transaction(30)  # the LSO moves to the end: a parked share fetch must wake
        receive(rc, {"o1", "o2", "p2", "c4"}, got_rc)
        quiet(rc, got_rc, 1.0)
        quiet(ru, got_ru, 1.0)
    finally:
        rc.close()
        ru.close()
    assert sorted(got_rc) == ["c1", "c2", "c3", "c4", "o1", "o2", "p1", "p2"]  # each once, no aborted record
    assert sorted(got_ru) == ["a1", "a2", "a3", "c1", "c2", "c3", "c4", "o1", "o2", "p1", "p2"]  # no marker


def test_switching_a_group_to_read_committed_takes_effect_on_the_next_fetch(broker):
    topic = "src-switch"
    create_topic(broker.bootstrap, topic, 1)
    group(broker, "g-switch", "read_uncommitted")
    p = txn_producer(broker, "tx-switch")
    transaction(p, topic, ["u1"], commit=None)
    c = consumer(broker, "g-switch", topic)
    got: list[str] = []
    try:
        receive(c, {"u1"}, got)  # read_uncommitted: an open transaction's record
        p.commit_transaction(30)
        alter_group_config(admin_client(broker.bootstrap), "g-switch", "share.isolation.level", "read_committed")
        transaction(p, topic, ["d1", "d2"], commit=None)
        plain(broker, topic, ["q1"])
        quiet(c, got, 2.0)
        assert got == ["u1"], "read_committed delivered past the open transaction"
        p.abort_transaction(30)
        receive(c, {"q1"}, got)
        quiet(c, got, 1.0)
    finally:
        c.close()
    assert got == ["u1", "q1"]
