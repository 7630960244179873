"""Kafka's Admin client (4.4) against Kafka and Shoal on SASL/SCRAM brokers with the standard authorizer: SCRAM
credentials (describe, upsert, delete, and logging in with them), ACLs (create, describe, delete, and what they
let alice do), delegation tokens on a broker without a token secret (tests/java/src/shoal/javaclients/
SecurityScenarios.java; tokens with a secret are in test_java_clients_tokens.py)."""

from __future__ import annotations

import pytest

from tests.helpers import java_clients

pytestmark = pytest.mark.integration

SCENARIOS = ["scram", "acls", "tokens_disabled"]


@pytest.fixture(scope="module")
def seen(sasl_pair):
    return java_clients.run_pair(sasl_pair, "security")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_security_admin(seen, scenario):
    java_clients.compare(seen, scenario)
