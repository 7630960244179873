"""Transaction metrics scraped over HTTP while a confluent-kafka transaction is open, and after it commits: the
coordinator's transactional ids by state and open transactions, and the LSO lag of the partitions it holds back
(only those: partitions without an open transaction or lag export no series)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.helpers.confluent_clients import create_topic
from tests.helpers.prometheus_scrape import scrape, value
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "tm-topic"




def test_transaction_metrics_while_a_transaction_is_open(broker_factory):
    broker = broker_factory({"metrics.prometheus.listener": "127.0.0.1:0"})
    port = broker.ports["prometheus"]
    create_topic(broker.bootstrap, TOPIC, 2)
    s = scrape(port)
    assert value(s, "shoal_transactional_ids") == 0 and value(s, "shoal_transactions_ongoing") == 0

    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tm-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(TOPIC, f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    p0 = {"topic": TOPIC, "partition": "0"}
    s = scrape(port)
    assert value(s, "shoal_transactional_ids") == 1
    assert value(s, "shoal_transactions_ongoing") == 1
    assert value(s, "shoal_transactions", state="Ongoing") == 1
    assert value(s, "shoal_partition_lso_lag", **p0) == 3  # the three open records
    assert value(s, "shoal_partition_open_transactions", **p0) == 1
    assert value(s, "shoal_partition_lso_lag", topic=TOPIC, partition="1") is None  # no series without a txn

    p.commit_transaction(30)
    wait_until(lambda: value(scrape(port), "shoal_transactions", state="CompleteCommit") == 1, 30, "completed")
    s = scrape(port)
    assert value(s, "shoal_transactions_ongoing") == 0
    assert value(s, "shoal_transactions", state="Ongoing") is None
    assert value(s, "shoal_partition_lso_lag", **p0) is None  # lag 0 and nothing open: the series is gone
    assert value(s, "shoal_partition_open_transactions", **p0) is None
