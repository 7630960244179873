"""Option parsing of the shoal source and how acquired data is cut into InputPartitions (no SparkSession)."""

from __future__ import annotations

import pickle

import pytest

from protocol.records import Record, build_batch
from shoal_spark.options import DEFAULT_MAX_BYTES_PER_TRIGGER, parse_options
from shoal_spark.partitions import Chunk, plan

REQUIRED = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a, b,a", "group.id": "g"}


def test_required_and_defaults() -> None:
    o = parse_options(REQUIRED)
    assert o.topics == ("a", "b") and o.group_id == "g" and o.max_records_per_trigger is None
    assert o.max_bytes_per_trigger == DEFAULT_MAX_BYTES_PER_TRIGGER and o.min_partitions == 1
    assert o.acquire_ahead and not parse_options({**REQUIRED, "acquireahead": "False"}).acquire_ahead
    assert pickle.loads(pickle.dumps(o)) == o


def test_names_are_case_insensitive_as_spark_hands_them_over() -> None:
    o = parse_options({k.lower(): v for k, v in {**REQUIRED, "maxRecordsPerTrigger": "7"}.items()})
    assert o.max_records_per_trigger == 7 and "maxRecordsPerTrigger" in o.given


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a", "group.id": "g"}, "needs option\\(s\\) kafka.bootstrap.servers"),
    ({**REQUIRED, "subscribe": " , "}, "at least one topic"),
    ({**REQUIRED, "kafka.bootstrap.servers": "nohost"}, "not host:port"),
    ({**REQUIRED, "maxRecordsPerTrigger": "0"}, "must be positive"),
    ({**REQUIRED, "maxBytesPerTrigger": "lots"}, "must be an integer"),
    ({**REQUIRED, "startingOffsets": "earliest"}, "unknown option\\(s\\) for the shoal source: startingOffsets"),
    ({**REQUIRED, "mode": "steal"}, "must be one of peek, drain"),
    ({**REQUIRED, "acquireAhead": "yes"}, "'acquireAhead' must be true or false"),
])
def test_bad_options_say_what_is_wrong(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_options(options)


def test_options_of_the_other_kind_of_read_are_refused() -> None:
    with pytest.raises(ValueError, match="mode only apply to batch"):
        parse_options({**REQUIRED, "mode": "drain"}).check_for("stream")
    with pytest.raises(ValueError, match="maxRecordsPerTrigger only apply to streaming"):
        parse_options({**REQUIRED, "maxRecordsPerTrigger": "5"}).check_for("batch")


def _chunk(partition: int, batches: int) -> Chunk:
    raw = b"".join(build_batch([Record(value=b"x" * 100)] * 10, base_offset=10 * i, timestamp=1_700_000_000_000)
                   for i in range(batches))
    return Chunk("t", partition, raw, ((0, 10 * batches - 1, 1),))


def test_plan_one_partition_per_chunk_and_min_partitions_cut_at_batch_boundaries() -> None:
    assert [len(p.chunks) for p in plan([_chunk(0, 4), _chunk(1, 4)], 1)] == [1, 1]
    parts = plan([_chunk(0, 8)], 4)
    assert len(parts) == 4
    assert b"".join(p.chunks[0].records for p in parts) == _chunk(0, 8).records
    assert len(plan([_chunk(0, 1)], 4)) == 1  # a single batch cannot be cut
    assert plan([], 3) == []
    restored = pickle.loads(pickle.dumps(parts[0]))
    assert restored.chunks == parts[0].chunks and restored.index == 0


def test_plan_packs_chunks_into_max_partitions_by_size() -> None:
    chunks = [_chunk(p, n) for p, n in enumerate([8, 1, 1, 4, 2])]
    parts = plan(chunks, 1, 2)
    assert len(parts) == 2
    assert sorted(c.partition for p in parts for c in p.chunks) == [0, 1, 2, 3, 4]
    sizes = sorted(sum(len(c.records) for c in p.chunks) for p in parts)
    assert sizes[1] - sizes[0] <= len(_chunk(0, 1).records) * 2  # balanced by bytes
    with pytest.raises(ValueError, match="must not exceed 'maxPartitions'"):
        parse_options({**REQUIRED, "minPartitions": "3", "maxPartitions": "2"})


def test_without_max_partitions_a_partition_carries_about_8_mib() -> None:
    from shoal_spark.partitions import DEFAULT_BYTES_PER_PARTITION, default_max_partitions

    small = [_chunk(p, 2) for p in range(32)]  # 32 topic-partitions, a few KB each: one task
    assert default_max_partitions(small, 1) == 1
    assert len(plan(small, 1, default_max_partitions(small, 1))) == 1
    assert default_max_partitions(small, 3) == 3  # minPartitions still wins
    big = [Chunk("t", p, b"\0" * (DEFAULT_BYTES_PER_PARTITION // 2 + 1), ((0, 0, 1),)) for p in range(5)]
    assert default_max_partitions(big, 1) == 3  # 2.5 x 8 MiB, rounded up
    assert default_max_partitions([], 1) == 1


def test_reading_a_partition_freezes_the_worker_heap_once() -> None:
    # PySpark's reused worker runs gc.collect() after every task; a frozen heap keeps that cheap.
    import subprocess
    import sys

    code = (
        "import gc\n"
        "from protocol.records import Record, build_batch\n"
        "from shoal_spark.partitions import Chunk, ShoalInputPartition, read\n"
        "raw = build_batch([Record(value=b'v')] * 3)\n"
        "assert gc.get_freeze_count() == 0\n"
        "rows = sum(b.num_rows for b in read(ShoalInputPartition(0, [Chunk('t', 0, raw, ((0, 2, 1),))])))\n"
        "frozen = gc.get_freeze_count()\n"
        "assert rows == 3 and frozen > 1000, (rows, frozen)\n"
        "list(read(ShoalInputPartition(1, [Chunk('t', 0, raw, ((0, 2, 1),))])))\n"
        "assert gc.get_freeze_count() == frozen  # once per worker\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
