"""KIP-848 consumer groups, Kafka 4.4 against Shoal: ConsumerGroupHeartbeat (v0/v1) driven one heartbeat at a time,
ConsumerGroupDescribe (v0/v1), assignors, epochs and fencing, static members, subscription and assignor changes,
regular expressions, group configs and session expiry, the rebalance timeout, offsets of a consumer group, and
classic members in a consumer group (online downgrade).

Determinism:
- member ids are chosen by the scenario (v1 lets the client name its members), so the assignors' output, which
  depends on the order of member ids, is the same on both brokers; v0's server-made id is compared by its shape;
- Kafka 4.4 computes a new target assignment at most once per `consumer.assignment.interval.ms` (1 s by default);
  Shoal in the heartbeat that bumps the group epoch. Scenarios set the interval to 0 on Kafka's groups
  (`immediate_assignment`), the documented difference is pinned by `test_assignment_interval_is_kafkas_alone`;
- Kafka's group coordinator learns of a new topic from its metadata image a little after CreateTopics answers:
  `wait_coordinator_sees` waits until a probe group is assigned the whole topic;
- Kafka resolves regular expressions off the heartbeat path: the regex scenario heartbeats until both members'
  assignments settle and compares the settled state;
- Kafka lists a group's members and assignments in hash order: `consumer_describe` sorts them.
"""

from __future__ import annotations

import time

import pytest

from tests.helpers.differential import assert_same, known_difference
from tests.helpers.differential_admin import config_barrier
from tests.helpers.group_diff import (
    CONSUMER_HEARTBEAT,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP_RESOURCE,
    LIST,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    ClassicMember,
    ConsumerMember,
    Labels,
    TopicNames,
    alter_group_configs,
    assignment,
    consumer_describe,
    decode_assignment,
    decoded_describe,
    id_shape,
    immediate_assignment,
    plain,
    run_both,
    subscription,
    wait_coordinator_sees,
    wait_coordinators,
)
from tests.helpers.raw_requests import create_topic
from tests.helpers.share_raw import heartbeat as share_heartbeat
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration


def _topics(target, client, partitions=4, count=1, base="cg-t"):
    """New topics the group coordinator already sees, and the TopicNames that reads assignments of them."""
    wait_coordinators(client)
    names = TopicNames(client, target)
    topics = []
    for i in range(count):
        topic = target.unique(f"{base}{i}")
        create_topic(client, topic, partitions)
        names.learn(topic)
        wait_coordinator_sees(target, client, names, topic, partitions)
        topics.append(topic)
    return names, topics


# ================================================================================================ rebalances

@pytest.mark.parametrize("assignor", [None, "uniform", "range"])
def test_two_members_revocation_before_reassignment(pair, assignor):
    def scenario(target):
        group = target.unique("cg")
        seen = {}
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            immediate_assignment(target, c, group)
            with ConsumerMember(target, group, names, member_id="member-a", subscribe=[topic], assignor=assignor) as a, \
                    ConsumerMember(target, group, names, member_id="member-b", subscribe=[topic],
                                   assignor=assignor) as b:
                seen["a_joins"] = a.beat()
                seen["a_again"] = a.beat()
                seen["b_joins_nothing_released_yet"] = b.beat()
                seen["describe_b_joined"] = consumer_describe(c, names, [group])
                seen["a_told_to_revoke"] = a.beat(topic_partitions=names.owned({topic: [0, 1, 2, 3]}))
                seen["describe_revoking"] = consumer_describe(c, names, [group])
                seen["a_revoked"] = a.beat()
                seen["b_gets_released"] = b.beat()
                seen["b_settled"] = b.beat()
                seen["describe_stable"] = consumer_describe(c, names, [group])
                seen["a_stale_epoch"] = a.beat(member_epoch=a.epoch - 1)
                seen["a_future_epoch"] = a.beat(member_epoch=a.epoch + 1)
                seen["unknown_member"] = a.beat(member_id="member-z", member_epoch=3)
                seen["a_leaves"] = a.leave()
                seen["describe_after_leave"] = consumer_describe(c, names, [group])
                seen["b_takes_all"] = [b.beat(), b.beat()]
                seen["a_after_leaving"] = a.beat(member_epoch=2)
                seen["describe_end"] = consumer_describe(c, names, [group])
                seen["b_leaves"] = b.leave()
                seen["describe_empty"] = consumer_describe(c, names, [group])
        return seen

    assert_same(run_both(pair, scenario), f"a two-member rebalance with server assignor {assignor}")


def test_heartbeat_validation(pair):
    def scenario(target):
        group = target.unique("cgv")
        seen = {}
        labels = Labels()
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            for g in (group, group + "-v0", group + "-v0b"):
                immediate_assignment(target, c, g)
            base = {"group_id": group, "member_id": "m-1", "member_epoch": 0, "instance_id": None, "rack_id": None,
                    "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                    "server_assignor": None, "topic_partitions": []}
            cases = {
                "v1_without_member_id": (1, {"member_id": ""}),
                "v1_blank_member_id": (1, {"member_id": "  "}),
                "empty_group_id": (1, {"group_id": ""}),
                "blank_group_id": (1, {"group_id": " "}),
                "join_without_rebalance_timeout": (1, {"rebalance_timeout_ms": -1}),
                "join_without_subscription": (1, {"subscribed_topic_names": None}),
                "join_subscribing_to_nothing": (1, {"subscribed_topic_names": [], "member_id": "m-empty"}),
                "join_without_owned_partitions": (1, {"topic_partitions": None}),
                "join_owning_partitions": (1, {"topic_partitions": [{"topic_id": names.id_of(topic),
                                                                     "partitions": [0]}], "member_id": "m-owned"}),
                "unknown_assignor": (1, {"server_assignor": "sticky"}),
                "epoch_below_minus_two": (1, {"member_epoch": -3}),
                "unknown_group_not_joining": (1, {"group_id": group + "-none", "member_epoch": 5}),
                "empty_instance_id": (1, {"instance_id": ""}),
                "empty_rack_id": (1, {"rack_id": "", "member_id": "m-rack"}),
                "v0_server_made_member_id": (0, {"member_id": "", "group_id": group + "-v0"}),
                "v0_leave_without_member_id": (0, {"member_id": "", "member_epoch": -1}),
                "v0_client_member_id": (0, {"member_id": "client-chosen", "group_id": group + "-v0b"}),
                "unknown_topic": (1, {"subscribed_topic_names": ["no-such-topic-x"], "member_id": "m-unknown"}),
            }
            for name, (version, change) in cases.items():
                answer = plain(c.call(CONSUMER_HEARTBEAT, version, {**base, **change}))
                if answer.get("assignment") is not None:
                    answer["assignment"] = names.read(answer["assignment"]["topic_partitions"])
                if name == "v0_server_made_member_id" and answer["member_id"]:
                    answer["id_shape"] = id_shape(answer["member_id"])
                    labels.name(answer["member_id"], "SERVER-MADE")
                seen[name] = labels.apply(answer)
            seen["describe"] = sorted(consumer_describe(c, names, [group, group + "-none", ""]),
                                      key=lambda d: d["group_id"])
            seen["describe_v0"] = consumer_describe(c, names, [group], version=0)
        return seen

    assert_same(run_both(pair, scenario), "ConsumerGroupHeartbeat's checks")


def test_invalid_regular_expression_message(pair):
    def scenario(target):
        group = target.unique("cgre")
        with target.raw() as c:
            wait_coordinators(c)
            answer = c.call(CONSUMER_HEARTBEAT, 1, {
                "group_id": group, "member_id": "m-1", "member_epoch": 0, "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": None, "subscribed_topic_regex": "(", "topic_partitions": []})
        return [answer.error_code, answer.error_message]

    known_difference(run_both(pair, scenario),
                     kafka=[128, "SubscribedTopicRegex `(` is not a valid regular expression: missing closing )."],
                     shoal=[128, "SubscribedTopicRegex `(` is not a valid regular expression: missing ): (."],
                     reason="Regular expressions: RE2's wording after the colon")


def test_static_members_leave_rejoin_and_fencing(pair):
    def scenario(target):
        group = target.unique("cgs")
        seen = {}
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            immediate_assignment(target, c, group)
            with ConsumerMember(target, group, names, member_id="a-1", instance="i-a", subscribe=[topic]) as a, \
                    ConsumerMember(target, group, names, member_id="b-1", instance="i-b", subscribe=[topic]) as b, \
                    ConsumerMember(target, group, names, member_id="a-2", instance="i-a", subscribe=[topic]) as a2:
                seen["settling"] = [a.beat(), b.beat(), a.beat(), b.beat(), a.beat()]
                seen["a2_while_i_a_is_held"] = a2.beat()
                seen["a_static_leave"] = a.leave(-2)
                seen["describe_after_static_leave"] = consumer_describe(c, names, [group])
                seen["b_meanwhile"] = b.beat()
                seen["a2_takes_over"] = a2.beat()
                seen["describe_after_rejoin"] = consumer_describe(c, names, [group])
                seen["old_a"] = a.beat(member_epoch=a.epoch)
                seen["b_unknown_instance"] = b.beat(instance_id="i-z")
                seen["b_someone_elses_instance"] = b.beat(instance_id="i-a")
                seen["a2_leaves"] = a2.leave(-1)
                seen["b_after"] = [b.beat(), b.beat()]
                seen["describe_end"] = consumer_describe(c, names, [group])
        return seen

    assert_same(run_both(pair, scenario), "static members")


def test_subscription_and_assignor_changes(pair):
    def scenario(target):
        group = target.unique("cgsub")
        seen = {}
        with target.raw() as c:
            names, (t0, t1) = _topics(target, c, partitions=2, count=2)
            immediate_assignment(target, c, group)
            with ConsumerMember(target, group, names, member_id="member-a", subscribe=[t0]) as a, \
                    ConsumerMember(target, group, names, member_id="member-b", subscribe=[t0, t1]) as b, \
                    ConsumerMember(target, group, names, member_id="member-c", subscribe=[t1]) as m:
                members = (a, b, m)
                seen["joins"] = [x.beat() for x in members]
                seen["settling"] = [[x.beat() for x in members] for _ in range(3)]
                seen["describe"] = consumer_describe(c, names, [group])
                a.subscribe = [t0, t1]
                seen["a_subscribes_to_both"] = a.beat(full=True)
                seen["after_subscription_change"] = [[x.beat() for x in members] for _ in range(3)]
                seen["describe_after_subscription_change"] = consumer_describe(c, names, [group])
                m.assignor = "range"
                seen["c_prefers_range"] = m.beat(full=True)
                seen["after_assignor_change"] = [[x.beat() for x in members] for _ in range(3)]
                seen["describe_after_assignor_change"] = consumer_describe(c, names, [group])
                b.subscribe = []
                seen["b_unsubscribes"] = b.beat(full=True)
                seen["after_unsubscribe"] = [[x.beat() for x in members] for _ in range(3)]
                seen["describe_end"] = consumer_describe(c, names, [group])
        return seen

    assert_same(run_both(pair, scenario), "subscription and assignor changes")


def test_regex_subscription_settles_to_the_same_assignment(pair):
    def scenario(target):
        group, prefix = target.unique("cgrx"), target.unique("cgrx")
        seen = {}
        with target.raw() as c:
            wait_coordinators(c)
            names = TopicNames(c, target)
            topics = []
            for suffix in ("-a", "-b"):
                topic = prefix + suffix
                target._names[topic] = target._names[prefix] + suffix  # normalised like `unique` names
                create_topic(c, topic, 2)
                names.learn(topic)
                wait_coordinator_sees(target, c, names, topic, 2)
                topics.append(topic)
            immediate_assignment(target, c, group)
            with ConsumerMember(target, group, names, member_id="member-a", subscribe=None,
                                regex=prefix + "-.*") as a, \
                    ConsumerMember(target, group, names, member_id="member-b", subscribe=[topics[0]]) as b:
                seen["joined"] = [a.beat()["error_code"], b.beat()["error_code"]]

                def settled():
                    a.beat()
                    b.beat()
                    [d] = consumer_describe(c, names, [group])
                    done = d["group_state"] == "Stable" and all(
                        m["assignment"] == m["target_assignment"] for m in d["members"]) and sum(
                        len(p) for m in d["members"] for p in m["assignment"].values()) == 4
                    return done and d

                described = wait_until(settled, 30, "the regex group to settle")
                # epochs depend on when Kafka's resolution lands: the settled assignment is what must agree
                seen["settled"] = {k: v for k, v in described.items() if k not in ("group_epoch", "assignment_epoch")}
                seen["settled"]["members"] = [{k: v for k, v in m.items() if k != "member_epoch"}
                                              for m in described["members"]]
                seen["assigned"] = [a.assigned, b.assigned]
                seen["invalid_pattern_later"] = a.beat(full=True, subscribed_topic_regex="(?<=x)")["error_code"]
        return seen

    assert_same(run_both(pair, scenario), "a regex subscription")


# ============================================================================== configs, sessions, timeouts

def test_group_configs_heartbeat_interval_and_session_expiry(pair):
    def scenario(target):
        group = target.unique("cgcfg")
        seen = {}
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            immediate_assignment(target, c, group)
            seen["set"] = alter_group_configs(c, group, {"consumer.heartbeat.interval.ms": "500",
                                                         "consumer.session.timeout.ms": "1500"})
            seen["session_below_min"] = alter_group_configs(c, group, {"consumer.session.timeout.ms": "999"})
            seen["heartbeat_above_max"] = alter_group_configs(c, group, {"consumer.heartbeat.interval.ms": "15001"})
            seen["session_not_above_heartbeat"] = alter_group_configs(c, group, {"consumer.session.timeout.ms": "500"})
            seen["not_a_number"] = alter_group_configs(c, group, {"consumer.heartbeat.interval.ms": "fast"})
            seen["unknown_config"] = alter_group_configs(c, group, {"consumer.no.such": "1"})
            described = plain(c.call(DESCRIBE_CONFIGS, 4, {"resources": [{
                "resource_type": GROUP_RESOURCE, "resource_name": group,
                "configuration_keys": ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"]}],
                "include_synonyms": True, "include_documentation": False}))["results"][0]
            seen["describe_configs"] = {"error_code": described["error_code"],
                                        "configs": sorted(described["configs"], key=lambda e: e["name"])}
            with ConsumerMember(target, group, names, member_id="member-a", subscribe=[topic]) as a, \
                    ConsumerMember(target, group, names, member_id="member-b", subscribe=[topic]) as b:
                seen["settling"] = [a.beat(), b.beat(), a.beat(), b.beat(), a.beat()]
                start = time.monotonic()

                def a_has_everything():  # b is silent: its 1.5 s session ends
                    answer = a.beat()
                    return a.assigned.get(names.base(topic)) == [0, 1, 2, 3] and answer

                seen["a_after_b_expired"] = wait_until(a_has_everything, 30, "B's session to expire", interval=0.2)
                seen["after_b_session"] = time.monotonic() - start > 1.0
                seen["b_after_expiry"] = b.beat()
                seen["describe"] = consumer_describe(c, names, [group])
                seen["delete_heartbeat_override"] = alter_group_configs(c, group,
                                                                        {"consumer.heartbeat.interval.ms": None})
                seen["delete_both"] = alter_group_configs(c, group, {"consumer.heartbeat.interval.ms": None,
                                                                     "consumer.session.timeout.ms": None})
                config_barrier(c)  # Kafka's group coordinator learns of the deletion after it answers
                seen["interval_after_delete"] = a.beat()["heartbeat_interval_ms"]
        return seen

    assert_same(run_both(pair, scenario), "group configs and a session timeout")


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(pair):
    def scenario(target):
        group = target.unique("cgrto")
        seen = {}
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            immediate_assignment(target, c, group)
            with ConsumerMember(target, group, names, member_id="member-a", subscribe=[topic], rebalance_ms=1000) as a, \
                    ConsumerMember(target, group, names, member_id="member-b", subscribe=[topic]) as b:
                seen["joins"] = [a.beat(), b.beat()]
                everything = names.owned({topic: [0, 1, 2, 3]})
                seen["a_told_to_revoke"] = a.beat(topic_partitions=everything)
                start = time.monotonic()

                def fenced():  # a keeps reporting every partition: fenced at its 1 s rebalance timeout
                    answer = a.beat(topic_partitions=everything)
                    return answer["error_code"] != 0 and answer

                seen["a_fenced"] = wait_until(fenced, 30, "A's rebalance timeout", interval=0.2)
                seen["after_the_rebalance_timeout"] = time.monotonic() - start > 0.8
                seen["b_after"] = [b.beat(), b.beat()]
                seen["describe"] = consumer_describe(c, names, [group])
        return seen

    assert_same(run_both(pair, scenario), "a rebalance timeout")


def test_assignment_interval_is_kafkas_alone(pair):
    def scenario(target):
        group = target.unique("cgint")
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            # the longest interval Kafka allows (group.consumer.max.assignment.interval.ms), so that the second
            # join certainly falls within it
            [altered] = alter_group_configs(c, group, {"consumer.assignment.interval.ms": "15000"})
            with ConsumerMember(target, group, names, member_id="member-a", subscribe=[topic]) as a, \
                    ConsumerMember(target, group, names, member_id="member-b", subscribe=[topic]) as b:
                a.beat()
                b.beat()
                [described] = consumer_describe(c, names, [group])
        return {"alter": [altered["error_code"], altered["error_message"]], "state": described["group_state"],
                "epochs": [described["group_epoch"], described["assignment_epoch"]]}

    known_difference(
        run_both(pair, scenario),
        kafka={"alter": [0, None], "state": "Assigning", "epochs": [3, 2]},
        shoal={"alter": [0, None], "state": "Reconciling", "epochs": [3, 3]},  # accepted, with no effect
        reason="Consumer groups: the target assignment is computed in the heartbeat that bumps the group epoch")


# ============================================================================ offsets, admin, classic members

def _commit(c, version, group, tid, topic, member, epoch, partitions=(0,)):
    return plain(c.call(OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member, "group_instance_id": None,
        "retention_time_ms": -1, "topics": [{"name": topic, "topic_id": tid, "partitions": [
            {"partition_index": p, "committed_offset": 5, "committed_leader_epoch": -1, "committed_metadata": "",
             "commit_timestamp": -1} for p in partitions]}]}))


def test_offsets_and_admin_of_a_consumer_group(pair):
    def scenario(target):
        group = target.unique("cgoff")
        seen = {}
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            tid = names.id_of(topic)
            immediate_assignment(target, c, group)
            with ConsumerMember(target, group, names, member_id="member-a", subscribe=[topic]) as a, \
                    ConsumerMember(target, group, names, member_id="member-b", subscribe=[topic]) as b:
                a.beat()
                b.beat()
                seen["a_epoch"] = epoch = a.epoch
                for v in (8, 9, 10):
                    seen[f"commit_v{v}"] = _commit(c, v, group, tid, topic, "member-a", epoch)
                seen["stale_epoch"] = _commit(c, 9, group, tid, topic, "member-a", epoch - 1)
                seen["newer_epoch"] = _commit(c, 9, group, tid, topic, "member-a", epoch + 1)
                seen["unknown_member"] = _commit(c, 9, group, tid, topic, "member-z", epoch)
                seen["without_member"] = _commit(c, 9, group, tid, topic, "", -1)
                a.beat()
                seen["a_epoch_after_revoking"] = a.epoch
                seen["previous_epoch"] = _commit(c, 9, group, tid, topic, "member-a", epoch, partitions=(0, 1, 2, 3))
                for v in (8, 9):
                    seen[f"fetch_v{v}"] = plain(c.call(OFFSET_FETCH, v, {"groups": [{
                        "group_id": group, "member_id": "member-a", "member_epoch": a.epoch, "topics": [
                            {"name": topic, "topic_id": tid, "partition_indexes": [0, 1]}]}], "require_stable": False}))
                for member_epoch, member in ((a.epoch + 1, "member-a"), (a.epoch, "member-z"), (-1, None)):
                    seen[f"fetch_as_{member}_{member_epoch - a.epoch}"] = plain(c.call(OFFSET_FETCH, 9, {"groups": [{
                        "group_id": group, "member_id": member, "member_epoch": member_epoch, "topics": [
                            {"name": topic, "topic_id": tid, "partition_indexes": [0]}]}], "require_stable": False}))
                offset_delete = {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]}
                seen["offset_delete_subscribed"] = plain(c.call(OFFSET_DELETE, 0, offset_delete))
                seen["delete_non_empty"] = plain(c.call(DELETE, 2, {"groups_names": [group]}).results)
                seen["list"] = [g for g in plain(c.call(LIST, 5, {"states_filter": [], "types_filter": []}).groups)
                                if g["group_id"] == group]
                for v in (5, 6):
                    seen[f"describe_groups_v{v}"] = plain(c.call(DESCRIBE, v, {
                        "groups": [group], "include_authorized_operations": False}).groups)
                # no authorizer on either broker: every operation a group has
                seen["authorized_operations"] = consumer_describe(c, names, [group],
                                                                  authorized=True)[0]["authorized_operations"]
                a.leave()
                b.leave()
                seen["list_empty"] = [g for g in plain(c.call(LIST, 5, {"states_filter": [], "types_filter": []}).groups)
                                      if g["group_id"] == group]
                seen["describe_empty"] = consumer_describe(c, names, [group])
                seen["offset_delete_empty"] = plain(c.call(OFFSET_DELETE, 0, offset_delete))
                seen["delete"] = plain(c.call(DELETE, 2, {"groups_names": [group]}).results)
        return seen

    assert_same(run_both(pair, scenario), "offsets and admin of a consumer group")


def _decoded_sync(answer) -> dict:
    """A SyncGroup answer with its consumer-protocol assignment decoded (its bytes hold topic names)."""
    out = plain(answer)
    out["assignment"] = decode_assignment(out["assignment"])
    return out


def test_classic_member_in_a_consumer_group_and_downgrade(pair):
    def scenario(target):
        group = target.unique("cgmix")
        seen = {}
        labels = Labels()
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            immediate_assignment(target, c, group)
            protocols = [("range", subscription(topic)), ("roundrobin", subscription(topic))]
            with ConsumerMember(target, group, names, member_id="member-a", subscribe=[topic]) as a, \
                    ClassicMember(target, group, protocols=protocols) as k:
                seen["a_joins"] = a.beat()
                seen["k_first"] = plain(k.join())
                labels.name(k.member_id, "K")
                seen["k_join"] = plain(k.join())
                seen["a_revokes"] = [a.beat(), a.beat()]
                seen["k_sync"] = _decoded_sync(k.sync({}))
                seen["k_heartbeat"] = plain(k.heartbeat())
                seen["describe"] = labels.apply(consumer_describe(c, names, [group]))
                [entry] = c.call(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False}).groups
                seen["describe_groups"] = decoded_describe(entry, labels)
                # the last member of the consumer protocol leaves: the group goes back to the classic protocol
                seen["a_leaves"] = a.leave()
                seen["k_heartbeat_after"] = plain(k.heartbeat())
                seen["list"] = [g for g in plain(c.call(LIST, 5, {"states_filter": [], "types_filter": []}).groups)
                                if g["group_id"] == group]
                [entry] = c.call(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False}).groups
                seen["describe_groups_after"] = decoded_describe(entry, labels)
                seen["consumer_describe_after"] = consumer_describe(c, names, [group])
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), "a classic member in a consumer group")


def test_consumer_member_joining_a_classic_group_upgrades_it(pair):
    def scenario(target):
        group = target.unique("cgup")
        seen = {}
        labels = Labels()
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            immediate_assignment(target, c, group)
            protocols = [("range", subscription(topic))]
            with ClassicMember(target, group, protocols=protocols) as k, \
                    ConsumerMember(target, group, names, member_id="member-a", subscribe=[topic]) as a:
                k.join_fully()
                labels.name(k.member_id, "K")
                seen["k_sync"] = _decoded_sync(k.sync({k.member_id: assignment({topic: [0, 1, 2, 3]})}))
                seen["describe_classic"] = decoded_describe(c.call(DESCRIBE, 5, {
                    "groups": [group], "include_authorized_operations": False}).groups[0], labels)
                seen["a_joins"] = a.beat()
                seen["list"] = [g for g in plain(c.call(LIST, 5, {"states_filter": [], "types_filter": []}).groups)
                                if g["group_id"] == group]
                seen["describe_converted"] = labels.apply(consumer_describe(c, names, [group]))
                seen["k_heartbeat"] = plain(k.heartbeat())
                seen["k_rejoin"] = plain(k.join())
                seen["k_sync_after"] = _decoded_sync(k.sync({}))
                seen["a_after"] = [a.beat(), a.beat()]
                seen["describe_end"] = labels.apply(consumer_describe(c, names, [group]))
        return labels.apply(seen)

    assert_same(run_both(pair, scenario), "an online upgrade of a classic group")


def test_group_ids_of_another_type(pair):
    def scenario(target):
        connect, share, consumer = target.unique("cg-connect"), target.unique("cg-share"), target.unique("cg-own")
        seen = {}
        with target.raw() as c:
            names, [topic] = _topics(target, c)
            immediate_assignment(target, c, consumer)
            with ClassicMember(target, connect, protocol_type="connect", protocols=[("v1", b"x")]) as k, \
                    ConsumerMember(target, consumer, names, member_id="member-a", subscribe=[topic]) as own:
                k.join_fully()
                k.sync({k.member_id: b""})
                seen["share_join"] = share_heartbeat(c, share, "s-1", 0, [topic]).error_code
                body = {"member_id": "m-1", "member_epoch": 0, "rebalance_timeout_ms": 30_000,
                        "subscribed_topic_names": [topic], "topic_partitions": []}
                for kind, group in (("connect", connect), ("share", share)):
                    seen[f"heartbeat_{kind}"] = plain(c.call(CONSUMER_HEARTBEAT, 1, {**body, "group_id": group}))
                    seen[f"heartbeat_{kind}_epoch_1"] = plain(c.call(CONSUMER_HEARTBEAT, 1, {
                        **body, "group_id": group, "member_epoch": 1}))
                seen["consumer_describe"] = sorted(consumer_describe(c, names, [connect, share]),
                                                   key=lambda d: d["group_id"])
                seen["own_joins"] = own.beat()
                seen["connect_member_joins_the_consumer_group"] = plain(k.join(group_id=consumer, member_id=""))
                commit = {"generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                          "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                     "committed_leader_epoch": -1,
                                                                     "committed_metadata": ""}]}]}
                seen["commit_to_share_group"] = plain(c.call(OFFSET_COMMIT, 8, {**commit, "group_id": share}))
                seen["fetch_share_group"] = plain(c.call(OFFSET_FETCH, 8, {"groups": [{"group_id": share,
                                                                                    "topics": None}],
                                                                         "require_stable": False}))
                seen["offset_delete_share_group"] = plain(c.call(OFFSET_DELETE, 0, {"group_id": share, "topics": []}))
                seen["describe_groups"] = sorted(plain(c.call(DESCRIBE, 6, {
                    "groups": [share, consumer], "include_authorized_operations": False}).groups),
                    key=lambda g: g["group_id"])
        return seen

    assert_same(run_both(pair, scenario), "group ids of another type")
