"""The throughput matrix: partitions x record size x operation, for every server of the run.

Operations (confluent-kafka clients, one process, against a broker process on 127.0.0.1):
- produce: acks=all, linger 5 ms, 1 MB batches, round-robin over the partitions (bench.throughput.produce).
- txn-produce: idempotent, transactions of 1 000 records each committed (bench.transactions.produce).
- consume: the produce cell's topic read back from offset 0 by a Consumer assigned every partition.
- share-consume: the same topic read by one ShareConsumer of a fresh share group, implicit acknowledgement. Tansu
  has no share groups (KIP-932): on Tansu this cell is not run.
Both reads run in a process of their own and are timed alike (bench.latency.drain): the records after the first
batch over the time from it to the last record, so connecting and joining a group are outside both.

A cell's records are sized so each moves about the same bytes (`budget`), between `floor` and `cap` records;
txn-produce writes at most TXN_CAP records (a transaction over many partitions costs a chain of fsynced steps
per partition: 200 of them over 64 partitions took minutes).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass

from bench.latency import drain
from bench.throughput import _create_topic, produce
from bench.transactions import produce as txn_produce

OPERATIONS = ("produce", "txn-produce", "consume", "share-consume")
SHARE_SERVERS = {"shoal"}  # servers with share groups
TXN_CAP = 20_000


@dataclass(frozen=True)
class MatrixSize:
    partitions: tuple[int, ...]
    record_bytes: tuple[int, ...]
    budget: int  # bytes per cell
    floor: int
    cap: int

    def records(self, size: int) -> int:
        return max(self.floor, min(self.cap, self.budget // size))


SIZES = {
    "quick": MatrixSize((1, 4), (100, 1024), 8 << 20, 1_000, 20_000),
    "full": MatrixSize((1, 4, 16, 64), (100, 1024, 16384), 64 << 20, 2_000, 200_000),
}


@dataclass
class Cell:
    server: str
    operation: str
    partitions: int
    record_bytes: int
    records: int
    seconds: float | None = None
    error: str | None = None

    @property
    def mib_s(self) -> float | None:
        return None if not self.seconds else self.records * self.record_bytes / self.seconds / 2**20

    def as_dict(self) -> dict:
        rate = None if not self.seconds else round(self.records / self.seconds)
        return {**asdict(self), "records_s": rate, "mib_s": None if self.mib_s is None else round(self.mib_s, 1)}


def human_bytes(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


class Progress:
    """Prints `[k/n] elapsed ETA what` lines; the ETA scales the time so far by the weights of the cells left."""

    def __init__(self, weights: list[float]) -> None:
        self.weights = weights
        self.done_weight = 0.0
        self.k = 0
        self.start = time.monotonic()

    def begin(self, what: str) -> None:
        self.k += 1
        elapsed = time.monotonic() - self.start
        left = sum(self.weights[self.k - 1:])
        eta = f"ETA {elapsed / self.done_weight * left:5.0f} s" if self.done_weight else "ETA    ?"
        print(f"[{self.k:>3}/{len(self.weights)}] {elapsed:6.0f} s  {eta}  {what}", end="", flush=True)

    def end(self, text: str) -> None:
        self.done_weight += self.weights[self.k - 1]
        print(f"  -> {text}", flush=True)


def plan(servers: list[str], size: MatrixSize, records: int | None) -> list[Cell]:
    cells = []
    for server in servers:
        for partitions in size.partitions:
            for rb in size.record_bytes:
                n = records or size.records(rb)
                for op in OPERATIONS:
                    if op == "share-consume" and server not in SHARE_SERVERS:
                        continue
                    cells.append(Cell(server, op, partitions, rb, min(n, TXN_CAP) if op == "txn-produce" else n))
    return cells


def run_matrix(servers: dict[str, str], size: MatrixSize, records: int | None = None, compression: str = "none",
               progress: Progress | None = None, on_cell: Callable[[Cell], None] | None = None) -> list[Cell]:
    """Run every cell in order (produce before the reads of its topic). A failed cell is recorded, not fatal."""
    cells = plan(list(servers), size, records)
    # ETA weights: a fixed cost per cell (clients, topic, group) plus records and bytes moved.
    progress = progress or Progress([1 + c.records / 50_000 + c.records * c.record_bytes / (64 << 20) for c in cells])
    topics: dict[tuple[str, int, int], str] = {}
    for cell in cells:
        bootstrap = servers[cell.server]
        key = (cell.server, cell.partitions, cell.record_bytes)
        progress.begin(f"{cell.server:6} {cell.operation:13} {cell.partitions:>2} partitions "
                       f"{human_bytes(cell.record_bytes):>6} x {cell.records} records")
        try:
            cell.seconds = _run_cell(cell, bootstrap, topics, key, compression)
            progress.end(f"{cell.records / cell.seconds:9.0f} rec/s {cell.mib_s:7.1f} MiB/s")
        except Exception as exc:  # one broken cell (say a peer lacking an API) must not lose the others
            cell.error = f"{type(exc).__name__}: {exc}"[:300]
            progress.end(f"FAILED {cell.error}")
        if on_cell:
            on_cell(cell)
    return cells


def _run_cell(cell: Cell, bootstrap: str, topics: dict, key: tuple, compression: str) -> float:
    payload = b"x" * cell.record_bytes
    if cell.operation == "produce":
        topic = f"m-{cell.partitions}p-{cell.record_bytes}-{uuid.uuid4().hex[:6]}"
        _create_topic(bootstrap, topic, cell.partitions)
        seconds = produce(bootstrap, topic, cell.records, cell.record_bytes, compression, cell.partitions)
        topics[key] = topic
        return seconds
    if cell.operation == "txn-produce":
        topic = f"mtx-{cell.partitions}p-{cell.record_bytes}-{uuid.uuid4().hex[:6]}"
        _create_topic(bootstrap, topic, cell.partitions)
        return txn_produce(bootstrap, topic, payload, cell.records, cell.partitions, 1000)
    produced = topics.get(key)
    if produced is None:
        raise RuntimeError("its produce cell failed: no topic to read")
    kind = "assign" if cell.operation == "consume" else "share"
    return drain(bootstrap, kind, partitions=cell.partitions, records=cell.records, size=cell.record_bytes,
                 members=1, topic=produced)["seconds"]
