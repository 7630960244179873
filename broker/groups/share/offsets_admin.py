"""Share-group offsets administration (KIP-932 admin APIs), sans-IO: the group-coordinator half of
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets.

A share group's "offsets" are its share-partitions' start offsets, held by the share coordinator. The group
coordinator decides what may change and records it in ShareGroupStatePartitionMetadata; the runtime then talks
to the share coordinator and reports back here:

 * alter (empty groups only; a missing group is created, as Kafka's getOrMaybeCreateShareGroup): bump the group
   epoch, move the partitions to Initializing, InitializeShareGroupState with the new epoch as state epoch and
   the requested start offsets, then `initialized(...)` / `initialize_failed(...)`;
 * delete (empty groups only): move the topics' initialized partitions to Deleting, DeleteShareGroupState for
   them, then `delete_offsets_done(...)` drops the topics from Deleting (an interrupted deletion is retried by
   the next delete of the same topic, as in Kafka);
 * describe: which share-partitions have state (all-topics form), for ReadShareGroupStateSummary.

ShareGroupManager owns one (`offsets_admin`) over its groups: every change is a record emitted (applied to those
groups and handed out), so replay rebuilds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from broker.groups.records import Record
from broker.groups.share import records as rec
from broker.groups.share.group import ShareGroup, StatePartitionMetadata, TopicPartitions, without_partitions
from protocol.errors import ErrorCode

# Kafka's Errors messages for the errors these APIs answer.
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
NON_EMPTY_MESSAGE = "The group is not empty."
NO_OFFSETS_TO_DELETE = "There is no offset information to delete."
NEGATIVE_START_OFFSET = "The start offset must not be negative."


class AdminError(Exception):
    """A group-level refusal: (error code, Kafka's message)."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class AlterPlan:
    """AlterShareGroupOffsets after the group coordinator's checks.

    `topics`: response topics in request order; partitions refused here already carry their error, the others
    error 0 until the share coordinator answers. `start_offsets`: topic id -> partition -> requested SPSO, to
    initialize with `state_epoch`. `records`: write them before calling the share coordinator."""

    topics: list[dict[str, Any]]
    state_epoch: int = -1
    start_offsets: dict[UUID, dict[int, int]] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)


@dataclass
class DeleteOffsetsPlan:
    """DeleteShareGroupOffsets after the group coordinator's checks: `refused` topics answered now, `delete`
    topic id -> (name, partitions) whose state the share coordinator must delete, `records` to write first."""

    refused: list[dict[str, Any]]
    delete: dict[UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)


class ShareOffsetsAdmin:
    """Admin operations on share-group offsets over the share groups of a ShareGroupManager.

    `groups` is the manager's own dict (changed in place by the records emitted here), `topic_info` its topic
    lookup by name and `group_type_of` the group coordinator's answer to which type a group id has."""

    def __init__(self, groups: dict[str, ShareGroup], *, topic_info: Callable[[str], tuple[UUID, int] | None],
                 group_type_of: Callable[[str], str | None]) -> None:
        self.groups = groups
        self._lookup = topic_info
        self._group_type = group_type_of

    def _emit(self, records: list[Record], record: Record) -> None:
        rec.emit(self.groups, records, record)

    def _share_group(self, gid: str) -> ShareGroup:
        """The share group `gid`, or AdminError GROUP_ID_NOT_FOUND (absent, or another type's group)."""
        kind = self._group_type(gid)
        if kind not in (None, "share"):
            raise AdminError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
        group = self.groups.get(gid)
        if group is None:
            raise AdminError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        return group

    @staticmethod
    def _require_empty(group: ShareGroup) -> None:
        if group.members:
            raise AdminError(ErrorCode.NON_EMPTY_GROUP, NON_EMPTY_MESSAGE)

    # ------------------------------------------------------------------------------------------- describe

    def initialized_share_partitions(self, gid: str) -> dict[UUID, tuple[str, frozenset[int]]]:
        """Share-partitions of the group with state (DescribeShareGroupOffsets for all topics): topic id ->
        (name recorded at initialization, partitions). AdminError if `gid` is not a share group."""
        group = self._share_group(gid)
        md = group.partition_metadata
        return {tid: (tp.name, tp.partitions) for tid, tp in (md.initialized.items() if md else ())}

    # ---------------------------------------------------------------------------------------------- alter

    def alter_offsets(self, gid: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> AlterPlan:
        """Plan AlterShareGroupOffsets: `topics` are (name, [(partition, start offset), ...]). AdminError for a
        group that is not a share group or is not empty."""
        kind = self._group_type(gid)
        if kind not in (None, "share"):
            raise AdminError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
        group = self.groups.get(gid) or ShareGroup(gid)
        self._require_empty(group)
        out: list[dict[str, Any]] = []
        offsets: dict[UUID, dict[int, int]] = {}
        names: dict[UUID, str] = {}
        for name, partitions in topics:
            info = self._lookup(name)
            parts_out = []
            for index, start in partitions:
                if info is None or not 0 <= index < info[1]:
                    parts_out.append({"partition_index": index, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                      "error_message": UNKNOWN_TOPIC_MESSAGE})
                elif start < -1:
                    # A start offset is an offset, or -1 as Kafka accepts it: not initialized, so the next load
                    # resolves share.auto.offset.reset.
                    parts_out.append({"partition_index": index, "error_code": int(ErrorCode.INVALID_REQUEST),
                                      "error_message": NEGATIVE_START_OFFSET})
                else:
                    parts_out.append({"partition_index": index, "error_code": 0, "error_message": None})
                    offsets.setdefault(info[0], {})[index] = start
                    names[info[0]] = name
            out.append({"topic_name": name, "topic_id": info[0] if info else UUID(int=0), "partitions": parts_out})
        if not offsets:
            return AlterPlan(out)
        records: list[Record] = []
        # As Kafka's alterShareGroupOffsets: the group epoch does not move, it is the state epoch the
        # share-partitions are initialized with (the group is empty, and the share-partition leader drops what it
        # holds of them once their state is replaced: see ShareStateAdmin's reset listeners). A group that did not
        # exist comes into being with this record (epoch 1).
        epoch = group.group_epoch
        md = group.partition_metadata or StatePartitionMetadata()
        initializing, initialized = dict(md.initializing), dict(md.initialized)
        for tid, parts_offsets in offsets.items():
            parts = frozenset(parts_offsets)
            old = initializing.get(tid)
            initializing[tid] = TopicPartitions(names[tid], parts | (old.partitions if old else frozenset()))
            initialized = without_partitions(initialized, tid, parts)
        deleting = {t: n for t, n in md.deleting.items() if t not in offsets}
        self._emit(records, rec.state_partition_metadata(gid, StatePartitionMetadata(initializing, initialized,
                                                                                     deleting)))
        return AlterPlan(out, epoch, offsets, records)

    # --------------------------------------------------------------------------------------------- delete

    def delete_offsets(self, gid: str, topic_names: Iterable[str]) -> DeleteOffsetsPlan:
        """Plan DeleteShareGroupOffsets (Kafka's initiateDeleteShareGroupOffsets). AdminError for a group that
        is not a share group or is not empty."""
        group = self._share_group(gid)
        self._require_empty(group)
        md = group.partition_metadata
        plan = DeleteOffsetsPlan([])
        if md is None:
            return plan
        initialized, deleting = dict(md.initialized), dict(md.deleting)
        for name in topic_names:
            info = self._lookup(name)
            if info is None:
                plan.refused.append({"topic_name": name, "topic_id": UUID(int=0),
                                     "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                     "error_message": UNKNOWN_TOPIC_MESSAGE})
            elif info[0] in initialized:
                plan.delete[info[0]] = (name, initialized.pop(info[0]).partitions)
                deleting[info[0]] = name
            elif info[0] in deleting:
                # An earlier deletion did not finish: delete every partition's state again (idempotent).
                plan.delete[info[0]] = (name, frozenset(range(info[1])))
            else:
                plan.refused.append({"topic_name": name, "topic_id": UUID(int=0),
                                     "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                     "error_message": NO_OFFSETS_TO_DELETE})
        self._emit(plan.records, rec.state_partition_metadata(gid, StatePartitionMetadata(
            dict(md.initializing), initialized, deleting)))
        return plan

    def begin_group_deletion(self, gid: str) -> list[Record]:
        """DeleteGroups on an empty share group, before its state is deleted: every initialized or initializing
        topic moves to Deleting (Kafka's shareGroupBuildPartitionDeleteRequest). AdminError if it is not an
        empty share group any more."""
        group = self._share_group(gid)
        self._require_empty(group)
        md = group.partition_metadata
        if md is None or not (md.initialized or md.initializing):
            return []
        deleting = dict(md.deleting)
        for tid, tp in [*md.initialized.items(), *md.initializing.items()]:
            deleting[tid] = tp.name
        records: list[Record] = []
        self._emit(records, rec.state_partition_metadata(gid, StatePartitionMetadata({}, {}, deleting)))
        return records

    def delete_offsets_done(self, gid: str, deleted: Mapping[UUID, str]) -> tuple[list[dict[str, Any]],
                                                                                   list[Record]]:
        """The share coordinator deleted these topics' state: drop them from Deleting. Returns the response
        topics for them and the records to write (Kafka's completeDeleteShareGroupOffsets)."""
        group = self.groups.get(gid)
        md = group.partition_metadata if group is not None else None
        if md is None or not deleted:
            return [], []
        records: list[Record] = []
        self._emit(records, rec.state_partition_metadata(gid, StatePartitionMetadata(
            dict(md.initializing), dict(md.initialized),
            {t: n for t, n in md.deleting.items() if t not in deleted})))
        topics = [{"topic_name": name, "topic_id": tid, "error_code": 0, "error_message": None}
                  for tid, name in deleted.items()]
        return topics, records
