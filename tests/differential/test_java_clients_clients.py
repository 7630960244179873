"""Kafka's KafkaConsumer and KafkaProducer (4.4) against Kafka and Shoal: consumers of group.protocol classic and
consumer (subscribe, poll, commitSync, committed, a second member joining and leaving, seek, position,
offsetsForTimes), an idempotent producer, and a transactional one (commit, abort, sendOffsetsToTransaction with a
live group's metadata and with a departed member's, fencing by a successor, what read_committed and
read_uncommitted consumers see) (tests/java/src/shoal/javaclients/ClientScenarios.java)."""

from __future__ import annotations

import pytest

from tests.helpers import java_clients

pytestmark = pytest.mark.integration

SCENARIOS = ["consumer_classic", "consumer_consumer", "producer_idempotent", "producer_transactional"]


@pytest.fixture(scope="module")
def seen(pair):
    return java_clients.run_pair(pair, "clients")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_client(seen, scenario):
    java_clients.compare(seen, scenario)
