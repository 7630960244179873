"""ShareSnapshot / ShareUpdate records on `__share_group_state`: encoding and decoding.

Wire format (Kafka's CoordinatorRecordSerde):
    key   = int16 record type (the key schema's apiKey: ShareSnapshot 0, ShareUpdate 1) + key struct (version 0)
    value = int16 value version + value struct, or None for a tombstone
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from protocol.coordinator_records import (
    CoordinatorRecord,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    record_type,
    record_type_of,
)
from protocol.primitives import write_uvarint

from .keys import SharePartitionKey
from .state import UNKNOWN_DELIVERY_COMPLETE_COUNT, SharePartitionState, ShareUpdate, StateBatch

SNAPSHOT = "ShareSnapshot"
UPDATE = "ShareUpdate"
SNAPSHOT_TYPE = record_type_of(SNAPSHOT)
UPDATE_TYPE = record_type_of(UPDATE)
_NAMES = {SNAPSHOT_TYPE: SNAPSHOT, UPDATE_TYPE: UPDATE}


Record = CoordinatorRecord  # one record to append to `__share_group_state`


@dataclass(frozen=True)
class DecodedRecord:
    name: str  # SNAPSHOT or UPDATE
    key: SharePartitionKey
    value: SharePartitionState | ShareUpdate | None  # None for a tombstone


@lru_cache(maxsize=1 << 14)  # one key per share-partition, encoded again by every write of its state
def _key_bytes(name: str, key: SharePartitionKey) -> bytes:
    return encode_key(name, {"group_id": key.group_id, "topic_id": key.topic_id, "partition": key.partition})



def _batches(bs: tuple[StateBatch, ...]) -> list[dict[str, int]]:
    return [b._asdict() for b in bs]


def encode_snapshot(key: SharePartitionKey, s: SharePartitionState) -> tuple[bytes, bytes]:
    value = encode_value(SNAPSHOT, {
        "snapshot_epoch": s.snapshot_epoch, "state_epoch": s.state_epoch, "leader_epoch": s.leader_epoch,
        "start_offset": s.start_offset, "delivery_complete_count": s.delivery_complete_count,
        "create_timestamp": s.create_timestamp, "write_timestamp": s.write_timestamp,
        "state_batches": _batches(s.state_batches)})
    return _key_bytes(SNAPSHOT, key), value


def encode_update(key: SharePartitionKey, u: ShareUpdate) -> tuple[bytes, bytes]:
    """A ShareUpdate record (one per acknowledging ShareFetch): see `update_key` and `encode_update_value`."""
    return _key_bytes(UPDATE, key), _update_value(u)


def update_key(key: SharePartitionKey) -> bytes:
    """The key of the share-partition's ShareUpdate records."""
    return _key_bytes(UPDATE, key)


def encode_update_value(u: ShareUpdate) -> bytes:
    """A ShareUpdate value packed directly, byte for byte what encode_value(UPDATE, ...) writes (ShareUpdateValue
    v0, flexible), at a tenth of its cost."""
    return _update_value(u)


_UPDATE_HEAD = struct.Struct(">hiiq")  # value version 0, SnapshotEpoch, LeaderEpoch, StartOffset
_STATE_BATCH = struct.Struct(">qqbhB")  # FirstOffset, LastOffset, DeliveryState, DeliveryCount, no tagged fields
_DCC_TAG = struct.Struct(">BBBi")  # one tagged field: tag 0 (DeliveryCompleteCount), size 4, int32


def _update_value(u: ShareUpdate) -> bytes:
    batches = u.state_batches
    parts = [_UPDATE_HEAD.pack(0, u.snapshot_epoch, u.leader_epoch, u.start_offset), write_uvarint(len(batches) + 1)]
    parts.extend(_STATE_BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count, 0)
                 for b in batches)
    dcc = u.delivery_complete_count
    parts.append(b"\x00" if dcc == UNKNOWN_DELIVERY_COMPLETE_COUNT else _DCC_TAG.pack(1, 0, 4, dcc))  # default: no tag
    return b"".join(parts)


def tombstone_keys(key: SharePartitionKey) -> tuple[bytes, bytes]:
    """Tombstone keys for a deleted share-partition: the snapshot key and the update key.

    Kafka writes only the snapshot tombstone. Both keys are tombstoned here so that a compacting cleaner can
    never leave an orphan ShareUpdate behind to resurrect the state on a later replay.
    """
    return _key_bytes(SNAPSHOT, key), _key_bytes(UPDATE, key)


def _state_batches(items: list[Any]) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in items)


def decode(key: bytes | memoryview, value: bytes | memoryview | None) -> DecodedRecord | None:
    """Decode a share-state record; None for a record type this coordinator does not own (Kafka ignores
    those too); DecodeError for malformed bytes or an unsupported value version."""
    name = _NAMES.get(record_type(key))
    if name is None:
        return None
    k = decode_key(name, key)
    skey = SharePartitionKey(k.group_id, k.topic_id, k.partition)
    if value is None:
        return DecodedRecord(name, skey, None)
    v = decode_value(name, value)
    if name == SNAPSHOT:
        return DecodedRecord(name, skey, SharePartitionState(
            snapshot_epoch=v.snapshot_epoch, state_epoch=v.state_epoch, leader_epoch=v.leader_epoch,
            start_offset=v.start_offset, delivery_complete_count=v.delivery_complete_count,
            create_timestamp=v.create_timestamp, write_timestamp=v.write_timestamp,
            state_batches=_state_batches(v.state_batches)))
    return DecodedRecord(name, skey, ShareUpdate(
        snapshot_epoch=v.snapshot_epoch, leader_epoch=v.leader_epoch, start_offset=v.start_offset,
        delivery_complete_count=v.delivery_complete_count, state_batches=_state_batches(v.state_batches)))
