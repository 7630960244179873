"""Raw-protocol ShareFetch/ShareAcknowledge: sessions, acquisition, acknowledgements and their errors."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from protocol.errors import ErrorCode
from protocol.records import Record, build_batch, iter_batches
from tests.helpers.confluent_clients import admin_client
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import produce
from tests.helpers.share_raw import (
    ACCEPT,
    REJECT,
    RELEASE,
    SHARE_ACK,
    SHARE_FETCH,
    acknowledge,
    acquired,
    batch,
    ensure_member,
    fetch,
    part,
    setup,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration


def test_session_errors_and_latest_start(broker):
    client, tid = setup(broker, "sf-errors")
    with client:
        produce(client, "sf-errors", batch(5))  # before the share-partition exists: latest skips these
        # No session yet: epoch 1 and -1 are SHARE_SESSION_NOT_FOUND; ShareAcknowledge too.
        assert fetch(client, "g", "m1", 1, tid).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert fetch(client, "g", "m1", -1, tid).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert acknowledge(client, "g", "m1", 1, tid, {0: [(0, 0, ACCEPT)]}).error_code == \
            ErrorCode.SHARE_SESSION_NOT_FOUND
        # Epoch 0 with acknowledgements is INVALID_REQUEST.
        assert fetch(client, "g", "m1", 0, tid, acks={0: [(0, 0, ACCEPT)]}).error_code == ErrorCode.INVALID_REQUEST
        resp = fetch(client, "g", "m1", 0, tid)
        assert resp.error_code == 0 and acquired(resp) == []
        assert resp.acquisition_lock_timeout_ms == 30_000
        # Wrong epoch.
        assert fetch(client, "g", "m1", 5, tid).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert acknowledge(client, "g", "m1", 0, tid, {}).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        produce(client, "sf-errors", batch(3))
        resp = fetch(client, "g", "m1", 1, tid)
        assert acquired(resp) == [(5, 7, 1)]
        offsets = [h.base_offset for _, h in iter_batches(part(resp).records)]
        assert offsets == [5]
        # Kafka lists node endpoints only for partitions answered NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH.
        assert resp.node_endpoints == [] and part(resp).current_leader.leader_id == 1  # node.id defaults to 1
        # Acks for records this member does not hold: INVALID_RECORD_STATE; offsets past SPEO: INVALID_REQUEST.
        other = fetch(client, "g", "m2", 0, tid)
        assert other.error_code == 0
        resp = fetch(client, "g", "m2", 1, tid, acks={0: [(5, 5, ACCEPT)]})
        assert part(resp).acknowledge_error_code == ErrorCode.INVALID_RECORD_STATE
        resp = acknowledge(client, "g", "m1", 2, tid, {0: [(5, 9, ACCEPT)]})
        assert part(resp).error_code == ErrorCode.INVALID_REQUEST
        resp = acknowledge(client, "g", "m1", 3, tid, {0: [(5, 7, ACCEPT)]})
        assert resp.error_code == 0 and part(resp).error_code == 0
        # Unknown topic id: per-partition UNKNOWN_TOPIC_ID.
        ensure_member(client, "g", "m3", tid)
        resp = fetch(client, "g", "m3", 0, uuid.uuid4())
        assert part(resp).error_code == ErrorCode.UNKNOWN_TOPIC_ID
        resp = acknowledge(client, "g", "m1", 4, uuid.uuid4(), {0: [(0, 0, ACCEPT)]})
        assert part(resp).error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_session_limit(broker_factory):
    broker = broker_factory({"group.share.max.share.sessions": "2"})
    client, tid = setup(broker, "sf-limit")
    with client:
        assert fetch(client, "g", "a", 0, tid).error_code == 0
        assert fetch(client, "g", "b", 0, tid).error_code == 0
        assert fetch(client, "g", "c", 0, tid).error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
        assert fetch(client, "g", "a", 0, tid).error_code == 0  # re-opening one's own session is fine
        assert fetch(client, "g", "b", -1, tid).error_code == 0
        assert fetch(client, "g", "c", 0, tid).error_code == 0


def test_release_reject_delivery_limit_and_close(broker_factory):
    broker = broker_factory({"group.share.delivery.count.limit": "2"})
    client, tid = setup(broker, "sf-acks")
    with client:
        assert fetch(client, "g", "m1", 0, tid).error_code == 0
        produce(client, "sf-acks", batch(4))
        assert acquired(fetch(client, "g", "m1", 1, tid)) == [(0, 3, 1)]
        # Release 0-1, reject 2, keep 3: the released ones come back with delivery count 2.
        resp = fetch(client, "g", "m1", 2, tid, acks={0: [(0, 1, RELEASE), (2, 2, REJECT)]})
        assert part(resp).acknowledge_error_code == 0
        assert acquired(resp) == [(0, 1, 2)]
        # Released again at the delivery count limit: archived, never delivered again.
        resp = fetch(client, "g", "m1", 3, tid, acks={0: [(0, 1, RELEASE)]})
        assert acquired(resp) == []
        # Closing the session releases offset 3 to another member at once.
        assert fetch(client, "g", "m1", -1, tid).error_code == 0
        assert acquired(fetch(client, "g", "m2", 0, tid)) == [(3, 3, 2)]  # epoch 0 fetches too


def test_long_poll_woken_by_append_and_lock_expiry(broker_factory):
    broker = broker_factory({"group.share.record.lock.duration.ms": "1000",
                             "group.share.min.record.lock.duration.ms": "1000"})
    client, tid = setup(broker, "sf-poll")
    with client, RawClient(broker.port) as producer:
        assert fetch(client, "g", "m1", 0, tid).error_code == 0
        timer = threading.Timer(0.3, lambda: produce(producer, "sf-poll", batch(2)))
        timer.start()
        t0 = time.monotonic()
        # MaxWaitMs far above the bound: a fetch not woken by the append answers after 20 s, even on a loaded machine
        resp = fetch(client, "g", "m1", 1, tid, max_wait_ms=20_000)
        assert acquired(resp) == [(0, 1, 1)] and time.monotonic() - t0 < 15
        timer.join()
        with RawClient(broker.port) as other:
            # m1 acquired the records after t0, so they are locked until t0 + 1 s at least; on a loaded machine
            # that may have passed already, and then the session's first fetch acquires them.
            opened = fetch(other, "g", "m2", 0, tid)
            assert opened.error_code == 0
            got = acquired(opened)
            if not got:
                got = acquired(fetch(other, "g", "m2", 1, tid, max_wait_ms=20_000))  # woken when the locks expire
            assert got == [(0, 1, 2)]
            assert 0.9 < time.monotonic() - t0 < 15
            # m1's late ack is refused: it no longer holds the records.
            resp = fetch(client, "g", "m1", 2, tid, acks={0: [(0, 1, ACCEPT)]})
            assert part(resp).acknowledge_error_code == ErrorCode.INVALID_RECORD_STATE


def test_acknowledged_state_survives_kill9(broker):
    client, tid = setup(broker, "sf-durable")
    with client:
        assert fetch(client, "g", "m1", 0, tid).error_code == 0
        for _ in range(3):
            produce(client, "sf-durable", batch(10))
        resp = fetch(client, "g", "m1", 1, tid, max_records=10)
        assert acquired(resp) == [(0, 9, 1)]
        resp = fetch(client, "g", "m1", 2, tid, acks={0: [(0, 9, ACCEPT)]}, max_records=10)
        assert part(resp).acknowledge_error_code == 0 and acquired(resp) == [(10, 19, 1)]
        # killed while m1's connection is open: closing it first let the broker release 10-19 durably (delivery
        # count 1, as Kafka releases a closed connection's share session) when it won the race with the kill
        broker.kill9()
    broker.restart()
    with RawClient(broker.port) as client:
        resp = fetch(client, "g", "m9", 0, tid, max_records=100)
        # 0-9 were accepted: never again; 10-19 were only acquired, 20-29 never delivered.
        assert acquired(resp) == [(10, 29, 1)]


def test_auto_offset_reset_from_group_config(broker):
    from tests.helpers.confluent_clients import alter_group_config

    admin = admin_client(broker.bootstrap)
    alter_group_config(admin, "early", "share.auto.offset.reset", "earliest")
    alter_group_config(admin, "recent", "share.auto.offset.reset", "by_duration:PT1H")
    client, tid = setup(broker, "sf-reset")
    with client:
        old = build_batch([Record(value=b"old")], timestamp=int(time.time() * 1000) - 7_200_000)
        produce(client, "sf-reset", old)
        produce(client, "sf-reset", batch(2))
        assert acquired(fetch(client, "early", "m", 0, tid)) == [(0, 2, 1)]
        assert acquired(fetch(client, "recent", "m", 0, tid)) == [(1, 2, 1)]  # the 2 h old record is skipped
        assert acquired(fetch(client, "late", "m", 0, tid)) == []


def test_member_leaving_the_group_releases_its_records(broker):
    from tests.helpers.share_raw import heartbeat, join_until_assigned

    client, tid = setup(broker, "sf-leave")
    with client:
        epoch, _ = join_until_assigned(client, "g", "m1", "sf-leave", 1)
        produce(client, "sf-leave", batch(3))
        assert acquired(fetch(client, "g", "m1", 0, tid)) == []  # latest: created after the produce
        produce(client, "sf-leave", batch(2))
        assert acquired(fetch(client, "g", "m1", 1, tid)) == [(3, 4, 1)]
        assert heartbeat(client, "g", "m1", -1).error_code == 0  # leave: released at once, not after 30 s
        # The session went with the member.
        assert fetch(client, "g", "m1", 2, tid).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        # well inside the 30 s lock, which would free them too
        got = wait_until(lambda: acquired(fetch(client, "g", "m2", 0, tid)), 15, "m1's records released to m2")
        assert got == [(3, 4, 2)]


def test_min_bytes_waits_without_acquiring(broker):
    client, tid = setup(broker, "sf-minbytes")
    with client, RawClient(broker.port) as producer:
        assert fetch(client, "g", "m1", 0, tid).error_code == 0
        produce(producer, "sf-minbytes", batch(1))
        body = {"group_id": "g", "member_id": "m1", "share_session_epoch": 1, "max_wait_ms": 20_000,
                "min_bytes": 10_000, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
                "topics": [], "forgotten_topics_data": []}
        timer = threading.Timer(0.5, lambda: produce(producer, "sf-minbytes", batch(2000)))
        timer.start()
        t0 = time.monotonic()
        resp = client.call(SHARE_FETCH, 1, body)
        timer.join()
        # The first (small) batch did not satisfy MinBytes: the answer came with the second one, both acquired
        # (not at MaxWaitMs, 20 s, far above the bound so that a loaded machine does not reach it).
        assert 0.4 < time.monotonic() - t0 < 15
        assert acquired(resp) == [(0, 2000, 1)]
        # Nothing there: MaxWaitMs passes and the answer is empty.
        body["share_session_epoch"], body["max_wait_ms"] = 2, 300
        t0 = time.monotonic()
        assert acquired(client.call(SHARE_FETCH, 1, body)) == []
        assert time.monotonic() - t0 >= 0.25


def test_v2_record_limit_mode_and_renew(broker_factory):
    broker = broker_factory({"group.share.record.lock.duration.ms": "2000",
                             "group.share.min.record.lock.duration.ms": "2000"})
    client, tid = setup(broker, "sf-v2")
    with client:
        assert fetch(client, "g", "m1", 0, tid, version=2).error_code == 0
        produce(client, "sf-v2", batch(10))
        body = {"group_id": "g", "member_id": "m1", "share_session_epoch": 1, "max_wait_ms": 0, "min_bytes": 1,
                "max_bytes": 1 << 20, "max_records": 3, "batch_size": 3, "share_acquire_mode": 1,
                "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0}]}], "forgotten_topics_data": []}
        t0 = time.monotonic()
        resp = client.call(SHARE_FETCH, 2, body)
        assert acquired(resp) == [(0, 2, 1)]  # record_limit: exactly MaxRecords, inside one log batch
        # Renew the lock three times over 3 s (lock 2 s): the records stay with m1. Each renew comes 1 s inside the
        # lock, a margin for a loaded machine.
        for epoch in (2, 3, 4):
            time.sleep(1.0)  # time passing is the test: each renew comes inside the lock, the three outlast it
            ack = client.call(SHARE_ACK, 2, {"group_id": "g", "member_id": "m1", "share_session_epoch": epoch,
                                             "is_renew_ack": True, "topics": [{"topic_id": tid, "partitions": [
                                                 {"partition_index": 0, "acknowledgement_batches": [
                                                     {"first_offset": 0, "last_offset": 2,
                                                      "acknowledge_types": [4]}]}]}]})
            assert ack.error_code == 0 and part(ack).error_code == 0
            assert ack.acquisition_lock_timeout_ms == 2000
        assert time.monotonic() - t0 > 2.0  # past the first lock: only the renews kept the records
        resp = acknowledge(client, "g", "m1", 5, tid, {0: [(0, 2, ACCEPT)]})
        assert part(resp).error_code == 0
        # Renew (type 4) is not a v1 acknowledge type.
        resp = fetch(client, "g", "m1", 6, tid, acks={0: [(3, 3, 4)]})
        assert part(resp).acknowledge_error_code == ErrorCode.INVALID_REQUEST


def test_connection_close_ends_the_session_and_releases(broker):
    client, tid = setup(broker, "sf-conn")
    with client:
        with RawClient(broker.port) as first:
            assert fetch(first, "g", "m1", 0, tid).error_code == 0
            produce(client, "sf-conn", batch(3))
            assert acquired(fetch(first, "g", "m1", 1, tid)) == [(0, 2, 1)]
        # The connection that held m1's session is gone (a crashed client): its records are free at once.
        # well inside the 30 s lock, which would free them too
        got = wait_until(lambda: acquired(fetch(client, "g", "m2", 0, tid)), 15, "m1's records released to m2")
        assert got == [(0, 2, 2)]
        assert fetch(client, "g", "m1", 2, tid).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_reopened_session_keeps_the_members_records(broker):
    client, tid = setup(broker, "sf-reopen")
    with client:
        assert fetch(client, "g", "m1", 0, tid).error_code == 0
        produce(client, "sf-reopen", batch(3))
        assert acquired(fetch(client, "g", "m1", 1, tid)) == [(0, 2, 1)]
        assert fetch(client, "g", "m1", 0, tid).error_code == 0  # re-open (e.g. after an epoch error)
        resp = fetch(client, "g", "m1", 1, tid, acks={0: [(0, 2, ACCEPT)]})
        assert part(resp).acknowledge_error_code == 0


def test_only_members_open_sessions_and_only_assigned_partitions_are_served(broker):
    """Regression: ShareFetch served any member id, member of the group or not, from any partition."""
    from tests.helpers.share_raw import heartbeat, join_until_assigned

    client, tid = setup(broker, "sf-members", partitions=2)
    with client:
        # Not a member (unknown group, then unknown member of a known group): no session.
        resp = fetch(client, "nobody", "m1", 0, tid, partitions=(0, 1), join=False)
        assert resp.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND and resp.responses == []
        epoch_a, got_a = join_until_assigned(client, "g", "a", "sf-members", 2)
        assert got_a == {tid: [0, 1]}
        resp = fetch(client, "g", "stranger", 0, tid, partitions=(0, 1), join=False)
        assert resp.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        # A second member: the two partitions are split between a and b.
        heartbeat(client, "g", "b", 0, ["sf-members"])
        end = time.monotonic() + 30
        mine: dict[str, set[int]] = {}
        while time.monotonic() < end:
            d = client.call(77, 1, {"group_ids": ["g"], "include_authorized_operations": False}).groups[0]
            mine = {m.member_id: {p for t in m.assignment.topic_partitions for p in t.partitions} for m in d.members}
            if len(mine) == 2 and all(len(ps) == 1 for ps in mine.values()):
                break
            for m in d.members:
                heartbeat(client, "g", m.member_id, m.member_epoch)
            time.sleep(0.05)
        assert sorted(len(ps) for ps in mine.values()) == [1, 1], mine
        [pa], [pb] = mine["a"], mine["b"]
        # Both open sessions on both partitions (share.auto.offset.reset=latest: records come after this).
        assert fetch(client, "g", "b", 0, tid, partitions=(0, 1), join=False).error_code == 0
        assert fetch(client, "g", "a", 0, tid, partitions=(0, 1), join=False).error_code == 0
        for p in (0, 1):
            produce(client, "sf-members", batch(3, f"p{p}-"), partition=p)
        # b asks for both partitions: only its own is served; a then gets the other one.
        resp = fetch(client, "g", "b", 1, tid, partitions=(0, 1))
        assert resp.error_code == 0
        assert acquired(resp, pb) == [(0, 2, 1)] and acquired(resp, pa) == []
        resp = fetch(client, "g", "a", 1, tid, partitions=(0, 1))
        assert acquired(resp, pa) == [(0, 2, 1)] and acquired(resp, pb) == []
