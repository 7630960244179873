"""GroupMetadata records (classic groups) on `__consumer_offsets`: building them and loading a group from one.

Written as Kafka writes them: key type 2 (`group`), value version 3 (generation, protocol type and name,
leader, the time of the last state change, and each member with its subscription and assignment bytes); a
tombstone deletes the group. Loading reads any value version 0-4.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.groups.classic.group import ClassicGroup, ClassicMember, ClassicState
from broker.groups.records import Record
from protocol.coordinator_records import decode_key, decode_value, encode_key, encode_value

NAME = "GroupMetadata"
VALUE_VERSION = 3


def group_metadata(group: ClassicGroup, assignment: Mapping[str, bytes]) -> Record:
    """The group as it is now, with `assignment` (member id -> bytes) as the members' assignments."""
    members = []
    for m in group.members.values():
        members.append({
            "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout_ms,
            "session_timeout": m.session_timeout_ms, "subscription": m.metadata(group.protocol_name),
            "assignment": bytes(assignment.get(m.member_id, b""))})
    value = {"protocol_type": group.protocol_type or "", "generation": group.generation_id,
             "protocol": group.protocol_name, "leader": group.leader_id,
             "current_state_timestamp": group.state_timestamp_ms, "members": members}
    return Record(encode_key(NAME, {"group": group.group_id}), encode_value(NAME, value, VALUE_VERSION))


def empty_group_metadata(group_id: str, state_timestamp_ms: int) -> Record:
    """A new group with no members yet (Kafka writes it so the group exists in the log)."""
    value = {"protocol_type": "", "generation": 0, "protocol": None, "leader": None,
             "current_state_timestamp": state_timestamp_ms, "members": []}
    return Record(encode_key(NAME, {"group": group_id}), encode_value(NAME, value, VALUE_VERSION))


def tombstone(group_id: str) -> Record:
    return Record(encode_key(NAME, {"group": group_id}), None)


def key_group(key: bytes | memoryview) -> str:
    return str(decode_key(NAME, key).group)


def load(group_id: str, value: bytes | memoryview, now_ms: int) -> ClassicGroup:
    """A classic group as the record describes it: Stable with its members, or Empty."""
    v = decode_value(NAME, value)
    stamp = v.get("current_state_timestamp", -1)
    group = ClassicGroup(group_id, now_ms, ClassicState.STABLE if v.members else ClassicState.EMPTY,
                         v.generation, v.protocol_type or None, v.protocol, v.leader,
                         stamp if stamp is not None and stamp >= 0 else None)
    for m in v.members:
        rebalance = m.get("rebalance_timeout", -1)
        group.add(ClassicMember(
            m.member_id, m.get("group_instance_id"), m.client_id, m.client_host,
            m.session_timeout if rebalance is None or rebalance < 0 else rebalance, m.session_timeout,
            v.protocol_type, ((v.protocol or "", bytes(m.subscription)),), bytes(m.assignment)))
    group.leader_id = v.leader if v.leader in group.members else group.leader_id
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
