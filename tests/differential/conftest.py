"""Fixtures of the differential suite: each test runs its scenario against Kafka 4.4 and against Shoal.

pair        the run's shared single-node Kafka (tests/helpers/kafka_fixtures.py, its share coordinator warmed once:
            warm_kafka) and a Shoal broker for the test
            module, PLAINTEXT, both with the referee's settings (REFEREE_CONFIG)
sasl_pair   the run's shared SASL Kafka and a Shoal broker for the module with the same listener, users and
            authorizer: SASL_PLAINTEXT with SCRAM-SHA-256/512, users `admin` (a super user) and `alice` (what ACLs
            grant her), StandardAuthorizer

A module may override `shoal_overrides` to start its Shoal with more settings; a setting the Kafka fixture does not
share makes the comparison unfair unless the module also applies it on Kafka's side (group and topic configs can be
set per resource on both).
"""

from __future__ import annotations

import pytest

from tests.helpers.broker_process import start_broker
from tests.helpers.differential import KAFKA, SHOAL, Pair, Target
from tests.helpers.kafka_process import REFEREE_CONFIG, SCRAM_MECHANISMS, SCRAM_USERS, STANDARD_AUTHORIZER
from tests.helpers.share_differential import warm_share_coordinator


@pytest.fixture(scope="module")
def shoal_overrides() -> dict[str, str]:
    return {}


@pytest.fixture(scope="module")
def shoal_broker(tmp_path_factory, shoal_overrides):
    proc = start_broker(tmp_path_factory.mktemp("shoal"), {**REFEREE_CONFIG, **shoal_overrides})
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def warm_kafka(kafka):
    """The shared Kafka with its share coordinator in use (share_differential.warm_share_coordinator), so that a
    module's first share group is not the first of the run on Kafka's side only."""
    warm_share_coordinator(Target(KAFKA, "127.0.0.1", kafka.port, process=kafka))
    return kafka


@pytest.fixture(scope="module")
def pair(warm_kafka, shoal_broker) -> Pair:
    return Pair(Target(KAFKA, "127.0.0.1", warm_kafka.port, process=warm_kafka),
                Target(SHOAL, "127.0.0.1", shoal_broker.port, process=shoal_broker))


@pytest.fixture(scope="module")
def shoal_sasl_broker(tmp_path_factory, shoal_overrides):
    overrides = {**REFEREE_CONFIG, "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                 "sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS),
                 "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin", **shoal_overrides}
    scram = [arg for user, password in SCRAM_USERS.items() for mechanism in SCRAM_MECHANISMS
             for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")]
    proc = start_broker(tmp_path_factory.mktemp("shoal-sasl"), overrides, scram)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def sasl_pair(kafka_sasl, shoal_sasl_broker) -> Pair:
    return Pair(Target(KAFKA, "127.0.0.1", kafka_sasl.port, security="SASL_PLAINTEXT", users=SCRAM_USERS,
                       process=kafka_sasl),
                Target(SHOAL, "127.0.0.1", shoal_sasl_broker.port, security="SASL_PLAINTEXT", users=SCRAM_USERS,
                       process=shoal_sasl_broker))
