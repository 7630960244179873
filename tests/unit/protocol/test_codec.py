"""Explicit codec behaviour: exact bytes, tagged fields, nullables, compact forms, malformed input."""

from __future__ import annotations

import contextlib
import copy
import pickle
import struct
import uuid

import pytest
from construct import Container
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.codec import message_class, record_codec, request_codec, response_codec
from protocol.errors import DecodeError, EncodeError
from protocol.primitives import Reader, read_uvarint, write_uvarint
from tests.unit.protocol.schema_strategies import value_strategy

API_VERSIONS, METADATA, PRODUCE, FETCH = 18, 3, 0, 1
ABSENT_V5 = {"cluster_id": None, "node_id": -1}  # ApiVersions v5 fields (KIP-1242), defaulted below v5


def test_compact_strings_and_empty_tag_section() -> None:
    c = request_codec(API_VERSIONS, 3)
    data = c.encode({"client_software_name": "ab", "client_software_version": "1"})
    assert data == b"\x03ab\x021\x00"
    assert c.decode(data) == {"client_software_name": "ab", "client_software_version": "1", **ABSENT_V5}


def test_non_flexible_strings_and_absent_fields_default() -> None:
    c = request_codec(API_VERSIONS, 2)
    assert c.encode({}) == b""
    # v3+ fields are absent in v2 but still present (defaulted) in the decoded value
    assert c.decode(b"") == {"client_software_name": "", "client_software_version": "", **ABSENT_V5}


def test_unknown_tagged_fields_are_skipped() -> None:
    c = request_codec(API_VERSIONS, 3)
    data = b"\x03ab\x021" + b"\x02" + b"\x63\x02zz" + b"\x64\x00"
    assert c.decode(data) == {"client_software_name": "ab", "client_software_version": "1", **ABSENT_V5}
    assert c.encode(c.decode(data)) == b"\x03ab\x021\x00"


def test_known_tagged_fields_exact_bytes_and_order() -> None:
    c = response_codec(API_VERSIONS, 3)
    # ZkMigrationReady (tag 3) given first, FinalizedFeaturesEpoch (tag 1): written in tag order.
    data = c.encode({"zk_migration_ready": True, "finalized_features_epoch": 5})
    assert data == (b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00"
                    + b"\x02" + b"\x01\x08" + struct.pack(">q", 5) + b"\x03\x01\x01")
    value = c.decode(data)
    assert value.finalized_features_epoch == 5 and value.zk_migration_ready is True
    assert value.supported_features == []  # absent tagged field -> default


def test_tagged_fields_equal_to_default_are_not_written() -> None:
    c = response_codec(API_VERSIONS, 3)
    assert c.encode({"finalized_features_epoch": -1, "zk_migration_ready": False}) == c.encode({})


def test_tagged_struct_field() -> None:
    c = response_codec(FETCH, 12)
    part = {"partition_index": 0, "records": b"x"}
    plain = c.encode({"responses": [{"topic": "t", "partitions": [part]}]})
    leader = {**part, "current_leader": {"leader_id": 3, "leader_epoch": 7}}
    tagged = c.encode({"responses": [{"topic": "t", "partitions": [leader]}]})
    # tag 1, size 9 (two int32 + the nested struct's empty tag section), payload
    assert len(tagged) == len(plain) + 1 + 1 + 9
    got = c.decode(tagged).responses[0].partitions[0]
    assert got.current_leader == {"leader_id": 3, "leader_epoch": 7}
    assert c.decode(plain).responses[0].partitions[0].current_leader == {"leader_id": -1, "leader_epoch": -1}


def test_nullable_strings() -> None:
    assert request_codec(PRODUCE, 3).encode({"transactional_id": None})[:2] == b"\xff\xff"
    assert request_codec(PRODUCE, 9).encode({"transactional_id": None})[:1] == b"\x00"
    assert request_codec(PRODUCE, 9).encode({"transactional_id": "tx"})[:3] == b"\x03tx"
    assert request_codec(PRODUCE, 9).decode(b"\x00\xff\xff\x00\x00\x00\x00\x01\x00").transactional_id is None


def test_nullable_arrays() -> None:
    assert request_codec(METADATA, 4).encode({"topics": None})[:4] == b"\xff\xff\xff\xff"
    assert request_codec(METADATA, 9).encode({"topics": None})[:1] == b"\x00"
    assert request_codec(METADATA, 9).decode(request_codec(METADATA, 9).encode({"topics": None})).topics is None
    # v0 topics are not nullable
    with pytest.raises(EncodeError):
        request_codec(METADATA, 0).encode({"topics": None})
    with pytest.raises(DecodeError):
        request_codec(METADATA, 0).decode(b"\xff\xff\xff\xff")


def test_null_in_non_nullable_string_is_rejected() -> None:
    with pytest.raises(EncodeError):
        request_codec(API_VERSIONS, 3).encode({"client_software_name": None})
    with pytest.raises(DecodeError):
        request_codec(API_VERSIONS, 3).decode(b"\x00\x00\x00")


def test_records_and_uuids() -> None:
    c = request_codec(PRODUCE, 9)
    batch = bytes(range(256)) * 4
    value = {"acks": -1, "timeout_ms": 1000,
             "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": memoryview(batch)}]}]}
    decoded = c.decode(c.encode(value))
    assert decoded.topic_data[0].partition_data[0].records == batch
    assert isinstance(decoded.topic_data[0].partition_data[0].records, bytes)
    tid = uuid.uuid4()
    m = response_codec(METADATA, 12)
    assert m.decode(m.encode({"topics": [{"name": "t", "topic_id": tid}]})).topics[0].topic_id == tid


def test_defaults_from_schema() -> None:
    v = response_codec(METADATA, 12).decode(response_codec(METADATA, 12).encode({"topics": [{}]}))
    assert v.topics[0].topic_authorized_operations == -2147483648  # "default": "-2147483648"
    assert v.cluster_authorized_operations == -2147483648  # absent in v12, still defaulted
    assert request_codec(FETCH, 12).decode(request_codec(FETCH, 12).encode({})).replica_id == -1


def test_int_out_of_range_is_encode_error() -> None:
    with pytest.raises(EncodeError):
        request_codec(PRODUCE, 9).encode({"acks": 1 << 15})
    with pytest.raises(EncodeError):
        request_codec(PRODUCE, 9).encode({"acks": "1"})


@pytest.mark.parametrize("bad", [
    b"\x00\x7f\xff\xff\xff",  # Produce v3: transactional_id length 32767 with no bytes
    b"\xff\xff\x00\x01\x00\x00\x00\x00\x7f\xff\xff\xff",  # array count far above the bytes left
    b"\xff\xff\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00",  # one trailing byte
    b"\xff\xfe",  # string length -2
])
def test_malformed_produce_v3(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        request_codec(PRODUCE, 3).decode(bad)


def test_overlong_varint_and_bad_utf8() -> None:
    with pytest.raises(DecodeError):
        request_codec(API_VERSIONS, 3).decode(b"\xff\xff\xff\xff\xff\x01")
    # malformed UTF-8 is no error: Kafka's readers (Java's String decoding) replace it with U+FFFD
    decoded = request_codec(API_VERSIONS, 3).decode(b"\x03\xff\xfe\x01\x00")
    assert decoded.client_software_name == "\ufffd\ufffd"


def test_decoding_does_not_read_past_the_buffer() -> None:
    c = request_codec(PRODUCE, 9)
    frame = c.encode({"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}]})
    view = memoryview(frame + b"NEXT")[: len(frame)]
    assert c.decode(view).topic_data[0].partition_data[0].records == b"abc"
    with pytest.raises(DecodeError):
        c.decode(memoryview(frame)[: len(frame) - 1])
    value, end = c.decode_prefix(frame + b"NEXT")
    assert end == len(frame)


def test_consecutive_fixed_fields_read_and_written_together() -> None:
    """A struct's run of fixed-size numbers (a Fetch partition's six) is one unpack: every cut inside it is a
    DecodeError, never a short read taken as a value; and one pack, which refuses an out-of-range member."""
    c = request_codec(FETCH, 12)
    value = {"topics": [{"topic": "t", "partitions": [{"partition": 7, "current_leader_epoch": -3,
                                                       "fetch_offset": 1 << 40, "last_fetched_epoch": 2,
                                                       "log_start_offset": -1, "partition_max_bytes": 99}]}]}
    frame = c.encode(value)
    partition = c.decode(frame).topics[0].partitions[0]
    assert (partition.partition, partition.current_leader_epoch, partition.fetch_offset, partition.last_fetched_epoch,
            partition.log_start_offset, partition.partition_max_bytes) == (7, -3, 1 << 40, 2, -1, 99)
    at = frame.index(struct.pack(">ii", 7, -3))
    assert frame[at:at + 32] == struct.pack(">iiqiqi", 7, -3, 1 << 40, 2, -1, 99)
    for cut in range(at + 1, at + 32):
        with pytest.raises(DecodeError):
            c.decode(frame[:cut])
    value["topics"][0]["partitions"][0]["last_fetched_epoch"] = 1 << 31
    with pytest.raises(EncodeError):
        c.encode(value)


def test_uvarint_buffer_helpers() -> None:
    for n in (0, 1, 127, 128, 300, 16383, 16384, (1 << 32) - 1):
        data = write_uvarint(n)
        assert read_uvarint(b"x" + data, 1) == (n, 1 + len(data))
    with pytest.raises(DecodeError):
        read_uvarint(b"\x80")
    with pytest.raises(EncodeError):
        write_uvarint(-1)


def test_record_codecs() -> None:
    c = record_codec("ShareSnapshotValue", 0)
    value = {"snapshot_epoch": 1, "state_epoch": 2, "leader_epoch": 3, "start_offset": 10,
             "state_batches": [{"first_offset": 10, "last_offset": 19, "delivery_state": 0, "delivery_count": 1}]}
    assert c.decode(c.encode(value)).state_batches[0].last_offset == 19
    t = record_codec("TopicRecord", 0)
    tid = uuid.uuid4()
    assert t.decode(t.encode({"name": "a", "topic_id": tid})) == {"name": "a", "topic_id": tid}


@pytest.mark.parametrize(("kind", "api_key", "version"), [
    ("request", PRODUCE, 9), ("request", FETCH, 12), ("request", METADATA, 12), ("response", FETCH, 16),
    ("request", 78, 1), ("response", 78, 2), ("request", 76, 1), ("response", 18, 3),
])
@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=64))
def test_garbage_only_raises_decode_error(kind: str, api_key: int, version: int, data: bytes) -> None:
    codec = (request_codec if kind == "request" else response_codec)(api_key, version)
    with contextlib.suppress(DecodeError):
        codec.decode(data)


@pytest.mark.parametrize(("kind", "api_key", "version"), [
    ("request", PRODUCE, 9), ("response", FETCH, 12), ("response", METADATA, 12), ("request", 79, 2),
    ("response", 18, 3), ("request", METADATA, 3),
])
@settings(max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compiled_matches_interpreted(kind: str, api_key: int, version: int, data: st.DataObject) -> None:
    codec = (request_codec if kind == "request" else response_codec)(api_key, version)
    value = data.draw(value_strategy(codec.message, version))
    encoded = codec.encode(value)
    assert codec.construct.build(value) == encoded
    assert codec.construct.parse_stream(Reader(encoded)) == codec.decode(encoded)


def test_decoded_fields_are_class_properties() -> None:
    """Decoded structs read their fields through class-level properties (no failed attribute lookup first),
    while behaving as the plain Containers they were: items, methods, missing names, copies and pickles."""
    c = request_codec(FETCH, 12)
    data = c.encode({"max_wait_ms": 7, "topics": [{"topic": "t", "partitions": [{"partition": 3}]}]})
    for value in (c.decode(data), c.construct.parse_stream(Reader(data))):  # compiled and interpreted paths
        assert isinstance(value, Container)
        assert isinstance(type(value).__dict__["max_wait_ms"], property)
        assert value.max_wait_ms == value["max_wait_ms"] == 7
        partition = value.topics[0].partitions[0]
        assert isinstance(type(partition).__dict__["partition"], property)
        assert partition.partition == 3 and partition.fetch_offset == 0
        value.max_wait_ms = 9  # construct's __setattr__ writes the item, the property reads it
        assert value.max_wait_ms == value["max_wait_ms"] == 9
        with pytest.raises(AttributeError):
            _ = value.no_such_field
        assert value.get("no_such_field", 1) == 1 and callable(value.items)
        for twin in (pickle.loads(pickle.dumps(value)), copy.deepcopy(value), value.copy()):
            assert type(twin) is Container and twin == value


def test_field_named_like_a_container_method_stays_a_method() -> None:
    cls = message_class(("items", "update", "offset"))
    value = cls(items=[1], update=2, offset=3)
    assert callable(value.items) and callable(value.update) and value["items"] == [1]
    assert value.offset == 3
