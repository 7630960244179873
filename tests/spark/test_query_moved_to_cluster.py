"""A streaming query moved with its share group from Shoal to a three-broker Kafka 4.4 cluster, as
docs/operations.md says: stop the query (it releases what it holds and leaves the group), `shoal-migrate copy`
and `groups`, start it again with the same checkpointLocation and the cluster's `kafka.bootstrap.servers`. It
goes on from the group's start offset: every record is written, none lost, and only records the query held when
it stopped (or acknowledged above the start offset) are written again. The figures are printed (`pytest -s`)."""

from __future__ import annotations

from collections import Counter

import pytest

from shoal_client.admin import ShareGroupAdmin
from tests.helpers.confluent_clients import share_from_earliest
from tests.helpers.console_scripts import run_script
from tests.spark.helpers import check_row as number_of
from tests.spark.helpers import create_topic, produce, read_rows, start_broker, wait_until, written

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PARTITIONS = 3
ON_SHOAL, ON_CLUSTER = 1500, 500
PER_TRIGGER = 200


def start_query(spark, bootstrap: str, out, checkpoint):
    def write(df, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(str(out / f"batch={batch_id:06d}"))

    df = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", "events").option("group.id", "spark-app")
          .option("maxRecordsPerTrigger", str(PER_TRIGGER)).load())
    return (df.writeStream.foreachBatch(write).option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds").start())


def migrate(*args: str) -> str:
    done = run_script("shoal-migrate", *args, timeout=300)
    assert done.returncode == 0, f"shoal-migrate {args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_a_query_moves_to_the_cluster_with_its_checkpoint(spark, kafka_cluster, tmp_path) -> None:
    shoal = start_broker(tmp_path / "shoal")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    q = None
    try:
        create_topic(shoal.bootstrap, "events", PARTITIONS)
        share_from_earliest(shoal.bootstrap, "spark-app")
        produce(shoal.bootstrap, "events", 0, ON_SHOAL, partitions=PARTITIONS)
        q = start_query(spark, shoal.bootstrap, out, checkpoint)
        # stopped mid-stream: some batches written, the rest of the records not yet read
        wait_until(lambda: len(written(out)) >= ON_SHOAL // 3, 180, "a third of the records written on Shoal")
        q.stop()
        q = None
        on_shoal = written(out)
        assert len(on_shoal) < ON_SHOAL, "the query read everything before it was stopped"
        with ShareGroupAdmin(shoal.bootstrap) as admin:
            wait_until(lambda: dict(admin.list_groups(types=("share",))).get("spark-app") == "Empty", 60,
                       "the query to leave its share group")
            start = {o.partition: o.start_offset for o in admin.share_group_offsets("spark-app")}

        state = tmp_path / "migration.json"
        common = ["--source", shoal.bootstrap, "--target", kafka_cluster.bootstrap]
        assert f"Copied {ON_SHOAL} records" in migrate("copy", *common, "--state", str(state))
        groups = migrate("groups", *common, "--state", str(state))
        for p, offset in start.items():
            assert f"spark-app events {p} {offset} -> {offset}" in groups, groups

        q = start_query(spark, kafka_cluster.bootstrap, out, checkpoint)  # same checkpoint, the cluster
        produce(kafka_cluster.bootstrap, "events", ON_SHOAL, ON_CLUSTER, partitions=PARTITIONS)
        total = ON_SHOAL + ON_CLUSTER
        wait_until(lambda: set(range(total)) <= set(written(out)), 300, "every record written")
        assert q.isActive and q.exception() is None
    finally:
        if q is not None:
            q.stop()
        shoal.stop()
    counts = Counter(number_of(row) for row in read_rows(out))
    lost = set(range(total)) - set(counts)
    again = sum(counts.values()) - len(counts)
    again_from_shoal = sum(1 for n in on_shoal if counts[n] > 1)
    below_start = sum(1 for n in on_shoal if n // PARTITIONS < start[n % PARTITIONS])  # record n: offset n // 3
    print(f"\n[figures] Spark query moved from Shoal to the cluster: produced {total}, written {len(counts)}, "
          f"written again {again} (of the {len(on_shoal)} written on Shoal: {below_start} below the start offsets "
          f"{start}, {again_from_shoal} written again), lost {len(lost)}")
    assert not lost and set(counts) == set(range(total))
    # Only what the query held when it stopped comes again: the batch in flight (written, not yet acknowledged).
    assert again == again_from_shoal and again <= 2 * PER_TRIGGER, again
    # Records written on Shoal below the group's start offset are not written again on the cluster.
    assert all(counts[n] == 1 for n in on_shoal if n // PARTITIONS < start[n % PARTITIONS])
