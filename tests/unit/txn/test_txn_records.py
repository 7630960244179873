"""`__transaction_state` records: the exact bytes Kafka writes, decoding, and the id -> partition mapping."""

from __future__ import annotations

import struct

import pytest

from broker.txn import TV_0, TV_2, TopicPartition, TxnMetadata, TxnState
from broker.txn import records as rec
from broker.txn.partitioning import partition_for
from protocol.errors import DecodeError


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


ONGOING = TxnMetadata("my-txn", producer_id=4000, producer_epoch=7, txn_timeout_ms=60_000,
                      state=TxnState.ONGOING,
                      topic_partitions=frozenset({TopicPartition("orders", 2), TopicPartition("orders", 0),
                                                  TopicPartition("audit", 5)}),
                      txn_start_timestamp=1_700_000_000_000, txn_last_update_timestamp=1_700_000_000_500,
                      prev_producer_id=3999, next_producer_id=-1, client_transaction_version=TV_2)


def test_key_bytes() -> None:
    # int16 record type 0, then TransactionLogKey v0: int16-length string
    assert rec.key_bytes("my-txn") == i16(0) + i16(6) + b"my-txn"


def test_value_version_0_bytes() -> None:
    # TransactionLogValue v0 (not flexible): int64 pid, int16 epoch, int32 timeout, int8 status,
    # int32-length array of (int16-length topic, int32-length int32 array), int64 last update, int64 start.
    expected = (i16(0) + i64(4000) + i16(7) + i32(60_000) + i8(1)
                + i32(2)
                + i16(5) + b"audit" + i32(1) + i32(5)
                + i16(6) + b"orders" + i32(2) + i32(0) + i32(2)
                + i64(1_700_000_000_500) + i64(1_700_000_000_000))
    assert rec.value_bytes(ONGOING, 0) == expected


def test_value_version_1_bytes() -> None:
    # v1 (flexible): compact lengths (n+1 as uvarint), a tagged-field section after every struct; the
    # top-level tags are written in tag order and only when not default: 0 PreviousProducerId (int64),
    # 1 NextProducerId (default -1, left out here), 2 ClientTransactionVersion (int16).
    expected = (i16(1) + i64(4000) + i16(7) + i32(60_000) + i8(1)
                + bytes([3])
                + bytes([6]) + b"audit" + bytes([2]) + i32(5) + bytes([0])
                + bytes([7]) + b"orders" + bytes([3]) + i32(0) + i32(2) + bytes([0])
                + i64(1_700_000_000_500) + i64(1_700_000_000_000)
                + bytes([2]) + bytes([0, 8]) + i64(3999) + bytes([2, 2]) + i16(2))
    assert rec.value_bytes(ONGOING, 1) == expected


def test_empty_state_writes_null_partitions() -> None:
    m = TxnMetadata("t", 5, 0, 1000, TxnState.EMPTY, txn_last_update_timestamp=9, prev_producer_id=5)
    v0 = rec.value_bytes(m, 0)
    assert v0 == i16(0) + i64(5) + i16(0) + i32(1000) + i8(0) + i32(-1) + i64(9) + i64(-1)
    v1 = rec.value_bytes(m, 1)
    # null compact array = 0; tags: prev pid only (client TV 0 is the default)
    assert v1 == i16(1) + i64(5) + i16(0) + i32(1000) + i8(0) + bytes([0]) + i64(9) + i64(-1) + \
        bytes([1, 0, 8]) + i64(5)


def test_next_producer_id_tag() -> None:
    m = TxnMetadata("t", 5, 32767, 1000, TxnState.PREPARE_ABORT, frozenset(), 1, 2, prev_producer_id=5,
                    next_producer_id=6, client_transaction_version=TV_2)
    tags = rec.value_bytes(m, 1)[-(1 + 10 + 10 + 4):]
    assert tags == bytes([3]) + bytes([0, 8]) + i64(5) + bytes([1, 8]) + i64(6) + bytes([2, 2]) + i16(2)


def test_round_trip_and_version_0_drops_the_tagged_fields() -> None:
    k, v = rec.encode(ONGOING, 1)
    d = rec.decode(k, v)
    assert d is not None and d.transactional_id == "my-txn" and d.metadata == ONGOING
    d0 = rec.decode(k, rec.value_bytes(ONGOING, 0))
    assert d0 is not None and d0.metadata is not None
    assert (d0.metadata.prev_producer_id, d0.metadata.next_producer_id,
            d0.metadata.client_transaction_version) == (-1, -1, TV_0)
    assert d0.metadata.topic_partitions == ONGOING.topic_partitions


def test_tombstone_unknown_type_and_bad_bytes() -> None:
    k = rec.key_bytes("gone")
    d = rec.decode(k, None)
    assert d is not None and d.transactional_id == "gone" and d.metadata is None
    assert rec.decode(i16(1) + k[2:], None) is None  # not a transaction log key: skipped
    with pytest.raises(DecodeError):
        rec.decode(k, i16(2) + rec.value_bytes(ONGOING, 1)[2:])  # value version 2 does not exist
    with pytest.raises(DecodeError):
        rec.decode(k, rec.value_bytes(ONGOING, 1)[:-3])


def test_empty_state_with_partitions_is_refused() -> None:
    bad = TxnMetadata("t", 5, 0, 1000, TxnState.EMPTY, frozenset({TopicPartition("a", 0)}))
    with pytest.raises(ValueError):
        rec.value_bytes(bad, 1)


@pytest.mark.parametrize(("tid", "java_hash"), [
    ("hello", 99162322),
    ("my-txn", None),
    ("polygenelubricants", -(1 << 31)),  # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0
])
def test_partition_for_is_javas_string_hash(tid: str, java_hash: int | None) -> None:
    from protocol.java_hash import java_string_hash
    h = java_string_hash(tid)
    if java_hash is not None:
        assert h == java_hash
    expected = 0 if h == -(1 << 31) else abs(h) % 50
    assert partition_for(tid, 50) == expected
    assert partition_for("hello", 50) == 22
