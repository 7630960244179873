"""shoal-migrate's offset map (shoal_client/offset_map.py): runs of copied source offsets, translation of
committed / start offsets across gaps, and the state file round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoal_client.offset_map import MigrationState, PartitionCopy


def copied(base: int, offsets: list[int]) -> PartitionCopy:
    copy = PartitionCopy(base)
    for o in offsets:
        copy.add(o)
    return copy


def test_a_gapless_copy_into_an_empty_partition_keeps_offsets() -> None:
    copy = copied(0, list(range(10)))
    assert copy.runs == [[0, 0, 10]]
    assert [copy.translate(o) for o in (0, 4, 10)] == [0, 4, 10]
    assert copy.target_end == 10 and copy.next_source == 10


def test_gaps_shift_the_target_offsets() -> None:
    # Transactional source: records 0-4, marker 5, aborted 6-8, marker 9, records 10-14, marker 15.
    copy = copied(0, [0, 1, 2, 3, 4, 10, 11, 12, 13, 14])
    assert copy.runs == [[0, 0, 5], [10, 5, 5]]
    # A committed offset inside a gap points at the next copied record; past the end at the target's end.
    assert {c: copy.translate(c) for c in (0, 3, 5, 6, 9, 10, 12, 14, 15, 16)} == {
        0: 0, 3: 3, 5: 5, 6: 5, 9: 5, 10: 5, 12: 7, 14: 9, 15: 10, 16: 10}


def test_a_target_partition_that_was_not_empty_and_a_source_log_start_past_zero() -> None:
    copy = copied(100, [50, 51, 52])
    assert copy.runs == [[50, 100, 3]]
    assert [copy.translate(o) for o in (0, 50, 52, 53)] == [100, 100, 102, 103]
    assert copy.copied == 3


def test_offsets_must_go_forward() -> None:
    copy = copied(0, [5])
    with pytest.raises(ValueError):
        copy.add(5)


def test_state_round_trips_through_its_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert MigrationState.load(path) is None
    state = MigrationState("src:9092", "dst:9092", {("t", 0): copied(0, [0, 1, 3]), ("t", 1): PartitionCopy(7)})
    state.save(path)
    again = MigrationState.load(path)
    assert again is not None and again.to_json() == state.to_json()
    assert again.translate("t", 0, 2) == 2 and again.translate("t", 0, 3) == 2
    assert again.translate("t", 1, 0) == 7 and again.translate("other", 0, 0) is None
    assert not (tmp_path / "state.json.tmp").exists()
    path.write_text(json.dumps({**state.to_json(), "version": 99}))
    with pytest.raises(ValueError):
        MigrationState.load(path)
