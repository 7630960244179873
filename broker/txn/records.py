"""TransactionLog records on `__transaction_state`: encoding and decoding (Kafka's TransactionLog).

Wire format (Kafka's coordinator record framing):
    key   = int16 record type 0 + TransactionLogKey (version 0): the transactional id
    value = int16 value version + TransactionLogValue, or None (a tombstone: the id expired)
The value version follows the finalized transaction.version: 0 below TV1, 1 (flexible, with the tagged
previous/next producer ids and the client's transaction version) from TV1 on.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from protocol.coordinator_records import (
    CoordinatorRecord,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    record_type,
)

from .metadata import TopicPartition, TxnMetadata
from .state import TxnState

NAME = "TransactionLog"
RECORD_TYPE = 0  # TransactionLogKey's apiKey (Kafka's CoordinatorRecordType.TRANSACTION_LOG)


Record = CoordinatorRecord  # one record to append to `__transaction_state`


@dataclass(frozen=True)
class DecodedRecord:
    transactional_id: str
    metadata: TxnMetadata | None  # None for a tombstone


def key_bytes(transactional_id: str) -> bytes:
    return encode_key(NAME, {"transactional_id": transactional_id})


def _partitions(m: TxnMetadata) -> list[dict[str, object]] | None:
    if m.state is TxnState.EMPTY:
        if m.topic_partitions:
            raise ValueError(f"{m.transactional_id}: an Empty transaction cannot hold partitions")
        return None  # Kafka writes null for Empty
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in m.topic_partitions:
        by_topic[tp.topic].append(tp.partition)
    # sorted so that the same metadata always makes the same bytes
    return [{"topic": t, "partition_ids": sorted(ps)} for t, ps in sorted(by_topic.items())]


def value_bytes(m: TxnMetadata, version: int) -> bytes:
    return encode_value(NAME, {
        "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
        "transaction_timeout_ms": m.txn_timeout_ms, "transaction_status": int(m.state),
        "transaction_partitions": _partitions(m),
        "transaction_last_update_timestamp_ms": m.txn_last_update_timestamp,
        "transaction_start_timestamp_ms": m.txn_start_timestamp,
        # tagged, version 1 only (version 0 has no place for them: they read back as defaults)
        "previous_producer_id": m.prev_producer_id, "next_producer_id": m.next_producer_id,
        "client_transaction_version": m.client_transaction_version,
    }, version)


def encode(m: TxnMetadata, version: int) -> tuple[bytes, bytes]:
    return key_bytes(m.transactional_id), value_bytes(m, version)


def decode(key: bytes | memoryview, value: bytes | memoryview | None) -> DecodedRecord | None:
    """Decode a `__transaction_state` record; None for a key type this coordinator does not know (skipped, as
    Kafka skips them); DecodeError for malformed bytes or an unsupported value version."""
    if record_type(key) != RECORD_TYPE:
        return None
    tid = decode_key(NAME, key).transactional_id
    if value is None:
        return DecodedRecord(tid, None)
    v = decode_value(NAME, value)
    state = TxnState(v.transaction_status)
    parts = frozenset() if state is TxnState.EMPTY else frozenset(
        TopicPartition(p.topic, i) for p in (v.transaction_partitions or ()) for i in p.partition_ids)
    return DecodedRecord(tid, TxnMetadata(
        transactional_id=tid, producer_id=v.producer_id, producer_epoch=v.producer_epoch,
        txn_timeout_ms=v.transaction_timeout_ms, state=state, topic_partitions=parts,
        txn_start_timestamp=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp=v.transaction_last_update_timestamp_ms,
        prev_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
        client_transaction_version=v.client_transaction_version))
