"""Records the cut-over tests write to the source before migrating (tests/integration/clients/
test_migration_to_cluster.py to a second Shoal, tests/kafka/test_migrate_to_cluster.py to a Kafka cluster,
tests/kafka/test_mirror_maker_to_cluster.py with MirrorMaker 2)."""

from __future__ import annotations

from confluent_kafka import Producer


def produce_orders(bootstrap: str, indexes: range, *, t0: int, flush_timeout_s: float) -> None:
    """Record i of topic "orders": partition i % 3, key k<i>, value v<i>, one header, timestamp t0 + i."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in indexes:
        p.produce("orders", value=f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 3,
                  headers=[("h", str(i).encode())], timestamp=t0 + i)
    assert p.flush(flush_timeout_s) == 0


def transactional_producer(bootstrap: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "payments-writer", "linger.ms": 0})
    p.init_transactions(60)
    return p


def write_payments(p: Producer, runs: list[tuple[range, bool]]) -> None:
    """One transaction per run to topic "payments", partition 0: values p<i> committed, x<i> aborted."""
    for values, commit in runs:
        p.begin_transaction()
        for i in values:
            p.produce("payments", f"{'p' if commit else 'x'}{i}".encode(), partition=0)
        p.flush(60)
        (p.commit_transaction if commit else p.abort_transaction)(60)
