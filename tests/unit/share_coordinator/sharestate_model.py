"""Per-offset reference model of durable share-partition state: newer writes win, offsets below SPSO vanish."""

from __future__ import annotations

from collections.abc import Iterable

from broker.share_coordinator import StateBatch


class OffsetModel:
    def __init__(self, start: int = -1) -> None:
        self.start = start
        self.offsets: dict[int, tuple[int, int]] = {}

    def write(self, start: int, batches: Iterable[StateBatch]) -> None:
        if start != -1:
            self.start = start
        for b in batches:
            for o in range(b.first_offset, b.last_offset + 1):
                self.offsets[o] = (b.delivery_state, b.delivery_count)
        if self.start >= 0:
            self.offsets = {o: v for o, v in self.offsets.items() if o >= self.start}

    def batches(self) -> tuple[StateBatch, ...]:
        """The canonical form: maximal runs of consecutive offsets with equal (state, count)."""
        out: list[StateBatch] = []
        for o in sorted(self.offsets):
            st, cnt = self.offsets[o]
            if out and out[-1].last_offset + 1 == o and out[-1][2:] == (st, cnt):
                out[-1] = out[-1]._replace(last_offset=o)
            else:
                out.append(StateBatch(o, o, st, cnt))
        return tuple(out)
