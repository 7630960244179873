"""The ShareFetch/ShareAcknowledge handlers against a real share-partition manager and logs (no sockets)."""

from __future__ import annotations

import asyncio
import math
import uuid
from dataclasses import dataclass

from broker.context import ConnectionInfo, RequestContext
from broker.handlers.share_fetch import ShareFetchApis
from broker.node import Endpoints, Node
from broker.security.acl import ResourceType
from protocol.codec import request_codec
from protocol.errors import ErrorCode
from protocol.framing import RequestHeader
from protocol.records import Record, build_batch
from tests.helpers.share_state import MemoryShareState
from tests.unit.share_partition.share_fakes import (
    EARLIEST,
    NO_GROUP_COORDINATOR,
    OneTopic,
    broker_config,
    group_configs,
    make_manager,
)

TOPIC_ID = uuid.uuid4()
CONFIG = {"group.share.max.share.sessions": 10}


class NoQuotas:
    """No client quotas: MaxBytes as asked, never throttled."""

    def fetch_max_bytes(self, ctx: RequestContext) -> float:
        return math.inf

    def share_fetch_throttle(self, ctx: RequestContext, response_bytes: int) -> int:
        return 0


class NoAuthorizer:
    """No authorizer configured: every ACL check passes."""

    def authorize(self, connection: ConnectionInfo, operation, resource_type, name: str, audit: bool = True) -> bool:
        return True

    def authorize_by_resource_type(self, connection: ConnectionInfo, operation, resource_type) -> bool:
        return True


@dataclass
class ShareApis:
    """The ShareFetch/ShareAcknowledge API object under test and the authorizer its requests are checked by."""

    apis: ShareFetchApis
    authorizer: NoAuthorizer


class Members:
    """A loaded group coordinator whose group "g" has members "m" and "n", each assigned every partition."""

    loaded = True

    def member_assignment(self, group_id: str, member_id: str) -> dict[uuid.UUID, range] | None:
        return {TOPIC_ID: range(2)} if group_id == "g" and member_id in ("m", "n") else None


class NoTopicReads(NoAuthorizer):
    """The principal may READ the group, no topic."""

    def authorize(self, connection: ConnectionInfo, operation, resource_type, name: str, audit: bool = True) -> bool:
        return resource_type != ResourceType.TOPIC


def make(tmp_path, store, partitions: int = 2, *, groups=NO_GROUP_COORDINATOR, security=None):
    config = broker_config(CONFIG)
    topics = OneTopic(tmp_path, TOPIC_ID, partitions=partitions)
    manager = make_manager(config=config, topics=topics, persister=store, groups=groups,
                           group_configs=group_configs(config, EARLIEST))
    node = Node(1, "127.0.0.1", 9092)
    apis = ShareFetchApis(manager, topics, NoQuotas(), config,
                          Endpoints("cluster", 1, {"PLAINTEXT": node}, node))
    return ShareApis(apis, security or NoAuthorizer()), topics.logs


def ctx(broker: ShareApis, api_key: int, version: int = 1) -> RequestContext:
    connection = ConnectionInfo()
    connection.id = 1
    return RequestContext(RequestHeader(api_key, version, 1, "test"), connection, broker.authorizer)


def request(api_key: int, body: dict, version: int = 1):
    codec = request_codec(api_key, version)
    return codec.decode(codec.encode(body))


def fetch_body(epoch: int, acks: dict[int, list[tuple[int, int, int]]] | None = None, *, member: str = "m",
               group: str = "g") -> dict:
    acks = acks or {}
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
            "topics": [{"topic_id": TOPIC_ID, "partitions": [
                {"partition_index": p, "acknowledgement_batches": [
                    {"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in acks.get(p, [])]}
                for p in (0, 1)]}],
            "forgotten_topics_data": []}


async def _both_writes_start_together(store: MemoryShareState, call) -> None:
    store.gating = True
    task = asyncio.get_running_loop().create_task(call)
    deadline = asyncio.get_running_loop().time() + 2
    while len(store.started) < 2 and asyncio.get_running_loop().time() < deadline and not task.done():
        await asyncio.sleep(0.01)
    started = sorted(store.started)
    store.gate.set()
    await task
    assert started == [0, 1], started  # the second write did not wait for the first one's fsync


def test_share_fetch_persists_acknowledgements_of_several_partitions_together(tmp_path):
    """Regression: acknowledgements riding on one ShareFetch were written one partition after another."""
    async def run():
        store = MemoryShareState()
        broker, logs = make(tmp_path, store)
        for plog in logs:
            plog.append(build_batch([Record(value=b"x")] * 3))
        # The first fetch loads the share-partitions one at a time and answers with the first that has records
        # (as Kafka); the second one serves the other.
        first = await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(0)))
        second = await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(1)))
        assert [sum(len(p["acquired_records"]) for t in r["responses"] for p in t["partitions"])
                for r in (first, second)] == [1, 1]
        await _both_writes_start_together(
            store, broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(2, {0: [(0, 2, 1)], 1: [(0, 2, 1)]}))))

    asyncio.run(run())


def test_share_acknowledge_persists_several_partitions_together(tmp_path):
    async def run():
        store = MemoryShareState()
        broker, logs = make(tmp_path, store)
        for plog in logs:
            plog.append(build_batch([Record(value=b"x")] * 3))
        await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(0)))
        await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(1)))
        body = {"group_id": "g", "member_id": "m", "share_session_epoch": 2, "topics": [
            {"topic_id": TOPIC_ID, "partitions": [
                {"partition_index": p, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}]} for p in (0, 1)]}]}
        await _both_writes_start_together(store, broker.apis.share_acknowledge(ctx(broker, 79), request(79, body)))

    asyncio.run(run())


def answered(response: dict) -> dict[int, dict]:
    """partition -> its answer (error, acknowledgement error, acquired ranges, served batches' size)."""
    return {p["partition_index"]: {"error": p["error_code"], "ack": p["acknowledge_error_code"],
                                   "acquired": [(r["first_offset"], r["last_offset"], r["delivery_count"])
                                                for r in p["acquired_records"]],
                                   "served": len(p["records"])}
            for t in response["responses"] for p in t["partitions"]}


def test_share_fetches_of_a_session_through_the_leader(tmp_path):
    """One call per ShareFetch: the session (members only), acknowledgements (an unknown type refused), the
    release at the final epoch, the fetch."""
    async def run():
        broker, logs = make(tmp_path, MemoryShareState(), groups=Members())
        for plog in logs:
            plog.append(build_batch([Record(value=b"x")] * 3))
        refused = await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(0, member="x")))
        assert refused["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND and refused["responses"] == []
        first = await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(0)))
        assert first["acquisition_lock_timeout_ms"] == 30_000
        # the first fetch answers with the first share-partition loaded and lists every partition it went through
        assert answered(first)[0]["acquired"] == [(0, 2, 1)] and answered(first)[0]["served"] > 0
        second = answered(await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(1))))
        assert second[1]["acquired"] == [(0, 2, 1)]
        # type 5 is not an acknowledgement type of v1: that partition's acknowledgements are refused
        third = answered(await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(2, {0: [(0, 2, 5)],
                                                                                              1: [(0, 2, 1)]}))))
        assert (third[0]["ack"], third[1]["ack"]) == (ErrorCode.INVALID_REQUEST, ErrorCode.NONE)
        # the final epoch acknowledges nothing here and releases what "m" holds: "n" gets 0-2 of partition 0 again
        final = await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(-1)))
        assert final["error_code"] == 0 and all(not p["acquired"] for p in answered(final).values())
        again = answered(await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(0, member="n"))))
        assert again[0]["acquired"] == [(0, 2, 2)]

    asyncio.run(run())


def test_a_share_fetch_of_group_without_a_name_answers_each_partition_unknown_server_error(tmp_path):
    async def run():
        broker, _ = make(tmp_path, MemoryShareState())
        response = await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(0, group="")))
        assert response["error_code"] == 0 and response["acquisition_lock_timeout_ms"] == 30_000
        assert {p: a["error"] for p, a in answered(response).items()} == {0: ErrorCode.UNKNOWN_SERVER_ERROR,
                                                                          1: ErrorCode.UNKNOWN_SERVER_ERROR}

    asyncio.run(run())


def test_topics_the_client_may_not_read_are_refused_per_partition(tmp_path):
    async def run():
        broker, logs = make(tmp_path, MemoryShareState(), security=NoTopicReads())
        logs[0].append(build_batch([Record(value=b"x")] * 3))
        fetched = answered(await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(0))))
        assert fetched == {p: {"error": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "ack": 0, "acquired": [], "served": 0}
                           for p in (0, 1)}
        acked = answered(await broker.apis.share_fetch(ctx(broker, 78), request(78, fetch_body(1, {0: [(0, 2, 1)]}))))
        assert acked[0]["ack"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        body = {"group_id": "g", "member_id": "m", "share_session_epoch": 2, "topics": [
            {"topic_id": TOPIC_ID, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}]}]}]}
        response = await broker.apis.share_acknowledge(ctx(broker, 79), request(79, body))
        assert [p["error_code"] for t in response["responses"] for p in t["partitions"]] == [
            ErrorCode.TOPIC_AUTHORIZATION_FAILED]

    asyncio.run(run())
