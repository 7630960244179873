"""Request/response headers and frame splitting."""

from __future__ import annotations

import uuid

import pytest

from protocol.errors import DecodeError
from protocol.framing import (
    FrameSizeError,
    FrameSplitter,
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request,
    encode_request_header,
    encode_response,
    encode_response_header,
    frame_size,
    lone_frame_size,
    request_header_version,
    response_header_version,
    split_frames,
)


def test_header_versions() -> None:
    assert request_header_version(18, 2) == 1
    assert request_header_version(18, 3) == 2
    assert request_header_version(18, 5) == 2  # above what we serve: still the right shape
    assert request_header_version(0, 8) == 1
    assert request_header_version(0, 9) == 2
    assert request_header_version(999, 0) == 1  # unknown api
    assert response_header_version(18, 3) == 0  # ApiVersions: always v0
    assert response_header_version(3, 8) == 0
    assert response_header_version(3, 9) == 1
    assert response_header_version(78, 1) == 1


def test_request_header_v1_bytes() -> None:
    h = RequestHeader(3, 8, 7, "cli")
    raw = encode_request_header(h)
    assert raw == b"\x00\x03\x00\x08\x00\x00\x00\x07\x00\x03cli"
    assert decode_request_header(raw + b"BODY") == (h, len(raw))


def test_request_header_v2_client_id_is_not_compact() -> None:
    h = RequestHeader(3, 12, 1, None)
    raw = encode_request_header(h)
    assert raw == b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff\x00"
    assert decode_request_header(raw) == (h, len(raw))
    # header tagged fields are skipped
    raw_tags = raw[:-1] + b"\x01\x05\x01z"
    assert decode_request_header(raw_tags + b"B") == (h, len(raw_tags))


def test_unknown_api_key_decodes_as_v1() -> None:
    raw = b"\x03\xe7\x00\x00\x00\x00\x00\x09\x00\x01x" + b"\x00rest"
    header, offset = decode_request_header(raw)
    assert header == RequestHeader(999, 0, 9, "x")
    assert offset == 11


@pytest.mark.parametrize("raw", [b"", b"\x00\x03\x00\x08\x00", b"\x00\x03\x00\x08\x00\x00\x00\x07\x00\x05ab"])
def test_truncated_header(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_request_header(raw)


def test_encode_response() -> None:
    assert encode_response(7, 0, b"AB") == b"\x00\x00\x00\x06\x00\x00\x00\x07AB"
    assert encode_response(7, 1, b"AB") == b"\x00\x00\x00\x07\x00\x00\x00\x07\x00AB"
    assert encode_response_header(7, 1, 2) + b"AB" == encode_response(7, 1, b"AB")
    assert decode_response_header(encode_response(7, 1, b"AB")[4:], 1) == (7, 5)
    with pytest.raises(ValueError):
        encode_response(1, 2, b"")


def test_split_frames() -> None:
    a = encode_request(RequestHeader(18, 3, 1, "c"), b"\x00\x00\x00")
    b = encode_request(RequestHeader(3, 12, 2, "c"), b"\x00")
    frames, used = split_frames(a + b + b[:5])
    assert [bytes(f) for f in frames] == [a[4:], b[4:]]
    assert used == len(a) + len(b)
    with pytest.raises(DecodeError):
        split_frames(b"\xff\xff\xff\xff")


def test_frame_splitter_takes_whole_frames_from_a_stream() -> None:
    a = encode_request(RequestHeader(18, 3, 1, "c"), b"\x00\x00\x00")
    b = encode_request(RequestHeader(3, 12, 2, "c"), b"\x00")
    frames = FrameSplitter()
    frames.feed(a[:3])
    assert frames.frame_size(1000) is None and not frames.has_frame()
    frames.feed(a[3:] + b[:5])
    assert frames.has_frame()
    size = frames.frame_size(1000)
    assert size == len(a) - 4
    assert bytes(frames.pop(size)) == a[4:]  # a copy: b's first bytes stay
    assert len(frames) == 5 and frames.frame_size(1000) is None
    frames.feed(b[5:])
    whole = frames.pop(frames.frame_size(1000))
    assert isinstance(whole, memoryview) and bytes(whole) == b[4:]  # the whole buffer handed over
    assert len(frames) == 0
    frames.feed(b"\x00\x00\x10\x00")  # 4096 > the limit: refused as soon as the prefix is in
    with pytest.raises(FrameSizeError) as info:
        frames.frame_size(1000)
    assert (info.value.size, info.value.max_size) == (4096, 1000)
    assert frames.has_frame() is False  # has_frame checks no limit
    frames.clear()
    assert len(frames) == 0


def test_frame_size_helpers() -> None:
    a = encode_request(RequestHeader(18, 3, 1, "c"), b"\x00")
    assert frame_size(a[:3], 100) is None
    assert frame_size(a, 100) == len(a) - 4
    assert frame_size(b"xx" + a, 100, pos=2) == len(a) - 4
    with pytest.raises(DecodeError):
        frame_size(b"\xff\xff\xff\xff", 100)
    assert lone_frame_size(a, 100) == len(a) - 4
    assert lone_frame_size(a + a, 100) is None
    assert lone_frame_size(a[:-1], 100) is None
    assert lone_frame_size(a, len(a) - 5) is None  # over the limit


def test_a_response_in_chunks_keeps_record_batches_as_given():
    """Fetch/ShareFetch responses: the frame is the header then the body's chunks; a record field of at least
    `min_chunk` bytes is the caller's own buffer (no copy), the rest is joined into small chunks."""
    from protocol.codec import response_codec
    from protocol.framing import encode_response, encode_response_chunks

    records = memoryview(b"r" * 40_000)
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 5, "records": records}]}]}
    codec = response_codec(1, 12)
    chunks = codec.encode_chunks(body, min_chunk=16384)
    assert any(c is records for c in chunks) and len(chunks) == 3
    frame = encode_response_chunks(7, 1, chunks)
    assert b"".join(frame) == encode_response(7, 1, codec.encode(body))


def test_a_records_field_in_parts_is_encoded_as_their_concatenation():
    """A share acquisition served from two log reads answers with both views (BytesParts): the encoding equals
    that of the joined bytes, in one buffer or in chunks, and the chunks keep the large parts as given."""
    from protocol.codec import response_codec
    from protocol.primitives import BytesParts

    first, second, small = memoryview(b"a" * 30_000), memoryview(b"b" * 20_000), b"c" * 100
    codec = response_codec(78, 2)

    def body(records) -> dict:
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 1,
                "responses": [{"topic_id": uuid.UUID(int=7), "partitions": [{
                    "partition_index": 0, "error_code": 0, "error_message": None, "acknowledge_error_code": 0,
                    "acknowledge_error_message": None, "current_leader": {"leader_id": 1, "leader_epoch": 0},
                    "records": records, "acquired_records": []}]}], "node_endpoints": []}

    joined = codec.encode(body(b"a" * 30_000 + b"b" * 20_000 + small))
    parts = BytesParts([first, second, small])
    assert len(parts) == 50_100
    assert codec.encode(body(parts)) == joined
    chunks = codec.encode_chunks(body(parts), min_chunk=16384)
    assert b"".join(chunks) == joined
    assert any(c is first for c in chunks) and any(c is second for c in chunks)
    assert codec.decode(joined).responses[0].partitions[0].records == parts.join()
