"""Shared helpers for the transaction coordinator tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from broker.txn import TransactionCoordinator, TransactionCoordinatorConfig, TxnResult

PARTITIONS = 50


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Ids:
    """A producer id allocator for tests: 1000, 1001, ..."""

    def __init__(self, start: int = 1000) -> None:
        self._it = itertools.count(start)
        self.handed_out: list[int] = []

    def __call__(self) -> int:
        pid = next(self._it)
        self.handed_out.append(pid)
        return pid


def make(clock: Clock | None = None, **config: int) -> TransactionCoordinator:
    return TransactionCoordinator(TransactionCoordinatorConfig(**{"num_partitions": PARTITIONS, **config}),
                                  clock=clock or Clock())


def with_ids(op: Callable[..., TxnResult], ids: Ids, *args: object, **kwargs: object) -> TxnResult:
    """Run an operation the way the runtime does: if it asks for a producer id, allocate one and call again."""
    r = op(*args, **kwargs)
    if r.need_producer_id:
        r = op(*args, **kwargs, new_producer_id=ids())
        assert not r.need_producer_id
    return r


def replayed(records: list, clock: Clock | None = None, **config: int) -> TransactionCoordinator:
    """A fresh coordinator that loaded every partition from `records`."""
    fresh = make(clock, **config)
    for p in range(config.get("num_partitions", PARTITIONS)):
        fresh.load_begin(p)
    for r in records:
        assert fresh.replay(r.key, r.value)
    for p in range(config.get("num_partitions", PARTITIONS)):
        fresh.load_complete(p)
    return fresh


def snapshot(c: TransactionCoordinator) -> dict:
    return {tid: c.metadata(tid) for tid in c.transactional_ids()}
