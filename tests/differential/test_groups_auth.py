"""Consumer groups under the StandardAuthorizer, Kafka 4.4 against Shoal: what `alice` (only what ACLs grant her)
observes of the group APIs - FindCoordinator, JoinGroup, DescribeGroups (authorized operations), ListGroups,
OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups, ConsumerGroupHeartbeat and ConsumerGroupDescribe - for a
group she may not even describe, one she may describe, and one she may read, and topics likewise.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.helpers.differential import assert_same
from tests.helpers.group_diff import (
    CONSUMER_DESCRIBE,
    CONSUMER_HEARTBEAT,
    DELETE,
    DESCRIBE,
    FIND_COORDINATOR,
    JOIN,
    LIST,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    TopicNames,
    plain,
    run_both,
    subscription,
    wait_coordinators,
    wait_group_coordinator,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration


def _allow(admin: AdminClient, resource_type, name: str, *operations) -> None:
    bindings = [AclBinding(resource_type, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
                           AclPermissionType.ALLOW) for op in operations]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)


def test_what_alice_may_do_with_groups(sasl_pair):
    def scenario(target):
        hidden, visible, readable = (target.unique(n) for n in ("auth-hidden", "auth-visible", "auth-readable"))
        topic, secret = target.unique("auth-t"), target.unique("auth-secret")
        admin = AdminClient(target.client_config())
        for name in (topic, secret):
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
        _allow(admin, ResourceType.GROUP, visible, AclOperation.DESCRIBE)
        _allow(admin, ResourceType.GROUP, readable, AclOperation.READ)
        _allow(admin, ResourceType.TOPIC, topic, AclOperation.DESCRIBE, AclOperation.READ)
        seen = {}
        with target.raw("admin") as root:
            wait_coordinators(root)
            TopicNames(root).learn(topic, secret)  # in the broker's metadata before they are committed to
            for group in (visible, readable):  # groups exist for DescribeGroups, ListGroups, DeleteGroups
                wait_group_coordinator(root, group)
                committed = root.call(OFFSET_COMMIT, 8, {
                    "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                    "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                               "committed_leader_epoch": -1,
                                                               "committed_metadata": ""}]}]})
                assert committed.topics[0].partitions[0].error_code == 0, committed
        with target.raw("alice") as c:
            def acls_arrived():  # Kafka's authorizer learns ACLs from its metadata, a little later
                [entry] = c.call(DESCRIBE, 5, {"groups": [visible], "include_authorized_operations": False}).groups
                return entry.error_code == 0

            wait_until(acls_arrived, 30, "alice's ACLs")
            for v in (1, 3):
                for key_type, key, kind in ((0, hidden, "hidden"), (0, visible, "visible"), (1, "txn-a", "txn")):
                    seen[f"find_v{v}_{kind}"] = plain(c.call(FIND_COORDINATOR, v, {"key": key,
                                                                                            "key_type": key_type}))
            seen["find_v4"] = plain(c.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [hidden, visible]}))
            join = {"session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, "member_id": "",
                    "group_instance_id": None, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": subscription(topic)}]}
            kinds = {hidden: "hidden", visible: "visible", readable: "readable"}
            for group, kind in kinds.items():
                seen[f"join_{kind}"] = plain(c.call(JOIN, 9, {"group_id": group, **join}))
            seen["join_readable"]["member_id"] = bool(seen["join_readable"]["member_id"])
            seen["describe_groups"] = sorted(plain(c.call(DESCRIBE, 5, {
                "groups": [hidden, visible, readable], "include_authorized_operations": True}).groups),
                key=lambda g: g["group_id"])
            seen["list_groups"] = sorted(g["group_id"] for g in plain(c.call(LIST, 5, {
                "states_filter": [], "types_filter": []}).groups) if g["group_id"] in kinds)

            def commit(group, name):
                return plain(c.call(OFFSET_COMMIT, 9, {
                    "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                    "group_instance_id": None, "topics": [{"name": name, "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                         "committed_metadata": ""}]}]}))

            seen["commit_hidden"] = commit(hidden, topic)
            seen["commit_visible"] = commit(visible, topic)
            seen["commit_readable"] = commit(readable, topic)
            seen["commit_secret_topic"] = commit(readable, secret)
            for group, kind in kinds.items():
                seen[f"fetch_{kind}"] = plain(c.call(OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
                    {"name": topic, "partition_indexes": [0]}, {"name": secret, "partition_indexes": [0]}]}],
                    "require_stable": False}))
                seen[f"fetch_all_{kind}"] = plain(c.call(OFFSET_FETCH, 8, {"groups": [{"group_id": group,
                                                                                     "topics": None}],
                                                                          "require_stable": False}))
            seen["offset_delete"] = plain(c.call(OFFSET_DELETE, 0, {"group_id": readable, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0}]}]}))
            seen["delete_groups"] = sorted(plain(c.call(DELETE, 2, {"groups_names": [hidden, readable]}).results),
                                           key=lambda r: r["group_id"])
            heartbeat = {"member_id": "m-alice", "member_epoch": 0, "rebalance_timeout_ms": 30_000,
                         "subscribed_topic_regex": None, "topic_partitions": []}
            seen["heartbeat_hidden"] = plain(c.call(CONSUMER_HEARTBEAT, 1, {
                **heartbeat, "group_id": hidden, "subscribed_topic_names": [topic]}))
            consumer_group = target.unique("auth-cg")
            _allow(admin, ResourceType.GROUP, consumer_group, AclOperation.READ, AclOperation.DESCRIBE)

            def may_read_it():
                answer = c.call(CONSUMER_HEARTBEAT, 1, {**heartbeat, "group_id": consumer_group,
                                                        "subscribed_topic_names": [secret, topic]})
                return answer.error_code != 30 and answer

            seen["heartbeat_secret_topic"] = plain(wait_until(may_read_it, 30, "alice's group ACL"))
            answer = plain(c.call(CONSUMER_HEARTBEAT, 1, {**heartbeat, "group_id": consumer_group,
                                                          "subscribed_topic_names": [topic]}))
            seen["heartbeat_readable"] = [answer["error_code"], answer["member_epoch"]]
            [described] = plain(c.call(CONSUMER_DESCRIBE, 1, {"group_ids": [consumer_group],
                                                               "include_authorized_operations": True}).groups)
            seen["consumer_describe"] = {k: described[k] for k in ("error_code", "group_state",
                                                                   "authorized_operations")}
            [described] = plain(c.call(CONSUMER_DESCRIBE, 1, {"group_ids": [hidden],
                                                               "include_authorized_operations": True}).groups)
            seen["consumer_describe_hidden"] = {k: described[k] for k in ("error_code", "error_message")}
        return seen

    assert_same(run_both(sasl_pair, scenario), "alice's view of groups")
