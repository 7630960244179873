"""Kafka's KafkaShareConsumer (4.4) against Kafka and Shoal: implicit and explicit acknowledgement (ACCEPT,
RELEASE, REJECT, RENEW), commitSync/commitAsync with acknowledgement commit callbacks, record_limit acquisition,
the delivery count limit, and the share-group admin calls (tests/java/src/shoal/javaclients/ShareScenarios.java).
One JVM per broker runs every scenario; each test compares one scenario's observations."""

from __future__ import annotations

import pytest

from tests.helpers import java_clients

pytestmark = pytest.mark.integration

# Kafka's ListShareGroupOffsets start offset is the one persisted with the share partition's last state write,
# taken before that write's acknowledgements moved it; Shoal's is the start offset after them.
START_OFFSET = "Kafka's Java clients: the start offset ListShareGroupOffsets reports"
LAG_PAST_END = "Kafka's Java clients: the lag of a share start offset past the end"

KNOWN = {
    "implicit": {
        ("start_offsets_after_commit", "share-implicit-0", "start_offset"): (0, 5, START_OFFSET),
        ("start_offsets_after_close", "share-implicit-0", "start_offset"): (0, 5, START_OFFSET),
        ("start_offsets", "share-implicit-0", "start_offset"): (5, 6, START_OFFSET),
    },
    "explicit": {
        ("start_offsets_before_sentinel", "share-explicit-0", "start_offset"): (1, 5, START_OFFSET),
        ("start_offsets", "share-explicit-0", "start_offset"): (5, 6, START_OFFSET),
    },
    "lock_expiry_callbacks": {
        ("start_offsets", "share-callbacks-0", "start_offset"): (0, 3, START_OFFSET),
    },
    "record_limit": {
        ("start_offsets", "share-record-limit-0", "start_offset"): (0, 5, START_OFFSET),
    },
    "delivery_limit": {
        ("start_offsets", "share-delivery-limit-0", "start_offset"): (2, 3, START_OFFSET),
    },
    "admin": {
        ("offsets_active", "share-admin-0", "start_offset"): (0, 2, START_OFFSET),
        ("offsets_active", "share-admin-1", "start_offset"): (0, 2, START_OFFSET),
        ("offsets_altered", "share-admin-1", "start_offset"): (0, 2, START_OFFSET),
        ("offsets_after_alters", "share-admin-1", "lag"): (None, 0, LAG_PAST_END),
    },
}
SCENARIOS = ["implicit", "explicit", "renew", "lock_expiry_callbacks", "record_limit", "delivery_limit", "admin"]


@pytest.fixture(scope="module")
def seen(pair):
    return java_clients.run_pair(pair, "share")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_share_consumer(seen, scenario):
    java_clients.compare(seen, scenario, KNOWN.get(scenario))
