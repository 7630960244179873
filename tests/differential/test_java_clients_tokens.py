"""Delegation tokens with Kafka's Admin client (4.4) against Kafka and Shoal, both SASL/SCRAM brokers with the
standard authorizer and a token secret (tests/java/src/shoal/javaclients/TokenScenarios.java): create, describe,
renew, log in with a token, expire. The run's shared SASL Kafka has no token secret (tokens disabled there, as
test_java_clients_security.py compares), so this module starts its own."""

from __future__ import annotations

import pytest

from tests.helpers import java_clients
from tests.helpers.differential import KAFKA, SHOAL, Pair, Target
from tests.helpers.kafka_process import SCRAM_USERS

pytestmark = pytest.mark.integration

TOKEN_SECRET = {"delegation.token.secret.key": "differential-token-secret"}


@pytest.fixture(scope="module")
def shoal_overrides() -> dict[str, str]:
    return dict(TOKEN_SECRET)


@pytest.fixture(scope="module")
def tokens_pair(kafka_single_factory, shoal_sasl_broker) -> Pair:
    kafka = kafka_single_factory("SASL_PLAINTEXT", TOKEN_SECRET)
    return Pair(Target(KAFKA, "127.0.0.1", kafka.port, security="SASL_PLAINTEXT", users=SCRAM_USERS, process=kafka),
                Target(SHOAL, "127.0.0.1", shoal_sasl_broker.port, security="SASL_PLAINTEXT", users=SCRAM_USERS,
                       process=shoal_sasl_broker))


@pytest.fixture(scope="module")
def seen(tokens_pair):
    return java_clients.run_pair(tokens_pair, "tokens")


def test_delegation_tokens(seen):
    java_clients.compare(seen, "tokens")
