"""A log of transactional, idempotent and plain batches built from a list of operations, with the ground truth a
reference model knows about it (which transaction each record belongs to, how each transaction ended)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from protocol import control_records as cr
from protocol import records as rec

TXN_PIDS = (1, 2)
PLAIN_PIDS = (-1, 10, 11)  # no producer id, and idempotent producers
TS = 1_000


@dataclass
class Txn:
    pid: int
    first: int
    outcome: str | None = None  # "commit", "abort", or None while open
    marker: int | None = None


@dataclass
class BuiltLog:
    data: bytearray = field(default_factory=bytearray)
    batches: list[tuple[rec.BatchHeader, cr.EndTxnMarker | None]] = field(default_factory=list)
    record_txn: dict[int, Txn | None] = field(default_factory=dict)  # data record offset -> its transaction
    controls: set[int] = field(default_factory=set)
    txns: list[Txn] = field(default_factory=list)
    open: dict[int, Txn] = field(default_factory=dict)
    leo: int = 0

    def committed_offset(self, offset: int) -> bool:
        """Would a read_committed reader get the record at `offset`?"""
        if offset not in self.record_txn:
            return False  # a marker
        txn = self.record_txn[offset]
        return txn is None or txn.outcome != "abort"

    def reference_lso(self, high_watermark: int) -> int:
        unstable = [t.first for t in self.txns if t.outcome is None or t.marker >= high_watermark]
        return min([high_watermark, *unstable])


# operations: ("txn", pid, records) | ("plain", pid, records) | ("end", pid, commit)
# (transactions are drawn more often than plain batches: the interesting logs interleave several of them)
_txn = st.tuples(st.just("txn"), st.sampled_from(TXN_PIDS), st.integers(1, 3))
_end = st.tuples(st.just("end"), st.sampled_from(TXN_PIDS), st.booleans())
_plain = st.tuples(st.just("plain"), st.sampled_from(PLAIN_PIDS), st.integers(1, 3))
ops_strategy = st.lists(st.one_of(_txn, _end, _txn, _end, _plain), min_size=1, max_size=30)


def append_op(log: BuiltLog, op: tuple) -> tuple[bytes, rec.BatchHeader, cr.EndTxnMarker | None]:
    """Append one operation's batch to the log; returns (batch bytes, header, marker)."""
    kind, pid, arg = op
    offset = log.leo
    marker = None
    if kind == "end":
        raw = cr.build_end_txn_marker(producer_id=pid, producer_epoch=0, commit=arg, coordinator_epoch=0,
                                      base_offset=offset, timestamp=TS)
        marker = cr.EndTxnMarker(arg, 0)
        log.controls.add(offset)
        txn = log.open.pop(pid, None)
        if txn is not None:
            txn.outcome, txn.marker = ("commit" if arg else "abort"), offset
    else:
        transactional = kind == "txn"
        txn = None
        if transactional:
            txn = log.open.get(pid)
            if txn is None:
                txn = log.open[pid] = Txn(pid, offset)
                log.txns.append(txn)
        raw = rec.build_batch([rec.Record(b"k", b"v%d" % i) for i in range(arg)], base_offset=offset, timestamp=TS,
                              producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                              base_sequence=0 if pid >= 0 else -1, transactional=transactional)
        for i in range(arg):
            log.record_txn[offset + i] = txn
    header = rec.read_header(raw)
    log.data += raw
    log.batches.append((header, marker))
    log.leo = header.next_offset
    return raw, header, marker


def build_log(ops: list[tuple]) -> BuiltLog:
    log = BuiltLog()
    for op in ops:
        append_op(log, op)
    return log
