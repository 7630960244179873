"""Requests on a SASL_PLAINTEXT listener (SCRAM, StandardAuthorizer) against Kafka 4.4 and Shoal: what arrives
before authentication (an API other than ApiVersions and SaslHandshake, an unknown mechanism, SaslAuthenticate
before the handshake, a second handshake, oversize frames), and Produce, Fetch, ListOffsets, DeleteRecords and
OffsetForLeaderEpoch refused by ACLs for the unprivileged user `alice`."""

from __future__ import annotations

import socket
import struct

import pytest

from protocol import records as rec
from protocol.codec import request_codec, response_codec
from protocol.framing import decode_response_header, response_header_version
from tests.helpers import differential_raw as dr
from tests.helpers.differential import Target, assert_same, known_difference
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, FIND_COORDINATOR, CREATE_ACLS = 18, 17, 36, 3, 10, 30
TOPIC_RESOURCE, TRANSACTIONAL_ID_RESOURCE, LITERAL, ALLOW = 2, 3, 3, 3
READ, WRITE, DELETE, DESCRIBE = 3, 4, 6, 8
GOOD = rec.build_batch([rec.Record(b"k", b"v")], timestamp=1_000)


def frame(api_key: int, version: int, value: dict, *, flexible: bool = False) -> tuple[bytes, int, int]:
    return dr.request_frame(api_key, version, request_codec(api_key, version).encode(value),
                            flexible=flexible), api_key, version


def conversation(port: int, frames: list[tuple[bytes, int | None, int]]) -> list:
    """Send the frames one by one, reading an answer to each: what came back, and then whether the connection
    is closed."""
    out: list = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for data, api_key, version in frames:
            try:
                sock.sendall(data)
                size = struct.unpack(">i", _exact(sock, 4))[0]
                got = _exact(sock, size)
            except (ConnectionError, EOFError):
                out.append("closed")
                return out
            answer = {"correlation_id": struct.unpack(">i", got[:4])[0]}
            if api_key is not None:
                _, at = decode_response_header(got, response_header_version(api_key, version))
                decoded = response_codec(api_key, version).decode(got[at:])
                answer.update({k: v for k, v in decoded.items() if k in ("error_code", "mechanisms")})
            out.append(answer)
        try:
            sock.settimeout(0.5)
            out.append("then closed" if sock.recv(1) == b"" else "then more")
        except TimeoutError:
            out.append("then open")
        except ConnectionError:
            out.append("then closed")
    return out


def _exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


METADATA_V1 = frame(METADATA, 1, {"topics": []})
API_VERSIONS_V0 = (dr.request_frame(API_VERSIONS, 0), API_VERSIONS, 0)
FIND_COORDINATOR_V1 = frame(FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})


def handshake(mechanism: str, version: int = 1):
    return frame(SASL_HANDSHAKE, version, {"mechanism": mechanism})


CONVERSATIONS = {
    "metadata-first": [METADATA_V1],
    "unknown-api-key-first": [(dr.request_frame(999, 0), None, 0)],
    "authenticate-before-handshake": [frame(SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n=admin,r=abc"},
                                            flexible=True)],
    "unknown-mechanism": [handshake("PLAIN")],
    "handshake-twice": [handshake("SCRAM-SHA-256"), handshake("SCRAM-SHA-256")],
    "api-versions-twice": [API_VERSIONS_V0, API_VERSIONS_V0],
    "unsupported-api-versions-then-v0": [(dr.request_frame(API_VERSIONS, 127, flexible=True), API_VERSIONS, 0),
                                         API_VERSIONS_V0],
    "find-coordinator-instead-of-authenticate": [handshake("SCRAM-SHA-512"), FIND_COORDINATOR_V1],
    "handshake-v0-then-not-a-token": [handshake("SCRAM-SHA-256", 0), (struct.pack(">i", 5) + b"junk!", None, 0)],
    "oversize-before-authentication": [(struct.pack(">i", 1 << 20) + b"x" * 100, None, 0)],
}


@pytest.mark.parametrize("case", list(CONVERSATIONS))
def test_before_authentication(sasl_pair, case):
    frames = CONVERSATIONS[case]
    assert_same(sasl_pair.run(lambda target: conversation(target.port, frames)), case)


def test_a_request_without_a_top_level_error_in_place_of_sasl_authenticate(sasl_pair):
    """Both close the connection; Kafka first sends the request's own error response (Metadata v1: an empty
    one, no error field), Shoal sends one only where the response has a top-level error code."""
    seen = sasl_pair.run(lambda target: conversation(target.port, [handshake("SCRAM-SHA-256"), METADATA_V1]))
    handshake_answer = {"correlation_id": 7, "error_code": 0, "mechanisms": ["SCRAM-SHA-512", "SCRAM-SHA-256"]}
    metadata_answer = {"correlation_id": 7, "error_code": 0}  # (v1 has no error field: the default)
    known_difference(seen, kafka=[handshake_answer, metadata_answer, "then closed"],
                     shoal=[handshake_answer, "closed"],
                     reason="An API without a top-level error code in place of SaslAuthenticate")


def grant(target: Target, resource_type: int, name: str, *operations: int) -> None:
    with target.raw("admin") as raw:
        answer = raw.call(CREATE_ACLS, 3, {"creations": [
            {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": LITERAL,
             "principal": "User:alice", "host": "*", "operation": op, "permission_type": ALLOW}
            for op in operations]})
        assert all(r.error_code == 0 for r in answer.results), answer


def test_requests_refused_by_acls(sasl_pair):
    """alice may WRITE `allowed` (not READ, DESCRIBE or DELETE it) and nothing else: what Produce (with and without
    a TransactionalId she may not write), Fetch, ListOffsets, DeleteRecords and OffsetForLeaderEpoch answer her."""
    def scenario(target: Target):
        allowed = dr.new_topic(target, "acl-allowed")
        denied = dr.new_topic(target, "acl-denied")
        grant(target, TOPIC_RESOURCE, allowed, WRITE)
        out = {}
        with target.raw("alice") as raw:
            wait_until(lambda: dr.produce(raw, allowed, GOOD).error_code == 0, 30, "alice's WRITE to take effect")
            out["produce"] = [dict(dr.produce(raw, t, GOOD)) for t in (allowed, denied, "nope-" + allowed)]
            out["produce-plain-with-transactional-id"] = dict(dr.produce(raw, allowed, GOOD,
                                                                         transactional_id="not-hers"))
            txn = rec.build_batch([rec.Record(None, b"t")], timestamp=1_000, producer_id=1, producer_epoch=0,
                                  base_sequence=0, transactional=True)
            out["produce-transactional"] = dict(dr.produce(raw, allowed, txn, transactional_id="not-hers"))
            out["fetch"] = [{k: v for k, v in dr.fetch(raw, t).items() if k != "records"}
                            for t in (allowed, denied, "nope-" + allowed)]
            answer = raw.call(dr.FETCH, 12, {**dr.fetch_request([dr.fetch_partition(allowed, 0),
                                                                 dr.fetch_partition("nope-" + allowed, 0)]),
                                             "replica_id": 5})  # a follower's fetch without CLUSTER_ACTION
            out["fetch-as-follower"] = [[(p.partition_index, p.error_code, p.aborted_transactions)
                                         for p in t.partitions] for t in answer.responses]
            out["list-offsets"] = [dict(dr.list_offsets(raw, t, -1)) for t in (allowed, "nope-" + allowed)]
            answer = raw.call(dr.LIST_OFFSETS, 10, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                                                    "topics": [{"name": denied, "partitions": [
                                                        {"partition_index": 0, "timestamp": -1}] * 2}]})
            out["list-offsets-twice"] = [[dict(p) for p in t.partitions] for t in answer.topics]
            answer = raw.call(dr.DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
                {"name": allowed, "partitions": [{"partition_index": 0, "offset": -1}]}]})
            out["delete-records"] = [[dict(p) for p in t.partitions] for t in answer.topics]
            answer = raw.call(dr.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
                {"topic": allowed, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
            out["offset-for-leader-epoch"] = [[dict(p) for p in t.partitions] for t in answer.topics]
        return out

    assert_same(sasl_pair.run(scenario), "requests refused by ACLs")
