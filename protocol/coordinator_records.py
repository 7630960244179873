"""Coordinator record framing (Kafka's CoordinatorRecordSerde), shared by the group and share coordinators.

Key bytes: int16 record type (the key schema's apiKey) + the key struct (version 0). Value bytes: int16 value
version + the value struct; a tombstone has no value. Most values are written in version 0; the classic group
and offset records use the versions Kafka writes (GroupMetadataValue 3, OffsetCommitValue 1 or 3), and any
version of the value schema's range is read.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping
from typing import Any, NamedTuple

from construct import Container

from protocol import schema
from protocol.codec import record_codec
from protocol.errors import DecodeError

VALUE_VERSION = 0
_I16 = struct.Struct(">h")


class CoordinatorRecord(NamedTuple):
    """One record to append to a coordinator's topic: the partition, key bytes, value bytes (None = tombstone)."""

    partition: int
    key: bytes
    value: bytes | None


@functools.cache
def record_type_of(name: str) -> int:
    """The record type of `name` (e.g. "ShareSnapshot"): the apiKey of its key schema."""
    return schema.records()[name + "Key"].api_key  # type: ignore[return-value]


def record_type(key: bytes | memoryview) -> int:
    if len(key) < 2:
        raise DecodeError("coordinator record key shorter than its type")
    rtype: int = _I16.unpack_from(key)[0]
    return rtype


def encode_key(name: str, key: Mapping[str, Any]) -> bytes:
    return _I16.pack(record_type_of(name)) + record_codec(name + "Key", 0).encode(key)


def encode_value(name: str, value: Mapping[str, Any], version: int = VALUE_VERSION) -> bytes:
    return _I16.pack(version) + record_codec(name + "Value", version).encode(value)


def decode_key(name: str, key: bytes | memoryview) -> Container[Any]:
    return record_codec(name + "Key", 0).decode(memoryview(key)[2:])


def value_version(value: bytes | memoryview) -> int:
    if len(value) < 2:
        raise DecodeError("coordinator record value shorter than its version")
    version: int = _I16.unpack_from(value)[0]
    return version


def decode_value(name: str, value: bytes | memoryview) -> Container[Any]:
    version = value_version(value)
    if version not in schema.records()[name + "Value"].versions():
        raise DecodeError(f"{name} value version {version} not supported")
    return record_codec(name + "Value", version).decode(memoryview(value)[2:])
