"""A Kafka 4.4 node and a Shoal broker of one test's own, started side by side, for the differential scenarios the
run's shared Kafka cannot hold: a broker-wide setting it does not have (delegation tokens' secret), or a command over
every group or topic of a broker (on the shared Kafka, other tests' come and go meanwhile, and a deletion of all
groups would take theirs). Both get the referee's settings (REFEREE_CONFIG) and `overrides`; each is stopped by its
PID when the test is done. Costs a Kafka start (10-30 s on the loaded test machine): use it only where needed.

    with own_pair(tmp_path, kafka_registry) as pair:
        ...
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.broker_process import start_broker
from tests.helpers.differential import KAFKA, SHOAL, Pair, Target
from tests.helpers.kafka_process import (
    REFEREE_CONFIG,
    SCRAM_MECHANISMS,
    SCRAM_USERS,
    STANDARD_AUTHORIZER,
    start_single,
)

SASL = "SASL_PLAINTEXT"


@contextmanager
def own_pair(root: Path, registry: Path, *, security: str = "PLAINTEXT", overrides: Mapping[str, str] | None = None,
             label: str = "a test's own Kafka") -> Iterator[Pair]:
    """A Pair of a new Kafka node and a new Shoal broker under `root`; with security SASL_PLAINTEXT, SCRAM users
    `admin` (a super user) and `alice` and the StandardAuthorizer on both, as the `sasl_pair` fixture."""
    shoal_overrides = {**REFEREE_CONFIG, **(overrides or {})}
    scram: list[str] = []
    if security == SASL:
        shoal_overrides = {**REFEREE_CONFIG, "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                           "sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS),
                           "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin",
                           **(overrides or {})}
        scram = [arg for user, password in SCRAM_USERS.items() for mechanism in SCRAM_MECHANISMS
                 for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")]
    users = SCRAM_USERS if security == SASL else None
    with ThreadPoolExecutor(1) as pool:
        kafka_started = pool.submit(start_single, root / "kafka", security=security, overrides=overrides,
                                    registry=registry, label=label)
        try:
            shoal = start_broker(root / "shoal", shoal_overrides, scram)
        except BaseException:
            kafka = kafka_started.result()
            kafka.stop()
            raise
        try:
            kafka = kafka_started.result()
        except BaseException:
            shoal.stop()
            raise
    try:
        extra = {"security": security, "users": users} if users else {}
        yield Pair(Target(KAFKA, "127.0.0.1", kafka.port, process=kafka, **extra),
                   Target(SHOAL, "127.0.0.1", shoal.port, process=shoal, **extra))
    finally:
        shoal.stop()
        kafka.stop()
