"""The throughput matrix: partitions x record size x operation, for every server of the run.

Operations (confluent-kafka clients, one process, against a broker process on 127.0.0.1):
- produce: acks=all, linger 5 ms, 1 MB batches, round-robin over the partitions (bench.throughput.produce).
- txn-produce: idempotent, transactions of 1 000 records each committed (bench.transactions.produce).
- consume: the produce cell's topic read back from offset 0 by a Consumer assigned every partition.
- share-consume: the same topic read by one ShareConsumer of a fresh share group, implicit acknowledgement. Tansu
  has no share groups (KIP-932): on Tansu this cell is not run.
- perf-produce, perf-consume, perf-share-consume: the same with Kafka's own perf tools (the Java clients,
  bench/perf_tools.py) when Kafka's jars are installed (`make kafka`): perf-produce writes a topic of its own
  (acks=all, the Java producer's defaults otherwise), which the two reads then read. Not on Tansu
  (NO_PERF_SERVERS).
Both reads run in a process of their own and are timed alike (bench.latency.drain): the records after the first
batch over the time from it to the last record, so connecting and joining a group are outside both.

A cell's records are sized so each moves about the same bytes (`budget`), between `floor` and `cap` records;
txn-produce writes at most TXN_CAP records (a transaction over many partitions costs a chain of fsynced steps
per partition: 200 of them over 64 partitions took minutes).

Servers alternate: every server runs its cells of one (partitions, record size) before the next pair. Each cell
records the CPU seconds the server's process tree spent during it (bench/process_tree.py, when the server's PID is
known) and the load average when it ended.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass

from bench import perf_tools, process_tree
from bench.latency import drain, new_share_group
from bench.throughput import _create_topic, produce
from bench.transactions import produce as txn_produce

OPERATIONS = ("produce", "txn-produce", "consume", "share-consume", "perf-produce", "perf-consume",
              "perf-share-consume")
PERF_OPERATIONS = ("perf-produce", "perf-consume", "perf-share-consume")
SHARE_SERVERS = {"shoal", "kafka", "kafka-fsync"}  # servers with share groups
# Kafka's Java producer (kafka-producer-perf-test) delivered no record to Tansu 0.6.0 within its 120 s delivery
# timeout (2026-11-29), so the perf-tool cells are not run on Tansu.
NO_PERF_SERVERS = {"tansu"}
PRODUCE_OPERATIONS = ("produce", "txn-produce", "perf-produce")
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
    server_cpu_s: float | None = None  # CPU seconds of the server's process tree during the cell
    load: float | None = None  # one-minute load average at the cell's end

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


def plan(servers: list[str], size: MatrixSize, records: int | None, perf: bool = False) -> list[Cell]:
    """The cells in their running order: per (partitions, record size), each server's cells in turn."""
    cells = []
    for partitions in size.partitions:
        for rb in size.record_bytes:
            n = records or size.records(rb)
            for server in servers:
                for op in OPERATIONS:
                    if op.endswith("share-consume") and server not in SHARE_SERVERS:
                        continue
                    if op in PERF_OPERATIONS and (not perf or server in NO_PERF_SERVERS):
                        continue
                    cells.append(Cell(server, op, partitions, rb, min(n, TXN_CAP) if op == "txn-produce" else n))
    return cells


def run_matrix(servers: dict[str, str], size: MatrixSize, records: int | None = None, compression: str = "none",
               progress: Progress | None = None, on_cell: Callable[[Cell], None] | None = None) -> list[Cell]:
    """Run every cell in order (produce before the reads of its topic). A failed cell is recorded, not fatal."""
    cells = plan(list(servers), size, records, perf_tools.available())
    pids: dict[str, int] = getattr(servers, "pids", {})
    # ETA weights: a fixed cost per cell (clients, topic, group) plus records and bytes moved.
    progress = progress or Progress([1 + c.records / 50_000 + c.records * c.record_bytes / (64 << 20) for c in cells])
    topics: dict[tuple[str, int, int], str] = {}
    for cell in cells:
        bootstrap = servers[cell.server]
        key = (cell.server, cell.partitions, cell.record_bytes)
        progress.begin(f"{cell.server:6} {cell.operation:13} {cell.partitions:>2} partitions "
                       f"{human_bytes(cell.record_bytes):>6} x {cell.records} records")
        pid = pids.get(cell.server)
        cpu0 = process_tree.cpu_seconds(pid) if pid else None
        try:
            cell.seconds = _run_cell(cell, bootstrap, topics, key, compression)
            progress.end(f"{cell.records / cell.seconds:9.0f} rec/s {cell.mib_s:7.1f} MiB/s")
        except Exception as exc:  # one broken cell (say a peer lacking an API) must not lose the others
            cell.error = f"{type(exc).__name__}: {exc}"[:300]
            progress.end(f"FAILED {cell.error}")
        if pid and cpu0 is not None:
            cell.server_cpu_s = round(process_tree.cpu_seconds(pid) - cpu0, 3)
        cell.load = round(os.getloadavg()[0], 2)
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
    if cell.operation == "perf-produce":
        topic = f"mpf-{cell.partitions}p-{cell.record_bytes}-{uuid.uuid4().hex[:6]}"
        _create_topic(bootstrap, topic, cell.partitions)
        seconds = perf_tools.produce(bootstrap, topic, cell.records, cell.record_bytes)
        topics[(*key, "perf")] = topic
        return seconds
    if cell.operation in PERF_OPERATIONS:
        perf_topic = topics.get((*key, "perf"))
        if perf_topic is None:
            raise RuntimeError("its perf-produce cell failed: no topic to read")
        if cell.operation == "perf-consume":
            return perf_tools.consume(bootstrap, perf_topic, cell.records)
        return perf_tools.share_consume(bootstrap, perf_topic, cell.records, new_share_group(bootstrap, "mpf"))
    produced = topics.get(key)
    if produced is None:
        raise RuntimeError("its produce cell failed: no topic to read")
    kind = "assign" if cell.operation == "consume" else "share"
    return drain(bootstrap, kind, partitions=cell.partitions, records=cell.records, size=cell.record_bytes,
                 members=1, topic=produced)["seconds"]
