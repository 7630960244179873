"""Acquired data travelling to executors: InputPartitions carrying raw record batches plus acquired ranges.

`plan(chunks, min_partitions, max_partitions)` splits what one micro-batch acquired into InputPartitions: one per
acquired topic-partition, big ones cut at record-batch boundaries until there are at least `min_partitions` (as
Spark's Kafka source does with minPartitions), then packed into `max_partitions` at most. Without maxPartitions
the bound is one partition per DEFAULT_BYTES_PER_PARTITION acquired (`default_max_partitions`): a task costs tens
of ms of fixed work in the JVM and the Python worker whatever it carries, so a task per small topic-partition
share made many-partition topics slow. `read(partition)` runs on an executor and yields Arrow RecordBatches.
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import SupportsIndex

from pyspark.sql.datasource import InputPartition

from protocol.records import iter_batches

DEFAULT_BYTES_PER_PARTITION = 8 << 20


@dataclass(frozen=True)
class Chunk:
    """Record batches of one topic-partition and the acquired (first, last, delivery count) ranges among them."""

    topic: str
    partition: int
    records: bytes | memoryview  # in the runner a read-only slice of the ShareFetch response; bytes on executors
    ranges: tuple[tuple[int, int, int], ...]

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple:
        # PySpark pickles InputPartitions with protocol 5, where a PickleBuffer over the response slice goes
        # straight into the pickle: the one copy the runner makes of the bytes (unpickled as bytes).
        records: bytes | memoryview | pickle.PickleBuffer = self.records
        if isinstance(records, memoryview):
            records = pickle.PickleBuffer(records) if int(protocol) >= 5 else bytes(records)
        return Chunk, (self.topic, self.partition, records, self.ranges)


class ShoalInputPartition(InputPartition):
    def __init__(self, index: int, chunks: Sequence[Chunk]) -> None:
        super().__init__(index)
        self.index = index
        self.chunks = tuple(chunks)

    def __repr__(self) -> str:
        size = sum(len(c.records) for c in self.chunks)
        return f"ShoalInputPartition({self.index}, {len(self.chunks)} chunks, {size} bytes)"


def _split(chunk: Chunk, pieces: int) -> list[Chunk]:
    """Cut a chunk at batch boundaries into up to `pieces` parts of similar size (each keeps all ranges:
    the decoder only takes the acquired offsets that are inside its own batches)."""
    bounds = [pos for pos, _ in iter_batches(chunk.records)] + [len(chunk.records)]
    if pieces <= 1 or len(bounds) <= 2:
        return [chunk]
    target = len(chunk.records) / pieces
    out: list[Chunk] = []
    start = 0
    for pos in bounds[1:]:
        if pos - start >= target or pos == len(chunk.records):
            out.append(Chunk(chunk.topic, chunk.partition, chunk.records[start:pos], chunk.ranges))
            start = pos
    return out


def default_max_partitions(chunks: Sequence[Chunk], min_partitions: int) -> int:
    """The bound on partitions when maxPartitions is not set: one per DEFAULT_BYTES_PER_PARTITION of record
    batches (rounded up), at least one and at least `min_partitions`."""
    size = sum(len(c.records) for c in chunks)
    return max(1, min_partitions, -(-size // DEFAULT_BYTES_PER_PARTITION))


def plan(chunks: Sequence[Chunk], min_partitions: int, max_partitions: int | None = None
         ) -> list[ShoalInputPartition]:
    """One InputPartition per chunk, big chunks cut until there are `min_partitions`; with `max_partitions`,
    chunks are then packed (largest first, into the lightest partition) so there are no more than that."""
    parts = list(chunks)
    while 0 < len(parts) < min_partitions:
        biggest = max(range(len(parts)), key=lambda i: len(parts[i].records))
        split = _split(parts[biggest], min_partitions - len(parts) + 1)
        if len(split) == 1:
            break  # nothing left to cut (single batches)
        parts[biggest:biggest + 1] = split
    if max_partitions is None or len(parts) <= max_partitions:
        return [ShoalInputPartition(i, [c]) for i, c in enumerate(parts)]
    bins: list[list[Chunk]] = [[] for _ in range(max_partitions)]
    sizes = [0] * max_partitions
    for chunk in sorted(parts, key=lambda c: len(c.records), reverse=True):
        i = sizes.index(min(sizes))
        bins[i].append(chunk)
        sizes[i] += len(chunk.records)
    return [ShoalInputPartition(i, b) for i, b in enumerate(bins)]


_heap_frozen = False


def _freeze_worker_heap() -> None:
    """PySpark's reused Python worker runs a full `gc.collect()` after every task, and a full collection walks
    every object the worker holds (pyspark, pyarrow, numpy, our modules: tens of thousands), tens of ms a task,
    which made small tasks cost more than decoding them. `gc.freeze()` (once per worker, after the imports) moves
    what exists to the permanent generation that collections skip; objects are still freed by reference
    counting, and everything created later is collected as before."""
    global _heap_frozen
    if not _heap_frozen:
        gc.freeze()
        _heap_frozen = True


def read(partition: ShoalInputPartition) -> Iterator:
    """Executor side: decode the partition's chunks into pyarrow.RecordBatches of the source schema."""
    from shoal_spark.decode import decode

    _freeze_worker_heap()
    for chunk in partition.chunks:
        batch = decode(chunk.topic, chunk.partition, chunk.records, chunk.ranges)
        if batch.num_rows:
            yield batch
