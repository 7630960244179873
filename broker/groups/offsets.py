"""Committed offsets (OffsetCommit/OffsetFetch/OffsetDelete and retention), sans-IO.

Every change is an OffsetCommit record (key type 1: group, topic, partition; value version 3, or 1 when the
commit carries an expire timestamp, as Kafka writes them) applied by replay, so the store built while serving
commits and the store rebuilt from `__consumer_offsets` are the same. A tombstone removes an offset; after
compaction only the latest value per key is left, which replays to the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.groups.records import Record
from protocol.coordinator_records import decode_key, decode_value, encode_key, encode_value, value_version

NAME = "OffsetCommit"
NO_LEADER_EPOCH = -1
INVALID_OFFSET = -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-v4 with a retention time

    def expired(self, now_ms: int, retention_ms: int, base_timestamp_ms: int) -> bool:
        """Kafka's OffsetExpirationConditionImpl: an explicit expire timestamp wins, else retention after the
        base timestamp (the commit, or when the group became empty)."""
        if self.expire_timestamp_ms is not None:
            return now_ms >= self.expire_timestamp_ms
        return now_ms - base_timestamp_ms >= retention_ms


def commit_record(group: str, topic: str, partition: int, o: OffsetAndMetadata) -> Record:
    key = encode_key(NAME, {"group": group, "topic": topic, "partition": partition})
    value = {"offset": o.offset, "leader_epoch": o.leader_epoch, "metadata": o.metadata,
             "commit_timestamp": o.commit_timestamp_ms}
    if o.expire_timestamp_ms is not None:
        return Record(key, encode_value(NAME, {**value, "expire_timestamp": o.expire_timestamp_ms}, 1))
    return Record(key, encode_value(NAME, value, 3))


def tombstone(group: str, topic: str, partition: int) -> Record:
    return Record(encode_key(NAME, {"group": group, "topic": topic, "partition": partition}), None)


class OffsetStore:
    def __init__(self) -> None:
        # group id -> topic name -> partition -> committed offset
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    # ---------------------------------------------------------------------------------------------- replay

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None) -> str:
        """Apply one OffsetCommit record; returns its group id."""
        k = decode_key(NAME, key)
        if value is None:
            topics = self.offsets.get(k.group)
            if topics is not None:
                parts = topics.get(k.topic)
                if parts is not None:
                    parts.pop(k.partition, None)
                    if not parts:
                        del topics[k.topic]
                if not topics:
                    del self.offsets[k.group]
            return k.group
        v = decode_value(NAME, value)
        expire = v.get("expire_timestamp", -1) if value_version(value) == 1 else -1
        self.offsets.setdefault(k.group, {}).setdefault(k.topic, {})[k.partition] = OffsetAndMetadata(
            v.offset, v.get("leader_epoch", NO_LEADER_EPOCH), v.metadata, v.commit_timestamp,
            expire if expire is not None and expire >= 0 else None)
        return k.group

    # ---------------------------------------------------------------------------------------------- queries

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.get(group, {}).get(topic, {}).get(partition)

    def group_offsets(self, group: str) -> Mapping[str, Mapping[int, OffsetAndMetadata]]:
        return self.offsets.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return group in self.offsets

    def groups(self) -> list[str]:
        return list(self.offsets)

    # ---------------------------------------------------------------------------------------------- changes

    def delete_all(self, group: str) -> list[Record]:
        return [tombstone(group, t, p) for t, parts in sorted(self.offsets.get(group, {}).items())
                for p in sorted(parts)]

    def delete_topic(self, topic: str) -> list[Record]:
        """Tombstones for every group's offsets of a deleted topic."""
        return [tombstone(g, topic, p) for g, topics in sorted(self.offsets.items())
                for p in sorted(topics.get(topic, {}))]

    def expire(self, group: str, now_ms: int, retention_ms: int, base: Callable[[OffsetAndMetadata], int] | None,
               subscribed: Callable[[str], bool]) -> tuple[list[Record], bool]:
        """Tombstones for the group's expired offsets and whether none is left. `base` gives the timestamp
        retention counts from (None: the group's offsets do not expire now); offsets of subscribed topics
        never expire."""
        topics = self.offsets.get(group)
        if not topics:
            return [], True
        if base is None:
            return [], False
        records: list[Record] = []
        all_expired = True
        for topic, parts in sorted(topics.items()):
            if subscribed(topic):
                all_expired = False
                continue
            for p, o in sorted(parts.items()):
                if o.expired(now_ms, retention_ms, base(o)):
                    records.append(tombstone(group, topic, p))
                else:
                    all_expired = False
        return records, all_expired
