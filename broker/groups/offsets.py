"""Committed offsets (OffsetCommit/OffsetFetch/OffsetDelete and retention), sans-IO.

Every change is an OffsetCommit record (key type 1: group, topic, partition; value version 3, or 1 when the
commit carries an expire timestamp, as Kafka writes them) applied by replay, so the store built while serving
commits and the store rebuilt from `__consumer_offsets` are the same. A tombstone removes an offset; after
compaction only the latest value per key is left, which replays to the same state.

Transactional offset commits (TxnOffsetCommit, KIP-98/447) are OffsetCommit records in a transactional batch of
the producer: replayed with its producer id they are held pending per producer id (Kafka's
OffsetMetadataManager.pendingTransactionalOffsets, with the groups each producer has open) until the
transaction's marker: COMMIT moves them into the committed offsets unless a later record (in log order) is already
there, ABORT drops them. A tombstone also drops the partition's pending offsets in every open transaction of the
group. Log order is kept as a replay position (every applied commit record takes the next one; a coordinator's
memory follows its log in order, so within a partition positions compare as record offsets do).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.groups.records import Record
from protocol.coordinator_records import decode_key, decode_value, encode_key, encode_value, value_version

NAME = "OffsetCommit"
NO_LEADER_EPOCH = -1
INVALID_OFFSET = -1
NO_PRODUCER_ID = -1

# group id -> topic name -> partition -> offset
GroupOffsets = dict[str, dict[str, dict[int, "OffsetAndMetadata"]]]


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-v4 with a retention time
    # where the record stands in log order (Kafka's recordOffset); not part of the value
    position: int = field(default=-1, compare=False)

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
        self.offsets: GroupOffsets = {}
        # producer id -> its pending transactional offsets (group -> topic -> partition -> offset)
        self.pending: dict[int, GroupOffsets] = {}
        # group id -> producer ids with an open transaction that committed offsets for the group
        self.open_transactions: dict[str, set[int]] = {}
        # producer id -> the epoch of its latest transactional offsets or marker (the marker's epoch check)
        self.producer_epochs: dict[int, int] = {}
        self._position = 0

    # ---------------------------------------------------------------------------------------------- replay

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1) -> str:
        """Apply one OffsetCommit record (of a transactional batch of `producer_id` when >= 0); returns its
        group id."""
        k = decode_key(NAME, key)
        if value is None:
            _remove(self.offsets, k.group, k.topic, k.partition)
            for pid in self.open_transactions.get(k.group, ()):
                _remove(self.pending.get(pid, {}), k.group, k.topic, k.partition)
            return str(k.group)
        v = decode_value(NAME, value)
        expire = v.get("expire_timestamp", -1) if value_version(value) == 1 else -1
        self._position += 1
        o = OffsetAndMetadata(v.offset, v.get("leader_epoch", NO_LEADER_EPOCH), v.metadata, v.commit_timestamp,
                              expire if expire is not None and expire >= 0 else None, self._position)
        if producer_id < 0:
            self.offsets.setdefault(k.group, {}).setdefault(k.topic, {})[k.partition] = o
        else:
            self.pending.setdefault(producer_id, {}).setdefault(k.group, {}).setdefault(k.topic, {})[k.partition] = o
            self.open_transactions.setdefault(k.group, set()).add(producer_id)
            self.producer_epochs[producer_id] = max(producer_epoch, self.producer_epochs.get(producer_id, -1))
        return str(k.group)

    def replay_end_txn(self, producer_id: int, producer_epoch: int, commit: bool,
                       owns: Callable[[str], bool] = lambda group: True) -> list[str]:
        """Apply a transaction marker of `producer_id` to the groups `owns` accepts (those of the marker's
        partition): COMMIT materializes their pending offsets where no later commit is there, ABORT drops them
        (Kafka's replayEndTransactionMarker). Returns the groups whose transaction ended."""
        self.producer_epochs[producer_id] = max(producer_epoch, self.producer_epochs.get(producer_id, -1))
        groups = self.pending.get(producer_id, {})
        ended = [g for g in list(groups) if owns(g)]
        ended += [g for g, pids in self.open_transactions.items()
                  if producer_id in pids and g not in groups and owns(g)]
        for gid in ended:
            pids = self.open_transactions.get(gid)
            if pids is not None:
                pids.discard(producer_id)
                if not pids:
                    del self.open_transactions[gid]
            topics = groups.pop(gid, None)
            if not commit or not topics:
                continue
            for topic, parts in topics.items():
                for partition, o in parts.items():
                    current = self.get(gid, topic, partition)
                    if current is None or o.position > current.position:
                        self.offsets.setdefault(gid, {}).setdefault(topic, {})[partition] = o
        if not groups:
            self.pending.pop(producer_id, None)
        return ended

    # ---------------------------------------------------------------------------------------------- queries

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.get(group, {}).get(topic, {}).get(partition)

    def group_offsets(self, group: str) -> Mapping[str, Mapping[int, OffsetAndMetadata]]:
        return self.offsets.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return group in self.offsets

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """A transactional offset of an open transaction waits for its marker (Kafka's
        hasPendingTransactionalOffsets)."""
        return any(partition in self.pending.get(pid, {}).get(group, {}).get(topic, {})
                   for pid in self.open_transactions.get(group, ()))

    def has_open_transactions(self, group: str) -> bool:
        return group in self.open_transactions

    def pending_offsets(self, group: str) -> dict[int, Mapping[str, Mapping[int, OffsetAndMetadata]]]:
        """producer id -> the group's pending offsets of that producer's open transaction."""
        return {pid: self.pending[pid][group] for pid in sorted(self.open_transactions.get(group, ()))
                if group in self.pending.get(pid, {})}

    def groups(self) -> list[str]:
        return list(self.offsets)

    # ---------------------------------------------------------------------------------------------- changes

    def delete_all(self, group: str) -> list[Record]:
        """Tombstones for the group's offsets, and for partitions with only pending transactional offsets (as
        Kafka's deleteAllOffsets; one tombstone per partition)."""
        parts = {(t, p) for t, ps in self.offsets.get(group, {}).items() for p in ps}
        for offsets in self.pending_offsets(group).values():
            parts |= {(t, p) for t, ps in offsets.items() for p in ps}
        return [tombstone(group, t, p) for t, p in sorted(parts)]

    def delete_topic(self, topic: str) -> list[Record]:
        """Tombstones for every group's offsets of a deleted topic, committed or pending (Kafka's
        onPartitionsDeleted)."""
        parts = {(g, p) for g, topics in self.offsets.items() for p in topics.get(topic, {})}
        for groups in self.pending.values():
            parts |= {(g, p) for g, topics in groups.items() for p in topics.get(topic, {})}
        return [tombstone(g, topic, p) for g, p in sorted(parts)]

    def expire(self, group: str, now_ms: int, retention_ms: int, base: Callable[[OffsetAndMetadata], int] | None,
               subscribed: Callable[[str], bool]) -> tuple[list[Record], bool]:
        """Tombstones for the group's expired offsets and whether none is left. `base` gives the timestamp
        retention counts from (None: the group's offsets do not expire now); offsets of subscribed topics
        never expire."""
        topics = self.offsets.get(group)
        if not topics:
            return [], not self.has_open_transactions(group)
        if base is None:
            return [], False
        records: list[Record] = []
        all_expired = True
        for topic, parts in sorted(topics.items()):
            if subscribed(topic):
                all_expired = False
                continue
            for p, o in sorted(parts.items()):
                # not while a transactional offset of the partition is pending (Kafka's cleanupExpiredOffsets)
                if o.expired(now_ms, retention_ms, base(o)) and not self.has_pending(group, topic, p):
                    records.append(tombstone(group, topic, p))
                else:
                    all_expired = False
        # a group with open transactions is not removed
        return records, all_expired and not self.has_open_transactions(group)


def _remove(offsets: GroupOffsets, group: str, topic: str, partition: int) -> None:
    topics = offsets.get(group)
    if topics is None:
        return
    parts = topics.get(topic)
    if parts is not None:
        parts.pop(partition, None)
        if not parts:
            del topics[topic]
    if not topics:
        del offsets[group]
