"""Malformed and unsupported requests against Kafka 4.4 and Shoal, from raw sockets where our codecs cannot build
the frame: what each broker answers (correlation id, error code) or whether it closes the connection. Unsupported
versions (ApiVersions' v0 answer, other APIs closed), unknown api keys, truncated bodies and trailing bytes, frame
sizes (negative, zero, too short for a header, over socket.request.max.bytes), header fields (client id lengths,
null and non-UTF-8 client ids, header tags, negative correlation ids)."""

from __future__ import annotations

import struct

import pytest

from protocol.codec import request_codec
from tests.helpers import differential_raw as dr
from tests.helpers.differential import Target, assert_same

pytestmark = pytest.mark.integration

API_VERSIONS = 18
# the APIs of this area whose advertised versions are compared (other areas compare theirs)
OUR_APIS = {0, 1, 2, 3, 18, 21, 23}


def body(api_key: int, version: int, value: dict) -> bytes:
    return request_codec(api_key, version).encode(value)


AV3 = body(API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1"})
frame = dr.request_frame

CASES: dict[str, tuple[bytes, int | None, int]] = {
    # ApiVersions: an unsupported version is answered in the v0 layout (KIP-511), the connection stays open
    "api-versions-v6": (frame(API_VERSIONS, 6, AV3, flexible=True), API_VERSIONS, 0),
    "api-versions-v127": (frame(API_VERSIONS, 127, flexible=True), API_VERSIONS, 0),
    "api-versions-v-1": (frame(API_VERSIONS, -1), API_VERSIONS, 0),
    "api-versions-v127-header-v1": (frame(API_VERSIONS, 127), None, 0),
    "api-versions-v0": (frame(API_VERSIONS, 0), API_VERSIONS, 0),
    "api-versions-v4": (frame(API_VERSIONS, 4, AV3, flexible=True), API_VERSIONS, 4),
    "api-versions-v5-with-a-v3-body": (frame(API_VERSIONS, 5, AV3[:-1], flexible=True), None, 0),
    "api-versions-v3-trailing-bytes": (frame(API_VERSIONS, 3, AV3 + b"\x01\x02\x03", flexible=True), API_VERSIONS, 3),
    "api-versions-v3-truncated": (frame(API_VERSIONS, 3, AV3[:2], flexible=True), None, 0),
    # other APIs: a version not served closes the connection
    "produce-v0": (frame(0, 0, struct.pack(">hii", 1, 1000, 0)), None, 0),
    "produce-v2": (frame(0, 2, struct.pack(">hii", 1, 1000, 0)), None, 0),
    "produce-v14": (frame(0, 14, b"\x00" * 12, flexible=True), None, 0),
    "fetch-v3": (frame(1, 3, b"\x00" * 30), None, 0),
    "fetch-v99": (frame(1, 99, b"\x00" * 30, flexible=True), None, 0),
    "list-offsets-v0": (frame(2, 0, b"\xff\xff\xff\xff\x00\x00\x00\x00"), None, 0),
    "metadata-v0": (frame(3, 0, body(3, 0, {"topics": []})), None, 0),
    "delete-records-v3": (frame(21, 3, b"\x00" * 8, flexible=True), None, 0),
    "offset-for-leader-epoch-v1": (frame(23, 1, b"\x00" * 8), None, 0),
    # unknown api keys
    "api-key-999": (frame(999, 0), None, 0),
    "api-key-100": (frame(100, 0), None, 0),
    "api-key-minus-1": (frame(-1, 0), None, 0),
    # bodies
    "produce-v9-truncated": (frame(0, 9, b"\x00\x01", flexible=True), None, 0),
    "metadata-v12-bad-varint": (frame(3, 12, b"\xff\xff\xff\xff\xff", flexible=True), None, 0),
    "metadata-v12-non-utf8-topic": (frame(3, 12, body(3, 12, {"topics": [{"name": "ab"}],
                                                              "allow_auto_topic_creation": False}).replace(
        b"ab", b"\xff\xfe"), flexible=True), 3, 12),
    # frame sizes
    "size-over-request-max-bytes": (struct.pack(">i", 200 * 1024 * 1024) + b"x" * 100, None, 0),
    "size-negative": (struct.pack(">i", -5), None, 0),
    "size-zero": (struct.pack(">i", 0), None, 0),
    "size-3": (struct.pack(">i", 3) + b"abc", None, 0),
    "api-key-only": (struct.pack(">i", 2) + b"\x00\x12", None, 0),
    # header fields
    "client-id-length-minus-2": (frame(API_VERSIONS, 0, client_id=b"", client_id_length=-2), API_VERSIONS, 0),
    "client-id-past-the-frame": (frame(API_VERSIONS, 0, client_id=b"ab", client_id_length=50), None, 0),
    "client-id-null": (frame(API_VERSIONS, 0, client_id=None), API_VERSIONS, 0),
    "client-id-not-utf8": (frame(API_VERSIONS, 0, client_id=b"\xff\xfe"), API_VERSIONS, 0),
    "header-tags-malformed": (frame(3, 12, b"\x05\x01"), None, 0),
    "correlation-id-negative": (frame(API_VERSIONS, 0, correlation_id=-9), API_VERSIONS, 0),
}


def observed(port: int, data: bytes, api_key: int | None, version: int) -> dict:
    got = dr.probe(port, data, api_key=api_key, version=version)
    decoded = got.pop("body", None)
    if decoded is not None:
        got["error_code"] = decoded.error_code if "error_code" in decoded else None
        if api_key == API_VERSIONS:
            got["api_keys"] = [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys
                               if k.api_key in OUR_APIS]
        if api_key == 3:
            got["topics"] = [(t.name, t.error_code) for t in decoded.topics]
    return got


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_and_unsupported_requests(pair, case):
    data, api_key, version = CASES[case]
    assert_same(pair.run(lambda target: observed(target.port, data, api_key, version)), case)


def test_the_connection_serves_on_after_an_unsupported_api_versions(pair):
    """After the v0 UNSUPPORTED_VERSION answer the client retries on the same connection."""
    def scenario(target: Target):
        with target.raw() as raw:
            raw.sock.sendall(frame(API_VERSIONS, 9, flexible=True, correlation_id=1))
            first = raw.receive(API_VERSIONS, 0, 1)
            second = raw.call(API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1"})
        return {"first": (first.error_code, [(k.api_key, k.min_version, k.max_version) for k in first.api_keys]),
                "second": (second.error_code, [(k.api_key, k.min_version, k.max_version) for k in second.api_keys
                                               if k.api_key in OUR_APIS])}

    assert_same(pair.run(scenario), "ApiVersions retried after UNSUPPORTED_VERSION")
