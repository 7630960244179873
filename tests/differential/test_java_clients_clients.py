"""Kafka's KafkaConsumer and KafkaProducer (4.4) against Kafka and Shoal: consumers of group.protocol classic and
consumer (subscribe, poll, commitSync, committed, a second member joining and leaving, seek, position,
offsetsForTimes), an idempotent producer, and a transactional one (commit, abort, sendOffsetsToTransaction with a
live group's metadata and with a departed member's, fencing by a successor, what read_committed and
read_uncommitted consumers see) (tests/java/src/shoal/javaclients/ClientScenarios.java)."""

from __future__ import annotations

import pytest

from tests.helpers import java_clients

pytestmark = pytest.mark.integration

# Kafka 4.4 creates a consumer or share group at epoch 1, so its first member's join bumps it to 2; Shoal's
# groups start at 0.
GROUP_EPOCH = "Kafka's Java clients: group epochs"
# Kafka gives the successor of a producer fenced in an ongoing transaction (transaction.version 2) one epoch less
# than Shoal does.
FENCING_EPOCH = "Kafka's Java clients: epochs when an ongoing transaction is fenced"

KNOWN = {
    "consumer_consumer": {
        ("generation_alone",): (2, 1, GROUP_EPOCH),
        ("generations_shared", 0): (3, 2, GROUP_EPOCH),
        ("generations_shared", 1): (3, 2, GROUP_EPOCH),
        ("generation_after_leave",): (4, 3, GROUP_EPOCH),
    },
    "producer_transactional": {
        ("epochs", 4): (5, 6, FENCING_EPOCH),
        ("epochs", 5): (6, 7, FENCING_EPOCH),
        ("epochs", 6): (7, 8, FENCING_EPOCH),
        ("transaction", "producer_epoch"): (7, 8, FENCING_EPOCH),
    },
}
SCENARIOS = ["consumer_classic", "consumer_consumer", "producer_idempotent", "producer_transactional"]


@pytest.fixture(scope="module")
def seen(pair):
    return java_clients.run_pair(pair, "clients")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_client(seen, scenario):
    java_clients.compare(seen, scenario, KNOWN.get(scenario))
