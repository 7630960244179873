"""Regression tests for what the long fuzz campaign (`make fuzz FRAMES=1000000`) found, each as the smallest
request sequence that showed it."""

from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode
from tests.fuzz.harness import scan_log
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import DESCRIBE, join

pytestmark = pytest.mark.integration

LONGEST = 0x7FFF  # bytes in a Kafka string


def test_member_ids_of_longest_client_and_instance_ids_still_encode(broker):
    """Kafka names a classic member `<group.instance.id or client.id>-<UUID>`: with a 32 767-byte id that name
    no longer fits a string, so the JoinGroup answer failed to encode and so did every later DescribeGroups of
    the group (the fuzzer: 1 835 'EncodeError; api DescribeGroups' errors in a million frames)."""
    with RawClient(broker.port, "x" * LONGEST) as dynamic, RawClient(broker.port) as static:
        first = join(dynamic, 5, "long-ids")
        assert first.error_code == 79  # MEMBER_ID_REQUIRED, with the member id to use
        assert first.member_id.startswith("x" * 1000) and len(first.member_id.encode()) <= LONGEST
        assert join(dynamic, 5, "long-ids", first.member_id).error_code == 0
        joined = join(static, 5, "long-ids-static", instance="é" * (LONGEST // 2))
        assert joined.error_code == 0 and len(joined.member_id.encode()) <= LONGEST
        assert joined.member_id.startswith("é" * 100)
        described = static.call(DESCRIBE, 5, {"groups": ["long-ids", "long-ids-static"],
                                              "include_authorized_operations": False})
    assert [(g.error_code, len(g.members)) for g in described.groups] == [(0, 1), (0, 1)]
    assert [g.members[0].member_id for g in described.groups] == [first.member_id, joined.member_id]
    assert scan_log(broker.log_path)[0] == []


def test_a_group_too_large_for_one_record_is_refused_without_an_error_log(broker):
    """A member whose protocol metadata alone exceeds the coordinator's max.message.bytes: the group's record
    cannot be written. The member gets an error answer, the coordinator keeps serving, and (as Kafka's
    coordinators answer MESSAGE_TOO_LARGE) the broker logs no error for what a client did."""
    huge = [{"name": "range", "metadata": b"\x00" * (1100 * 1024)}]
    with RawClient(broker.port) as c:
        body = {"group_id": "too-large", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
                "member_id": "", "group_instance_id": None, "protocol_type": "consumer", "protocols": huge}
        joined = c.call(11, 3, body)
        if joined.error_code == 0:
            synced = c.call(14, 3, {"group_id": "too-large", "generation_id": joined.generation_id,
                                    "member_id": joined.member_id, "group_instance_id": None,
                                    "assignments": [{"member_id": joined.member_id, "assignment": b"a"}]})
            assert synced.error_code != 0
        assert join(c, 5, "fine-after").error_code == 79  # the coordinator still serves
    problems, warnings = scan_log(broker.log_path)
    assert problems == []
    assert warnings.get("coordinator records not appended") == 1


def test_a_share_state_with_unknown_delivery_states_is_refused_and_the_partition_keeps_serving(broker):
    """A fuzzed WriteShareGroupState stored an unknown delivery state, and a ShareFetch that then loaded the
    share-partition failed as a whole with a ValueError (the fuzzer: 'ValueError; api ShareFetch'). The share
    coordinator now refuses such a write (INVALID_REQUEST), the durable state stays as it was and both partitions
    are served; nothing is logged as an error. (A state that still holds such batches, written before, fails only
    its partition: tests/unit/share_partition/test_manager.py.)"""
    from shoal_client import ShareGroupMember
    from tests.helpers.confluent_clients import create_topic, produce_all
    from tests.helpers.raw_requests import topic_id

    create_topic(broker.bootstrap, "bad-state", 2)
    produce_all(broker.bootstrap, "bad-state", [b"p0"] * 3, partition=0)
    produce_all(broker.bootstrap, "bad-state", [b"p1"] * 3, partition=1)
    with RawClient(broker.port) as c:
        tid = topic_id(c, "bad-state")
        for p, start in ((0, 0), (1, 0)):
            init = c.call(83, 0, {"group_id": "g-bad", "topics": [{"topic_id": tid, "partitions": [
                {"partition": p, "state_epoch": 1, "start_offset": start}]}]})
            assert init.results[0].partitions[0].error_code == 0
        wrote = c.call(85, 1, {"group_id": "g-bad", "topics": [{"topic_id": tid, "partitions": [
            {"partition": 0, "state_epoch": 1, "leader_epoch": 0, "start_offset": 0, "delivery_complete_count": 0,
             "state_batches": [{"first_offset": 0, "last_offset": 2, "delivery_state": 7,
                                "delivery_count": 1}]}]}]})
        assert wrote.results[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    member = ShareGroupMember(broker.bootstrap, "g-bad", ["bad-state"]).start()
    want = {(p, o) for p in (0, 1) for o in range(3)}
    try:
        got: set[tuple[int, int]] = set()
        end = time.monotonic() + 60  # the share-partitions initialise asynchronously; a loaded machine is slow
        while got != want and time.monotonic() < end:
            result = member.fetch(max_records=100, max_bytes=1 << 20, max_wait_ms=200)
            got |= {(a.partition, o) for a in result.acquired for f, last, _ in a.ranges
                    for o in range(f, last + 1)}
    finally:
        member.close()
    assert got == want
    problems, _ = scan_log(broker.log_path)
    assert problems == []


def test_a_transaction_marker_without_a_producer_id_is_refused_without_an_error_log(broker):
    """WriteTxnMarkers with ProducerId -1 (a mutated seed; no coordinator sends one) failed its handler while
    building the marker batch ('ValueError; api WriteTxnMarkers'). Its partitions are refused with INVALID_REQUEST,
    a marker of the same request with a producer id is written, and nothing is logged as an error."""
    from tests.helpers.raw_requests import create_topic

    with RawClient(broker.port) as c:
        create_topic(c, "markers", 1)
        resp = c.call(27, 1, {"markers": [
            {"producer_id": -1, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
             "topics": [{"name": "markers", "partition_indexes": [0]}]},
            {"producer_id": 1000, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
             "topics": [{"name": "markers", "partition_indexes": [0]}]}]})
    assert [(m.producer_id, [p.error_code for t in m.topics for p in t.partitions]) for m in resp.markers] == [
        (-1, [ErrorCode.INVALID_REQUEST]), (1000, [ErrorCode.NONE])]
    problems, _ = scan_log(broker.log_path)
    assert problems == []
