"""Schema files and the schema model."""

from __future__ import annotations

import json

import pytest

from protocol import schema
from protocol.errors import ErrorCode
from protocol.schema import Versions, snake_case

SERVED = {
    18: (0, 5), 3: (0, 13), 0: (3, 13), 1: (4, 18), 2: (1, 11), 19: (2, 7), 20: (1, 6), 37: (0, 3),
    32: (1, 4), 44: (0, 1), 60: (0, 2), 10: (0, 6), 22: (0, 6), 24: (0, 5), 26: (0, 5),
}
NEXT_MILESTONE = {76, 77, 78, 79, 83, 84, 85, 86, 87, 68, 69, 11, 14, 12, 13, 8, 9, 16, 15, 42, 75, 74}


def test_api_specs() -> None:
    specs = schema.api_specs()
    for key, (lo, hi) in SERVED.items():
        assert (specs[key].min_version, specs[key].max_version) == (lo, hi), specs[key]
    assert set(specs) >= NEXT_MILESTONE
    assert specs[18].flexible_from == 3 and specs[0].flexible_from == 9 and specs[60].flexible_from == 0
    assert specs[78].name == "ShareFetch" and specs[78].min_version == 1


def test_schema_files_hold_no_prose() -> None:
    for path in schema.schema_files("messages") + schema.schema_files("records"):
        text = path.read_text()
        assert '"about"' not in text and "//" not in text, path
        json.loads(text)


def test_versions() -> None:
    assert 5 in Versions.parse("3+") and 2 not in Versions.parse("3+")
    assert 7 in Versions.parse("3-7") and 8 not in Versions.parse("3-7")
    assert 0 not in Versions.parse("none") and Versions.parse("none").empty()
    assert str(Versions.parse("4")) == "4"


@pytest.mark.parametrize(("name", "key"), [
    ("ThrottleTimeMs", "throttle_time_ms"), ("TopicId", "topic_id"), ("ApiKeys", "api_keys"),
    ("PartitionIndex", "partition_index"), ("ISRNodes", "isr_nodes"), ("ZkMigrationReady", "zk_migration_ready"),
])
def test_snake_case(name: str, key: str) -> None:
    assert snake_case(name) == key


def test_common_structs_resolved() -> None:
    m = schema.messages()["FetchResponse"]
    responses = next(f for f in m.struct.fields if f.name == "Responses").struct
    part = next(f for f in responses.fields if f.name == "Partitions").struct
    leader = next(f for f in part.fields if f.name == "CurrentLeader")
    assert leader.struct is not None and leader.tag == 1


def test_error_codes() -> None:
    assert ErrorCode.UNSUPPORTED_VERSION == 35 and ErrorCode.INVALID_REQUEST == 42
    assert ErrorCode.COORDINATOR_LOAD_IN_PROGRESS == 14
    assert ErrorCode.SHARE_SESSION_NOT_FOUND == 122 and ErrorCode.INVALID_SHARE_SESSION_EPOCH == 123
    assert ErrorCode.FENCED_STATE_EPOCH == 124 and ErrorCode.INVALID_RECORD_STATE == 121
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133
    assert len({int(e) for e in ErrorCode}) == len(ErrorCode)
