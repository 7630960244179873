"""Raw share-group requests for tests (RawClient): ShareGroupHeartbeat until assigned, ShareFetch and
ShareAcknowledge bodies, and readers of their responses."""

from __future__ import annotations

import time
import uuid

from protocol.records import Record, build_batch
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import create_topic, topic_id

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACK = 76, 77, 78, 79
ACCEPT, RELEASE, REJECT = 1, 2, 3
FAST = {"group.share.min.heartbeat.interval.ms": "50", "group.share.heartbeat.interval.ms": "100"}

# topic id -> (name, partitions) of the topics made by setup(): fetch() joins members to the group first.
TOPICS: dict[uuid.UUID, tuple[str, int]] = {}


def batch(n: int, tag: str = "v") -> bytes:
    return build_batch([Record(value=f"{tag}{i}".encode()) for i in range(n)])


def ensure_member(client: RawClient, group: str, member: str, tid: uuid.UUID) -> None:
    """Only members of the group may open a share session: join (a re-join is harmless) and wait until the
    topic's partitions are assigned."""
    if tid in TOPICS:
        name, partitions = TOPICS[tid]
        join_until_assigned(client, group, member, name, partitions)


def fetch(client: RawClient, group: str, member: str, epoch: int, tid: uuid.UUID, partitions=(0,), *, acks=None,
          max_wait_ms: int = 0, max_records: int = 500, version: int = 1, forget=(), join: bool = True,
          max_bytes: int = 1 << 20):
    if epoch == 0 and join:
        ensure_member(client, group, member, tid)
    body = fetch_body(group, member, epoch, tid, partitions, acks=acks, max_wait_ms=max_wait_ms,
                      max_records=max_records, forget=forget, max_bytes=max_bytes)
    return client.call(SHARE_FETCH, version, body)


def fetch_body(group: str, member: str, epoch: int, tid: uuid.UUID, partitions=(0,), *, acks=None,
               max_wait_ms: int = 0, max_records: int = 500, forget=(), max_bytes: int = 1 << 20) -> dict:
    acks = acks or {}
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
            "min_bytes": 1, "max_bytes": max_bytes, "max_records": max_records, "batch_size": max_records,
            "topics": [{"topic_id": tid, "partitions": [
                {"partition_index": p, "acknowledgement_batches": [
                    {"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in acks.get(p, [])]}
                for p in partitions]}] if partitions else [],
            "forgotten_topics_data": [{"topic_id": tid, "partitions": list(forget)}] if forget else []}


def acknowledge(client: RawClient, group: str, member: str, epoch: int, tid: uuid.UUID, acks: dict):
    return client.call(SHARE_ACK, 1, {"group_id": group, "member_id": member, "share_session_epoch": epoch,
                                      "topics": [{"topic_id": tid, "partitions": [
                                          {"partition_index": p, "acknowledgement_batches": [
                                              {"first_offset": a, "last_offset": b, "acknowledge_types": [t]}
                                              for a, b, t in ranges]} for p, ranges in acks.items()]}]})


def part(resp, p: int = 0):
    for t in resp.responses:
        for x in t.partitions:
            if x.partition_index == p:
                return x
    return None


def acquired(resp, p: int = 0) -> list[tuple[int, int, int]]:
    x = part(resp, p)
    return [] if x is None else [(r.first_offset, r.last_offset, r.delivery_count) for r in x.acquired_records]


def setup(broker, name: str, partitions: int = 1) -> tuple[RawClient, uuid.UUID]:
    client = RawClient(broker.port)
    create_topic(client, name, partitions)
    tid = topic_id(client, name)
    TOPICS[tid] = (name, partitions)
    return client, tid


def heartbeat(c: RawClient, group: str, member: str, epoch: int, topics=None, rack=None):
    return c.call(SHARE_GROUP_HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": rack,
                                               "subscribed_topic_names": topics})


def describe(c: RawClient, *groups: str):
    return c.call(SHARE_GROUP_DESCRIBE, 1, {"group_ids": list(groups), "include_authorized_operations": False})


def assigned(resp) -> dict[uuid.UUID, list[int]]:
    if resp.assignment is None:
        return {}
    return {t.topic_id: list(t.partitions) for t in resp.assignment.topic_partitions}


def join_until_assigned(c: RawClient, group: str, member: str, topic: str, want: int, timeout: float = 30.0):
    """Join and heartbeat until `want` partitions in total are assigned (initialization is asynchronous)."""
    resp = heartbeat(c, group, member, 0, [topic])
    assert resp.error_code == 0, resp
    epoch, got = resp.member_epoch, assigned(resp)
    end = time.monotonic() + timeout
    while sum(len(p) for p in got.values()) != want:
        assert time.monotonic() < end, (got, resp)
        time.sleep(0.05)
        resp = heartbeat(c, group, member, epoch)
        assert resp.error_code == 0, resp
        epoch = resp.member_epoch
        if resp.assignment is not None:
            got = assigned(resp)
    return epoch, got
