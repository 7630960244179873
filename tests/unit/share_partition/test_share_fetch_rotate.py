"""DelayedShareFetch's partition order: Kafka's PartitionRotateStrategy round robin by share session epoch."""

from __future__ import annotations

import uuid

from broker.share_partition.delayed_fetch import rotate

T = uuid.UUID(int=1)


def test_rotation_by_session_epoch():
    tps = [(T, 0), (T, 1), (T, 2)]
    assert rotate(tps, 0) == tps  # a new session keeps the order
    assert rotate(tps, -1) == tps  # so does the final epoch
    assert rotate(tps, 1) == [(T, 1), (T, 2), (T, 0)]
    assert rotate(tps, 2) == [(T, 2), (T, 0), (T, 1)]
    assert rotate(tps, 3) == tps
    assert rotate(tps[:1], 5) == tps[:1]
