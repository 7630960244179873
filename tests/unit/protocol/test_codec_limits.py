"""Lengths and counts as Kafka's generated readers check them, and error messages that never fail a response."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from protocol import schema
from protocol.codec import request_codec, response_codec
from protocol.errors import DecodeError, EncodeError
from protocol.primitives import MAX_STRING, Reader, read_compact_length

METADATA, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 3, 32, 44
SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
LONG = "g" * MAX_STRING  # the longest name a client may send


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@pytest.mark.parametrize(("api_key", "version", "value", "path"), [
    (SHARE_GROUP_DESCRIBE, 1, {"groups": [{"group_id": LONG, "error_code": 69,
                                           "error_message": f"Group {LONG} not found."}]},
     lambda v: v.groups[0].error_message),
    (DESCRIBE_CONFIGS, 4, {"results": [{"resource_name": LONG, "error_code": 3,
                                        "error_message": f"Topic {LONG} does not exist"}]},
     lambda v: v.results[0].error_message),
    (INCREMENTAL_ALTER_CONFIGS, 1, {"responses": [{"resource_name": LONG, "error_code": 40,
                                                   "error_message": f"Unknown config {LONG}"}]},
     lambda v: v.responses[0].error_message),
    (SHARE_ACKNOWLEDGE, 1, {"error_code": 73, "error_message": f"Share session for member {LONG} not found"},
     lambda v: v.error_message),
    (SHARE_FETCH, 1, {"error_code": 73, "error_message": f"Share session for member {LONG} not found"},
     lambda v: v.error_message),
    (SHARE_GROUP_HEARTBEAT, 1, {"error_code": 25, "error_message": f"Member {LONG} is not a member of group {LONG}."},
     lambda v: v.error_message),
])
def test_error_messages_quoting_a_long_client_string_are_cut_not_failed(api_key, version, value, path):
    codec = response_codec(api_key, version)
    message = path(codec.decode(codec.encode(value)))
    assert len(message.encode()) <= MAX_STRING
    assert message.endswith("...")


def test_every_response_error_message_is_cut_at_a_utf8_boundary():
    text = "é" * MAX_STRING  # two bytes each
    checked = 0
    for spec in schema.api_specs().values():
        message = schema.response_message(spec.api_key)
        for version in range(spec.min_version, spec.max_version + 1):
            top = [f for f in message.struct.fields if f.name == "ErrorMessage" and f.present(version)
                   and not f.tagged(version)]
            if not top:
                continue
            codec = response_codec(spec.api_key, version)
            decoded = codec.decode(codec.encode({"error_message": text}))
            cut = decoded.error_message
            assert cut.endswith("...") and set(cut[:-3]) == {"é"}
            assert len(cut.encode()) <= MAX_STRING
            checked += 1
    assert checked >= 10


def test_other_strings_over_the_limit_still_fail_to_encode():
    with pytest.raises(EncodeError):
        response_codec(SHARE_GROUP_DESCRIBE, 1).encode({"groups": [{"group_id": LONG + "x"}]})


def test_compact_string_longer_than_0x7fff_is_malformed():
    # ShareGroupDescribe v1 request: compact array of one compact string of 32 768 bytes.
    body = uvarint(2) + uvarint(MAX_STRING + 2) + b"g" * (MAX_STRING + 1) + b"\x00" + b"\x00"
    with pytest.raises(DecodeError, match="too long"):
        request_codec(SHARE_GROUP_DESCRIBE, 1).decode(body)
    ok = uvarint(2) + uvarint(MAX_STRING + 1) + b"g" * MAX_STRING + b"\x00" + b"\x00"
    assert request_codec(SHARE_GROUP_DESCRIBE, 1).decode(ok).group_ids == [LONG]


def test_compact_lengths_are_signed_32_bit_as_in_kafka():
    assert read_compact_length(Reader(uvarint(0))) == -1
    assert read_compact_length(Reader(uvarint(5))) == 4
    assert read_compact_length(Reader(uvarint(0xFFFFFFFF))) == -2  # Java int -1, minus one
    assert read_compact_length(Reader(uvarint(1 << 31))) < 0
    # Metadata v12: Topics is a nullable compact array: a length of 2^31 reads as null, as Kafka reads it.
    body = uvarint(1 << 31) + b"\x01\x00" + b"\x00"
    assert request_codec(METADATA, 12).decode(body).topics is None
    # Non-nullable: "serialized as null" is malformed.
    with pytest.raises(DecodeError):
        request_codec(SHARE_GROUP_DESCRIBE, 1).decode(uvarint(1 << 31) + b"\x00\x00")


def test_negative_non_compact_lengths_read_as_null():
    # Metadata v4: nullable int32 array, then allow_auto_topic_creation.
    assert request_codec(METADATA, 4).decode(struct.pack(">i", -7) + b"\x01").topics is None
    with pytest.raises(DecodeError):
        request_codec(METADATA, 0).decode(struct.pack(">i", -7))


@pytest.mark.parametrize("count", [0x7FFFFFFF, 10_000_000, 60])
def test_array_counts_are_checked_against_the_bytes_left_before_allocating(count):
    """A declared count whose elements cannot fit in what is left is malformed before any list is built: each
    Metadata v4 topic takes at least 2 bytes (its name's length)."""
    body = struct.pack(">i", count) + b"\x00\x01a" * 30 + b"\x01"
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match="bytes left"):
            request_codec(METADATA, 4).decode(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_struct_arrays_use_the_smallest_element_size():
    # Fetch v4 topics: each topic is at least a string (2) + partitions array (4) = 6 bytes; 20 declared in
    # 30 bytes cannot fit, although 20 < 30 would pass Kafka's one-byte-per-element check.
    head = struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0)
    with pytest.raises(DecodeError, match="bytes left"):
        request_codec(1, 4).decode(head + struct.pack(">i", 20) + b"\x00" * 30)
