"""Client-metrics `match` patterns are RE2's: matched against what clients send without backtracking, and what RE2
refuses is an illegal pattern (INVALID_CONFIG); a journaled subscription RE2 refuses is ignored, not fatal."""

from __future__ import annotations

import time
import uuid

import pytest

from broker.telemetry import subscriptions as sub
from broker.telemetry.manager import ZERO_UUID, ClientMetricsManager
from protocol.errors import ErrorCode as E


class Receiver:
    def forget(self, instance_id: uuid.UUID) -> None:
        pass


def manager() -> ClientMetricsManager:
    return ClientMetricsManager(max_bytes=1000, clock=lambda: 1_000_000, receiver=Receiver())


@pytest.mark.parametrize("pattern", ["client_id=(?=app)app.*", r"client_id=(a)\1", "client_id=["])
def test_patterns_re2_refuses_are_illegal(pattern):
    with pytest.raises(sub.SubscriptionError) as err:
        sub.validate("s", {"match": pattern})
    assert err.value.code == E.INVALID_CONFIG


def test_a_backtracking_pathology_in_a_pattern_costs_a_client_nothing():
    m = manager()
    m.update_subscription("s", {"metrics": "x", "match": "client_id=(a|aa)*b"})
    start = time.process_time()  # CPU, not wall time: a loaded machine's waits for a CPU are not the pattern's
    answer = m.get_subscriptions(ZERO_UUID, {sub.CLIENT_ID: "a" * 30_000}, 1)
    assert time.process_time() - start < 0.5  # Python's `re` backtracks for longer than the universe's age
    assert answer.error == E.NONE and answer.instance.metrics == ()


def test_a_journaled_subscription_re2_refuses_is_ignored():
    m = manager()
    m.update_subscription("old", {"metrics": "x", "match": "client_id=(?=app)app.*"})
    m.update_subscription("ok", {"metrics": "y", "match": "client_id=app.*"})
    assert m.get_subscriptions(ZERO_UUID, {sub.CLIENT_ID: "app-1"}, 1).instance.metrics == ("y",)
