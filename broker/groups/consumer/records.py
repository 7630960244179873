"""Consumer group (KIP-848) records on `__consumer_offsets`: building, decoding and replaying them.

Record types 3-8 and 16 as Kafka writes them (values in version 0); replay follows Kafka's
GroupMetadataManager.replay: a value creates the group/member if needed, a tombstone for something unknown is
ignored. ConsumerGroupPartitionMetadata (type 4) is no longer written by Kafka (the metadata hash replaced it)
and is ignored here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from broker.groups.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    ResolvedRegex,
)
from broker.groups.modern.records import (
    Decoded,
    ModernRecords,
    assignment,
    decode_as,
    encode,
    topic_partitions,
)
from broker.groups.records import NAME_OF_TYPE, Record
from protocol.coordinator_records import record_type

PARTITION_METADATA = "ConsumerGroupPartitionMetadata"
REGULAR_EXPRESSION = "ConsumerGroupRegularExpression"


class ConsumerGroupRecords(ModernRecords[ConsumerGroup, ConsumerMember]):
    """The records consumer groups share with share groups, and what a consumer group's own: its members'
    subscriptions (regular expression, assignor, classic protocol) and partitions pending revocation, and its
    resolved regular expressions."""

    def new_group(self, group_id: str) -> ConsumerGroup:
        return ConsumerGroup(group_id)

    def new_member(self, member_id: str) -> ConsumerMember:
        return ConsumerMember(member_id)

    def with_subscription(self, member: ConsumerMember, v: Any) -> ConsumerMember:
        classic = v.get("classic_member_metadata")
        return replace(
            member, instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
            client_host=v.client_host, subscribed_topic_names=frozenset(v.subscribed_topic_names),
            subscribed_topic_regex=v.subscribed_topic_regex, rebalance_timeout_ms=v.rebalance_timeout_ms,
            server_assignor=v.server_assignor,
            classic=None if classic is None else ClassicMemberMetadata(
                classic.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in classic.supported_protocols)))

    def with_assignment(self, member: ConsumerMember, v: Any) -> ConsumerMember:
        return replace(member, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                       state=v.state, assigned_partitions=assignment(v.assigned_partitions),
                       partitions_pending_revocation=assignment(v.partitions_pending_revocation))

    def left(self, member: ConsumerMember) -> ConsumerMember:
        return replace(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                       assigned_partitions={}, partitions_pending_revocation={})

    def replay_own(self, group: ConsumerGroup, rec: Decoded) -> None:
        if rec.name == REGULAR_EXPRESSION:
            pattern = rec.key.regular_expression
            v = rec.value
            if v is None:
                group.resolved_regexes.pop(pattern, None)
            else:
                group.resolved_regexes[pattern] = ResolvedRegex(frozenset(v.topics), v.version, v.timestamp)


RECORDS = ConsumerGroupRecords("ConsumerGroup", "consumer")
GROUP_METADATA = RECORDS.group_metadata
MEMBER_METADATA = RECORDS.member_metadata
TARGET_ASSIGNMENT_METADATA = RECORDS.target_assignment_metadata
TARGET_ASSIGNMENT_MEMBER = RECORDS.target_assignment_member
CURRENT_MEMBER_ASSIGNMENT = RECORDS.current_member_assignment


def decode(key: bytes | memoryview, value: bytes | memoryview | None) -> Decoded:
    return decode_as(NAME_OF_TYPE[record_type(key)], key, value)


# ---------------------------------------------------------------------------------------------- builders

group_epoch = RECORDS.group_epoch
group_epoch_tombstone = RECORDS.group_epoch_tombstone
member_subscription_tombstone = RECORDS.member_subscription_tombstone
target_assignment = RECORDS.target_assignment
target_assignment_tombstone = RECORDS.target_assignment_tombstone
target_assignment_epoch = RECORDS.target_assignment_epoch
target_assignment_epoch_tombstone = RECORDS.target_assignment_epoch_tombstone
current_assignment_tombstone = RECORDS.current_assignment_tombstone


def member_subscription(group_id: str, m: ConsumerMember) -> Record:
    classic = None if m.classic is None else {
        "session_timeout_ms": m.classic.session_timeout_ms,
        "supported_protocols": [{"name": n, "metadata": md} for n, md in m.classic.protocols]}
    return RECORDS.member_subscription_record(group_id, m.member_id, {
        "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
        "subscribed_topic_names": sorted(m.subscribed_topic_names), "subscribed_topic_regex": m.subscribed_topic_regex,
        "rebalance_timeout_ms": m.rebalance_timeout_ms, "server_assignor": m.server_assignor,
        "classic_member_metadata": classic})


def current_assignment(group_id: str, m: ConsumerMember) -> Record:
    return RECORDS.current_assignment_record(group_id, m.member_id, {
        "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch, "state": int(m.state),
        "assigned_partitions": topic_partitions(m.assigned_partitions),
        "partitions_pending_revocation": topic_partitions(m.partitions_pending_revocation)})


def regex(group_id: str, pattern: str, resolved: ResolvedRegex) -> Record:
    return encode(REGULAR_EXPRESSION, {"group_id": group_id, "regular_expression": pattern},
                  {"topics": sorted(resolved.topics), "version": resolved.version,
                   "timestamp": resolved.timestamp_ms})


def regex_tombstone(group_id: str, pattern: str) -> Record:
    return encode(REGULAR_EXPRESSION, {"group_id": group_id, "regular_expression": pattern}, None)


# ------------------------------------------------------------------------------------------------ replay

def apply(groups: dict[str, ConsumerGroup], rec: Decoded) -> None:
    """Apply one decoded consumer-group record to `groups` (mutated in place)."""
    if rec.name == PARTITION_METADATA:
        return  # superseded by the metadata hash in ConsumerGroupMetadataValue
    RECORDS.apply(groups, rec)
