import asyncio
import random
import struct

import pytest

from broker.context import AllowAll, ConnectionInfo
from broker.features import Features
from broker.handlers import register_all
from broker.handlers.api_versions import ApiVersionsApis
from broker.node import Endpoints, Node
from broker.router import CloseConnection, Router
from broker.server import Server, SocketServerConfig
from protocol.codec import request_codec, response_codec
from protocol.errors import ErrorCode
from protocol.framing import RequestHeader, encode_request
from tests.helpers.api_objects import partition_apis

PRODUCE, METADATA, API_VERSIONS, FIND_COORDINATOR = 0, 3, 18, 10


def sample(router: Router, name: str, **labels: str) -> float | None:
    return router.request_metrics.registry.get_sample_value(name, labels)


def request(api_key: int, version: int, correlation_id: int, body: dict | None = None) -> bytes:
    """A request frame without its size prefix, as the server hands it to the router."""
    payload = request_codec(api_key, version).encode(body or {})
    return encode_request(RequestHeader(api_key, version, correlation_id, "unit"), payload)[4:]


def split_response(frame: bytes, header_version: int = 0) -> tuple[int, bytes]:
    (size, correlation_id) = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4
    return correlation_id, frame[8 + header_version:]


FEATURES = Features(finalized={"transaction.version": 2, "group.version": 0}, epoch=7,
                    supported={"transaction.version": (0, 2), "metadata.version": (7, 25)})


def make_router() -> Router:
    router = Router(authorizer=AllowAll())
    node = Node(1, "127.0.0.1", 9092)
    router.register(API_VERSIONS, ApiVersionsApis(router, lambda: FEATURES, Endpoints("c", 1, {}, node)).api_versions)
    return router


async def test_api_versions_lists_registrations():
    router = make_router()

    async def find_coordinator(ctx, req):
        return {"error_code": 0}

    router.register(FIND_COORDINATOR, find_coordinator, max_version=3)
    for version in range(6):
        body = {"client_software_name": "unit", "client_software_version": "1.0"} if version >= 3 else {}
        corr, payload = split_response(await router.handle(request(API_VERSIONS, version, 9, body), ConnectionInfo()))
        assert corr == 9
        resp = response_codec(API_VERSIONS, version).decode(payload)
        assert resp.error_code == 0
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert keys == {API_VERSIONS: (0, 5), FIND_COORDINATOR: (0, 3)}
        if version >= 3:
            # v3 leaves out the supported features whose minimum is 0 (KAFKA-17492); finalized levels 0 too
            assert [(f.name, f.min_version, f.max_version) for f in resp.supported_features] == (
                [("transaction.version", 0, 2), ("metadata.version", 7, 25)] if version >= 4
                else [("metadata.version", 7, 25)])
            assert [(f.name, f.min_version_level, f.max_version_level) for f in resp.finalized_features] == [
                ("transaction.version", 2, 2)]
            assert resp.finalized_features_epoch == 7


def test_unstable_versions_only_when_enabled(tmp_path):
    """InitProducerId v6 is latestVersionUnstable in Kafka: served with unstable.api.versions.enable only."""
    with partition_apis(tmp_path) as (_produce, producer_ids):
        for unstable, top in ((False, 5), (True, 6)):
            router = Router()
            register_all(router, [producer_ids], unstable=unstable)
            assert router.version_range(22) == (0, top)
        router = Router()
        register_all(router, [producer_ids], max_versions={22: 4}, unstable=True)
        assert router.version_range(22) == (0, 4)  # a feature's cap still applies


async def test_produce_is_listed_from_v0_and_v0_to_v2_close_the_connection(tmp_path):
    """Kafka 4 lists Produce v0 in ApiVersions (KAFKA-18659: librdkafka needs it) but closes a connection sending
    Produce v0-v2; an unsupported ApiVersions version is answered with ApiVersions' own versions only."""
    router = make_router()
    with partition_apis(tmp_path) as (produce, _producer_ids):
        register_all(router, [produce])
    assert router.version_range(PRODUCE) == (3, 13)
    keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in router.api_keys()}
    assert keys[PRODUCE] == (0, 13)
    for version in (0, 2):
        frame = encode_request(RequestHeader(PRODUCE, version, 3, "old"), struct.pack(">hii", 1, 1000, 0))[4:]
        with pytest.raises(CloseConnection):
            await router.handle(frame, ConnectionInfo())
    frame = encode_request(RequestHeader(API_VERSIONS, 9, 4, "future"), b"")[4:]
    _, payload = split_response(await router.handle(frame, ConnectionInfo()))
    resp = response_codec(API_VERSIONS, 0).decode(payload)
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(API_VERSIONS, 0, 5)]


async def test_unsupported_api_versions_gets_v0_body_with_error_35():
    router = make_router()
    frame = encode_request(RequestHeader(API_VERSIONS, 7, 5, "future"), b"\x00\x00\x00")[4:]
    corr, payload = split_response(await router.handle(frame, ConnectionInfo()))
    assert corr == 5
    resp = response_codec(API_VERSIONS, 0).decode(payload)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(API_VERSIONS, 0, 5)]


async def test_invalid_client_software_name():
    router = make_router()
    info = ConnectionInfo()
    frame = request(API_VERSIONS, 3, 1, {"client_software_name": "-bad", "client_software_version": "1"})
    _, payload = split_response(await router.handle(frame, info))
    assert response_codec(API_VERSIONS, 3).decode(payload).error_code == ErrorCode.INVALID_REQUEST
    frame = request(API_VERSIONS, 3, 2, {"client_software_name": "librdkafka", "client_software_version": "2.0.2"})
    _, payload = split_response(await router.handle(frame, info))
    assert response_codec(API_VERSIONS, 3).decode(payload).error_code == 0
    assert (info.client_software_name, info.client_software_version) == ("librdkafka", "2.0.2")


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">hhih", 999, 0, 1, -1),  # unknown api key
        request(FIND_COORDINATOR, 0, 1, {"key": "g"}),  # known api, not registered
        b"\x00\x12",  # too short for a header
        request(METADATA, 9, 1)[:-2],  # truncated body
    ],
)
async def test_close_connection_cases(frame):
    router = make_router()

    async def metadata(ctx, req):
        return {}

    router.register(METADATA, metadata)
    with pytest.raises(CloseConnection):
        await router.handle(frame, ConnectionInfo())


async def test_trailing_bytes_after_the_body_are_ignored():
    # Kafka ignores them, and librdkafka 2.16's AdminClient Metadata v13 request carries three.
    router = make_router()
    seen = []

    async def metadata(ctx, req):
        seen.append(req.topics)
        return {}

    router.register(METADATA, metadata)
    assert await router.handle(request(METADATA, 9, 1) + b"junk", ConnectionInfo()) is not None
    assert seen == [[]]


async def test_unsupported_version_of_other_api_closes():
    router = make_router()

    async def metadata(ctx, req):
        return {}

    router.register(METADATA, metadata, min_version=5)
    with pytest.raises(CloseConnection):
        await router.handle(request(METADATA, 4, 1), ConnectionInfo())


async def test_handler_exception_becomes_error_response_or_close():
    router = make_router()

    async def boom(ctx, req):
        raise RuntimeError("boom")

    router.register(FIND_COORDINATOR, boom)  # v0-3 have a top-level ErrorCode, v4+ do not
    _, payload = split_response(await router.handle(request(FIND_COORDINATOR, 2, 4, {"key": "g"}), ConnectionInfo()))
    assert response_codec(FIND_COORDINATOR, 2).decode(payload).error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    with pytest.raises(CloseConnection):
        await router.handle(request(FIND_COORDINATOR, 4, 5, {"coordinator_keys": ["g"]}), ConnectionInfo())
    assert sample(router, "shoal_request_errors_total", api="FindCoordinator", error="UNKNOWN_SERVER_ERROR") == 2
    assert sample(router, "shoal_requests_total", api="FindCoordinator") == 2


async def test_trailing_bytes_are_ignored_like_kafka():
    router = make_router()

    async def metadata(ctx, req):
        return {"cluster_id": "c"}

    router.register(METADATA, metadata)
    frame = request(METADATA, 13, 8, {"topics": None}) + b"\x01\x00\x00"
    corr, payload = split_response(await router.handle(frame, ConnectionInfo()), header_version=1)
    assert corr == 8
    assert response_codec(METADATA, 13).decode(payload).cluster_id == "c"


async def test_none_result_means_no_response():
    router = make_router()

    async def silent(ctx, req):
        return None

    router.register(METADATA, silent)
    assert await router.handle(request(METADATA, 9, 1), ConnectionInfo()) is None


def test_register_checks():
    router = make_router()

    async def h(ctx, req):
        return {}

    with pytest.raises(ValueError):
        router.register(API_VERSIONS, h)  # twice
    with pytest.raises(ValueError):
        router.register(METADATA, h, min_version=50)
    with pytest.raises(TypeError):
        router.register(METADATA, lambda ctx, req: {})


async def test_server_writes_responses_in_request_order():
    """Handlers finish in random order; responses still come back in request order, skipping None."""

    async def dispatch(frame, conn):
        (corr,) = struct.unpack_from(">i", frame)
        await asyncio.sleep(random.random() / 100)
        if corr % 7 == 3:
            return None  # like Produce acks=0
        return struct.pack(">ii", 4, corr)

    server = Server(dispatch, SocketServerConfig(max_request_bytes=1024, max_inflight=8))
    (_, _, port), = await server.start([type("L", (), {"name": "PLAINTEXT", "host": "127.0.0.1", "port": 0})()])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    n = 200
    writer.write(b"".join(struct.pack(">ii", 4, i) for i in range(n)))
    await writer.drain()
    expected = [i for i in range(n) if i % 7 != 3]
    got = []
    for _ in expected:
        size, corr = struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10))
        got.append(corr)
    assert got == expected
    writer.write(struct.pack(">i", 5000))  # too large: only this connection closes
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    await server.close()


async def test_metrics_in_prometheus_text():
    from prometheus_client import generate_latest

    router = make_router()
    await router.handle(request(API_VERSIONS, 0, 1), ConnectionInfo())
    text = generate_latest(router.request_metrics.registry).decode()
    assert 'shoal_requests_total{api="ApiVersions"} 1.0' in text
    assert 'shoal_request_latency_seconds_bucket{api="ApiVersions",le="+Inf"} 1.0' in text
    assert 'shoal_request_latency_seconds_count{api="ApiVersions"} 1.0' in text


async def test_error_codes_in_responses_are_counted_per_api_and_error():
    """Every non-zero error_code in the answer counts, nested ones included (Kafka's ErrorsPerSec)."""
    router = make_router()

    async def produce(ctx, req):
        parts = [{"index": i, "error_code": 3 if i < 2 else (6 if i == 2 else 0)} for i in range(4)]
        return {"responses": [{"name": "t", "partition_responses": parts}]}

    router.register(PRODUCE, produce)
    frame = request(PRODUCE, 9, 3, {"acks": 1, "timeout_ms": 1000, "topic_data": []})
    await router.handle(frame, ConnectionInfo())
    await router.handle(frame, ConnectionInfo())
    assert sample(router, "shoal_request_errors_total", api="Produce", error="UNKNOWN_TOPIC_OR_PARTITION") == 4
    assert sample(router, "shoal_request_errors_total", api="Produce", error="NOT_LEADER_OR_FOLLOWER") == 2
    assert sample(router, "shoal_request_errors_total", api="Produce", error="NONE") is None
    assert sample(router, "shoal_requests_total", api="Produce") == 2


def test_response_errors_follow_the_schema():
    from broker.metrics.requests import error_plan, response_errors

    body = {"topics": [{"error_code": 0, "name": "a", "partitions": [
        {"error_code": 0, "replica_nodes": [1]}, {"error_code": 5, "replica_nodes": [1]}]},
        {"error_code": 3, "name": "b", "partitions": []}], "brokers": [{"node_id": 1}]}
    assert sorted(response_errors(body, METADATA, 12)) == [3, 5]
    # Fields named ...ErrorCode count too (CreateTopics' TopicConfigErrorCode).
    created = {"topics": [{"name": "t", "error_code": 36, "topic_config_error_code": 29}]}
    assert sorted(response_errors(created, 19, 7)) == [29, 36]
    # ApiVersions: only the top-level code; the key array is never walked.
    plan = error_plan(API_VERSIONS, 3)
    assert plan.keys == ("error_code",) and plan.children == ()
    assert response_errors({"responses": [], "error_code": 0}, PRODUCE, 9) == []


def test_routers_do_not_share_a_registry():
    a, b = make_router(), make_router()
    assert a.request_metrics.registry is not b.request_metrics.registry


async def test_handler_close_connection_is_the_answer_not_a_failure():
    """A handler raising CloseConnection (Produce acks=0 with an error) closes the connection: no ERROR line with a
    traceback and no handler-failure count."""
    import structlog.testing

    router = make_router()

    async def close(ctx, req):
        raise CloseConnection("acks=0 produce failed")

    router.register(METADATA, close)
    with structlog.testing.capture_logs() as logs, pytest.raises(CloseConnection):
        await router.handle(request(METADATA, 9, 1), ConnectionInfo())
    assert [entry for entry in logs if entry["log_level"] in ("error", "critical")] == []
    assert sample(router, "shoal_request_errors_total", api="Metadata", error="UNKNOWN_SERVER_ERROR") is None
    assert sample(router, "shoal_requests_total", api="Metadata") == 1
