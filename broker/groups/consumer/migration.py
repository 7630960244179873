"""Online migration of groups with members between the classic and the consumer (KIP-848) protocols, after
Kafka's `group.consumer.migration.policy`.

Upgrade: a consumer-protocol member joining a classic group whose members all use the consumer embedded
protocol turns it into a consumer group. Each classic member becomes a consumer-group member that still speaks
the classic protocol (JoinGroup/SyncGroup/Heartbeat), at the classic generation as its member epoch, keeping its
last assignment (which is also its target), so nothing moves until the joining member bumps the group epoch.
Downgrade: when the last consumer-protocol member of a consumer group leaves (or is fenced) and the others all
speak the classic protocol, the group becomes a classic group at the group epoch as generation, each member
holding its target assignment, and a rebalance starts.

This module only builds the converted groups and their records; the coordinator decides when and applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from enum import Enum
from uuid import UUID

from broker.groups.classic.group import ClassicGroup, ClassicMember, ClassicState
from broker.groups.consumer import protocol as consumer_protocol
from broker.groups.consumer import records as rec
from broker.groups.consumer.group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from broker.groups.records import Record
from broker.groups.result import GroupError
from protocol.errors import DecodeError, ErrorCode

TopicInfoLookup = Callable[[str], "tuple[UUID, int] | None"]
TopicNameLookup = Callable[[UUID], "str | None"]


class MigrationPolicy(Enum):
    """group.consumer.migration.policy: which conversions of non-empty groups are allowed."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, name: str | None) -> MigrationPolicy:
        """Case-insensitive; an unknown name disables both directions (as Kafka parses it)."""
        for policy in cls:
            if name is not None and policy.value == name.lower():
                return policy
        return cls.DISABLED

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


def _cannot_upgrade(group_id: str, why: str) -> GroupError:
    return GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                      f"Cannot upgrade classic group {group_id} to consumer group because {why}.")


def check_upgrade(group: ClassicGroup, policy: MigrationPolicy, consumer_max_size: int) -> None:
    """Raises GroupError (GROUP_ID_NOT_FOUND, with Kafka 4.1's messages) if a non-empty classic group cannot
    become a consumer group."""
    gid = group.group_id
    if not policy.upgrade_enabled:
        raise _cannot_upgrade(gid, "online upgrade is disabled")
    if not group.uses_consumer_protocol():
        raise _cannot_upgrade(gid, "the group does not use the consumer embedded protocol")
    if len(group.members) > consumer_max_size:
        raise _cannot_upgrade(gid, "the group size exceeds the consumer group maximum size")
    if group.state is ClassicState.DEAD:
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")


def _malformed(group_id: str) -> GroupError:
    return _cannot_upgrade(group_id, "the embedded consumer protocol is malformed")


def _to_ids(partitions: dict[str, list[int]] | dict[str, frozenset[int]], topic_info: TopicInfoLookup
             ) -> Assignment:
    """Topic names to ids; topics that no longer exist are dropped (Kafka's toTopicPartitionMap)."""
    out: dict[UUID, frozenset[int]] = {}
    for name, ps in partitions.items():
        info = topic_info(name)
        if info is not None and ps:
            out[info[0]] = out.get(info[0], frozenset()) | frozenset(ps)
    return out


def consumer_group_from_classic(group: ClassicGroup, topic_info: TopicInfoLookup) -> ConsumerGroup:
    """The consumer group a classic group becomes (not registered anywhere). Raises GroupError
    (GROUP_ID_NOT_FOUND) if a member's subscription or assignment does not parse."""
    gid = group.group_id
    if group.protocol_name is None:
        raise _malformed(gid)  # no generation has chosen a protocol yet: there is no subscription to read
    out = ConsumerGroup(gid, group_epoch=group.generation_id, assignment_epoch=group.generation_id)
    for m in group.members.values():
        try:
            subscription = consumer_protocol.decode_subscription(m.metadata(group.protocol_name))
            # A member that has not received an assignment yet (b"") holds nothing.
            assigned, user_data = consumer_protocol.decode_assignment_with_user_data(m.assignment) \
                if m.assignment else ({}, None)
        except (DecodeError, ValueError):
            raise _malformed(gid) from None
        if user_data:
            # An assignor that hands its members data of its own cannot be replaced by a server-side one.
            raise _cannot_upgrade(gid, "an unsupported custom assignor is in use. Please refer to the documentation "
                                       "or switch to a default assignor before re-attempting the upgrade")
        partitions = _to_ids(assigned, topic_info)
        out.members[m.member_id] = ConsumerMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=frozenset(subscription.topics),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
            member_epoch=group.generation_id, previous_member_epoch=group.generation_id, state=MemberState.STABLE,
            assigned_partitions=partitions)
        out.target_assignment[m.member_id] = partitions
    return out


def consumer_group_records(group: ConsumerGroup, metadata_hash: int, now: int) -> list[Record]:
    """The records creating `group` (Kafka's order: members, epoch, target assignment, current assignments)."""
    gid = group.group_id
    out = [rec.member_subscription(gid, m) for m in group.members.values()]
    out.append(rec.group_epoch(gid, group.group_epoch, metadata_hash))
    out += [rec.target_assignment(gid, mid, group.target_assignment.get(mid, {})) for mid in group.members]
    out.append(rec.target_assignment_epoch(gid, group.assignment_epoch, now))
    out += [rec.current_assignment(gid, m) for m in group.members.values()]
    return out


def consumer_group_tombstones(group: ConsumerGroup) -> list[Record]:
    """The records deleting a consumer group with its members (replay checks this order)."""
    gid = group.group_id
    out = [rec.current_assignment_tombstone(gid, mid) for mid in group.members]
    out += [rec.target_assignment_tombstone(gid, mid) for mid in group.members]
    out.append(rec.target_assignment_epoch_tombstone(gid))
    out += [rec.member_subscription_tombstone(gid, mid) for mid in group.members]
    out += [rec.regex_tombstone(gid, r) for r in sorted(group.resolved_regexes)]
    out.append(rec.group_epoch_tombstone(gid))
    return out


def downgrade_refusal(group: ConsumerGroup, leaving: Collection[str], policy: MigrationPolicy,
                      classic_max_size: int) -> str | None:
    """Why the group must stay a consumer group when the `leaving` members go (None: it becomes a classic
    group). Only the departure of the last consumer-protocol members, leaving classic members behind, downgrades;
    with nobody leaving (a classic static member just replaced the last consumer-protocol one), every member must
    already speak the classic protocol."""
    if not group.all_classic_except(leaving):
        return "members using the consumer protocol remain"
    if not policy.downgrade_enabled:
        return "the online downgrade is disabled"
    if sum(1 for mid in group.members if mid not in leaving) > classic_max_size:
        return "its group size is greater than the classic group maximum size"
    return None


def classic_group_from_consumer(group: ConsumerGroup, leaving: Collection[str], topic_name: TopicNameLookup,
                                now: int) -> ClassicGroup:
    """The classic group left when the `leaving` members go: Stable at the group epoch as generation, each member
    holding its target assignment (encoded in its subscription's version). Raises GroupError on a member whose
    protocols do not parse."""
    gid = group.group_id
    out = ClassicGroup(gid, now, ClassicState.STABLE, group.group_epoch, consumer_protocol.PROTOCOL_TYPE,
                       state_timestamp_ms=now)
    for mid, m in group.members.items():
        if mid in leaving or m.classic is None:
            continue
        out.add(ClassicMember(mid, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                              m.classic.session_timeout_ms, consumer_protocol.PROTOCOL_TYPE, m.classic.protocols))
    try:
        out.protocol_name = out.select_protocol()
        for mid, member in out.members.items():
            names: dict[str, frozenset[int]] = {}
            for tid, ps in group.target_assignment.get(mid, {}).items():
                name = topic_name(tid)
                if name is not None and ps:
                    names[name] = ps
            version = consumer_protocol.subscription_version(member.metadata(out.protocol_name))
            member.assignment = consumer_protocol.encode_assignment(names, version)
    except (DecodeError, ValueError) as e:
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot downgrade the consumer group {gid}: {e}.") from None
    out.subscribed_topics = out.compute_subscribed_topics()
    return out
