"""bench.latency's shoal_client loop reads the acquired values the same way whichever decoder a size picks."""

import uuid

import pytest

from bench.latency import COLUMNAR_FROM, _values
from protocol.records import Record, build_batch
from shoal_client.member import Acquired


def _value(i: int) -> bytes:
    return i.to_bytes(2, "big") * 4


# 300 and 241 records take the column-wise decoder, 6 and 1 the record-by-record one
@pytest.mark.parametrize("ranges", [[(0, 299, 1)], [(10, 250, 2)], [(5, 9, 1), (20, 20, 1)], [(299, 299, 1)]])
def test_values_are_those_of_the_acquired_ranges_only(ranges) -> None:
    assert COLUMNAR_FROM <= 241 and COLUMNAR_FROM > 6
    batch = build_batch([Record(value=_value(i)) for i in range(300)])
    acquired = Acquired("t", uuid.uuid4(), 0, batch, ranges)
    assert _values(acquired) == [_value(i) for first, last, _ in ranges for i in range(first, last + 1)]

