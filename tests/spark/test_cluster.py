"""The streaming source on a three-broker Kafka 4.4 cluster (KRaft, replication factor 3, min.insync.replicas=2,
partition leaders on every broker): one query reads while records are produced and the group coordinator's
broker is stopped (SIGTERM), restarted, and the next coordinator's broker killed (SIGKILL) and restarted. Every
record is written at least once and none is lost, and deliveryCount is what the brokers report: records released
twice before the query started come with 3.

One cluster and one Spark session for the module (start-up costs ~1 min and ~8 s). The figures (produced,
written, written again, lost) are printed (`pytest -s` or `-rP`)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest

from shoal_client import RELEASE, ShareGroupMember, acknowledgements
from tests.helpers import cluster_ops as ops
from tests.helpers.confluent_clients import share_from_earliest
from tests.spark.helpers import check_row, produce, read_rows, wait_until, written

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PARTITIONS = 6
PRE = 300  # records released twice before the query starts
PER_TRIGGER = 600


@pytest.fixture(scope="module")
def kafka_cluster_overrides() -> dict[str, str]:
    # A killed broker is fenced within ~3 s (9 s by default); assignments come with 0.5 s heartbeats.
    return {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
            "group.share.heartbeat.interval.ms": "500"}


class NumberedProducer(threading.Thread):
    """Produces tests.spark.helpers' numbered records (acks=all, idempotent) in rounds until stopped; `produced`
    is the next number, every one below it acknowledged by the brokers."""

    def __init__(self, bootstrap: str, topic: str, start: int, per_round: int = 200) -> None:
        super().__init__(daemon=True, name="numbered-producer")
        self.bootstrap, self.topic, self.produced, self.per_round = bootstrap, topic, start, per_round
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                produce(self.bootstrap, self.topic, self.produced, self.per_round, partitions=PARTITIONS)
                self.produced += self.per_round
                self._halt.wait(0.3)
        except BaseException as err:  # noqa: BLE001 - reported by stop()
            self.error = err

    def stop(self) -> int:
        self._halt.set()
        self.join(300)
        assert self.error is None, self.error
        return self.produced


def release_twice(bootstrap: str, group: str, topic: str, count: int) -> None:
    """A member acquires the `count` records there are, RELEASEs them, and does it again: the next delivery of
    each is its third."""
    with ShareGroupMember(bootstrap, group, [topic], client_id="releaser") as member:
        assert member.wait_for_assignment(30)
        for delivery in (1, 2):
            got: list = []

            def acquired(got: list = got) -> bool:
                got.extend(member.fetch(max_records=count, max_bytes=8 << 20, max_wait_ms=300).acquired)
                return sum(a.count for a in got) >= count

            wait_until(acquired, 60, f"delivery {delivery} of the first records")
            assert {d for a in got for _, _, d in a.ranges} == {delivery}
            assert member.acknowledge(acknowledgements(got, RELEASE)) == {}


def deliveries(out: Path) -> dict[int, list[int]]:
    """record number -> the deliveryCount of each time it was written, in batch order."""
    seen: dict[int, list[int]] = {}
    for row in read_rows(out):
        seen.setdefault(check_row(row), []).append(row["deliveryCount"])
    return seen


def test_a_query_reads_through_a_sigterm_and_a_sigkill_losing_nothing(spark, kafka_cluster, tmp_path):
    tag = uuid.uuid4().hex[:6]
    topic, group = f"spark-{tag}", f"g-spark-{tag}"
    ops.create_spread_topic(kafka_cluster, topic, PARTITIONS)
    share_from_earliest(kafka_cluster.bootstrap, group)
    produce(kafka_cluster.bootstrap, topic, 0, PRE, partitions=PARTITIONS)
    release_twice(kafka_cluster.bootstrap, group, topic, PRE)

    out = tmp_path / "out"

    def write(df, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(str(out / f"batch={batch_id:06d}"))

    df = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", kafka_cluster.bootstrap)
          .option("subscribe", topic).option("group.id", group).option("maxRecordsPerTrigger", str(PER_TRIGGER))
          .load())
    q = (df.writeStream.foreachBatch(write).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="300 milliseconds").start())
    producer = NumberedProducer(kafka_cluster.bootstrap, topic, PRE)
    victims = []
    try:
        wait_until(lambda: set(range(PRE)) <= set(written(out)), 180, "the records released twice")
        producer.start()
        for stop in ("stop", "kill9"):  # SIGTERM, then SIGKILL, of the group coordinator's broker of the time
            victim = kafka_cluster.node(ops.group_coordinator(kafka_cluster, group))
            victims.append(victim)
            before = producer.produced
            getattr(victim, stop)()
            ops.wait_for_failover(kafka_cluster, topic, victim.node_id)
            # the query goes on while the broker is down: records produced since are written
            wait_until(lambda b=before: set(range(b)) <= set(written(out)), 180,
                       f"the records produced before the {stop} of broker {victim.node_id}")
            assert q.isActive, q.exception()
            victim.start()
            ops.wait_for_full_isr(kafka_cluster, [topic])
        produced = producer.stop()
        wait_until(lambda: set(range(produced)) <= set(written(out)), 240, "every record produced")
        assert q.isActive and q.exception() is None
    finally:
        if producer.is_alive():
            producer.stop()
        q.stop()
        for victim in victims:
            if not victim.alive():
                victim.start()
    seen = deliveries(out)
    counts = Counter({n: len(ds) for n, ds in seen.items()})
    lost = set(range(produced)) - set(seen)
    rows = sum(counts.values())
    print(f"Spark source, SIGTERM of broker {victims[0].node_id} then SIGKILL of broker {victims[1].node_id}: "
          f"produced {produced}, written {len(seen)}, written again {rows - len(seen)}, lost {len(lost)}; "
          f"highest deliveryCount {max(d for ds in seen.values() for d in ds)}")
    assert not lost and set(seen) == set(range(produced))
    # deliveryCount as the brokers report it: the third delivery of the records released twice (they were all
    # written before the first broker stopped), and at least 1 for every other
    assert all(seen[n][0] == 3 for n in range(PRE)), {n: seen[n] for n in range(PRE) if seen[n][0] != 3}
    assert all(d >= 1 for ds in seen.values() for d in ds)
