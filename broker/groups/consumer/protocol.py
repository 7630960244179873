"""The consumer protocol embedded in classic group bytes (JoinGroup metadata, SyncGroup assignment).

Classic groups carry it as opaque bytes; the coordinator reads it only for what Kafka reads it for: the topics a
group subscribes to (offset expiry, OffsetDelete) and, for classic members of consumer groups, the subscription
and owned partitions in and the assignment out. Bytes are an int16 version followed by the struct of that
version; a newer version than we know is read as our newest (each version extends the previous one).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from protocol import schema
from protocol.codec import message_codec
from protocol.errors import DecodeError

PROTOCOL_TYPE = "consumer"
_I16 = struct.Struct(">h")


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    owned_partitions: dict[str, frozenset[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None
    user_data: bytes | None = None
    version: int = 0


def _max_version(name: str) -> int:
    return schema.messages()[name].max_version


def decode_subscription(data: bytes | memoryview) -> Subscription:
    """DecodeError if the bytes are not a consumer-protocol subscription."""
    if len(data) < 2:
        raise DecodeError("consumer protocol subscription shorter than its version")
    version = _I16.unpack_from(data)[0]
    if version < 0:
        raise DecodeError(f"consumer protocol subscription version {version}")
    used = min(version, _max_version("ConsumerProtocolSubscription"))
    value = message_codec("ConsumerProtocolSubscription", used).decode_prefix(memoryview(data)[2:])[0]
    owned: dict[str, frozenset[int]] = {}
    for tp in value.get("owned_partitions") or ():
        owned[tp.topic] = owned.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return Subscription(tuple(value.topics), owned, value.get("generation_id", -1), value.get("rack_id"),
                        value.user_data, version)


def subscription_version(data: bytes | memoryview) -> int:
    """The version a member wrote its subscription in (its assignment is answered in the same one)."""
    if len(data) < 2:
        raise DecodeError("consumer protocol subscription shorter than its version")
    return int(_I16.unpack_from(data)[0])


def subscribed_topics(data: bytes | memoryview) -> set[str] | None:
    """The topics of a subscription, None if the bytes do not parse (Kafka then knows no subscription)."""
    try:
        return set(decode_subscription(data).topics)
    except (DecodeError, ValueError):
        return None


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int = 0,
                      user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolAssignment in `version` (the member's subscription version, capped at ours)."""
    used = max(0, min(version, _max_version("ConsumerProtocolAssignment")))
    body = message_codec("ConsumerProtocolAssignment", used).encode({
        "assigned_partitions": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(partitions.items())],
        "user_data": user_data})
    return _I16.pack(used) + body


def decode_assignment(data: bytes | memoryview) -> dict[str, list[int]]:
    return decode_assignment_with_user_data(data)[0]


def decode_assignment_with_user_data(data: bytes | memoryview) -> tuple[dict[str, list[int]], bytes | None]:
    """(topic -> partitions, the assignor's user data or None)."""
    if len(data) < 2:
        raise DecodeError("consumer protocol assignment shorter than its version")
    version = _I16.unpack_from(data)[0]
    used = max(0, min(version, _max_version("ConsumerProtocolAssignment")))
    value = message_codec("ConsumerProtocolAssignment", used).decode_prefix(memoryview(data)[2:])[0]
    out: dict[str, list[int]] = {}
    for tp in value.assigned_partitions:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    user_data = value.get("user_data")
    return out, None if user_data is None else bytes(user_data)
