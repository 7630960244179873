"""Consumer groups (KIP-848) in the sans-IO group coordinator: epochs, revocation before reassignment,
regular expressions, static members, timeouts, conversions and offsets."""

from __future__ import annotations

from broker.groups.consumer.group import MemberState
from broker.groups.consumer.manager import ConsumerConfig
from protocol.errors import ErrorCode
from tests.unit.groups.group_helpers import (
    Topics,
    Waiters,
    assigned,
    cg_req,
    consumer_heartbeat,
    join_req,
    make,
    owners_are_exclusive,
)

E = ErrorCode


def setup(**kw):
    topics = Topics()
    t = topics.create("t", 6)
    gc = make(topics, **kw)
    return gc, topics, t


def hb(gc, req, now=1000, version=1):
    res = consumer_heartbeat(gc, req, version, now)
    return res.response, res.records


def test_first_member_gets_everything_at_epoch_2():
    gc, _, t = setup()
    r, records = hb(gc, cg_req("a", 0, topics=["t"]))
    # A new group is at epoch 1 (Kafka 4.4): its first member moves it to 2.
    assert r["error_code"] == 0 and r["member_epoch"] == 2 and r["member_id"] == "a"
    assert assigned(r) == {t: set(range(6))}
    assert records  # member, epoch, target assignment, current assignment
    assert gc.consumer.groups["g"].state().value == "Stable"
    # A plain heartbeat carries no assignment when nothing changed.
    r, records = hb(gc, cg_req("a", 2))
    assert r["member_epoch"] == 2 and r["assignment"] is None and records == []


def test_partitions_are_revoked_before_another_member_gets_them():
    gc, _, t = setup()
    hb(gc, cg_req("a", 0, topics=["t"]))
    r_b, _ = hb(gc, cg_req("b", 0, topics=["t"]), 1100)
    # b joins at the new epoch but a still holds everything: b gets nothing yet.
    assert r_b["member_epoch"] == 3 and assigned(r_b) == {}
    group = gc.consumer.groups["g"]
    assert group.members["b"].state == MemberState.UNRELEASED_PARTITIONS
    owners_are_exclusive(gc)
    # a is asked to give up half of its partitions and stays in epoch 2 until it does.
    r_a, _ = hb(gc, cg_req("a", 2, owned={t: set(range(6))}), 1200)
    keep = assigned(r_a)[t]
    assert len(keep) == 3 and r_a["member_epoch"] == 2
    assert group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    r_b, _ = hb(gc, cg_req("b", 3, owned={}), 1250)
    assert assigned(r_b) is None  # still unreleased
    owners_are_exclusive(gc)
    r_a, _ = hb(gc, cg_req("a", 2, owned={t: keep}), 1300)  # revoked
    assert r_a["member_epoch"] == 3 and group.members["a"].state == MemberState.STABLE
    r_b, _ = hb(gc, cg_req("b", 3, owned={}), 1400)
    assert assigned(r_b) == {t: set(range(6)) - keep}
    assert group.state().value == "Stable"
    owners_are_exclusive(gc)


def test_leave_hands_partitions_to_the_others():
    gc, _, t = setup()
    hb(gc, cg_req("a", 0, topics=["t"]))
    hb(gc, cg_req("b", 0, topics=["t"]))
    r, _ = hb(gc, cg_req("a", 2, owned={t: set(range(6))}))
    keep = assigned(r)[t]
    hb(gc, cg_req("a", 2, owned={t: keep}))
    r, _ = hb(gc, cg_req("b", -1))
    assert r["member_epoch"] == -1 and "b" not in gc.consumer.groups["g"].members
    r, _ = hb(gc, cg_req("a", 3, owned={t: keep}))
    assert r["member_epoch"] == 4 and assigned(r) == {t: set(range(6))}


def test_session_and_rebalance_timeouts_fence_members():
    gc, _, t = setup()
    hb(gc, cg_req("a", 0, topics=["t"], rebalance=5000), now=0)
    hb(gc, cg_req("b", 0, topics=["t"], rebalance=5000), now=0)
    r, _ = hb(gc, cg_req("a", 2, owned={t: set(range(6))}), now=100)
    assert gc.consumer.groups["g"].members["a"].state == MemberState.UNREVOKED_PARTITIONS
    # a never confirms the revocation: fenced at its rebalance timeout; b keeps heartbeating.
    for now in range(1000, 5200, 1000):
        hb(gc, cg_req("b", 3, owned={}), now=now)
    gc.tick(5100)
    assert "a" not in gc.consumer.groups["g"].members
    r, _ = hb(gc, cg_req("b", 3, owned={}), now=5200)
    assert assigned(r) == {t: set(range(6))}
    # b stops heartbeating: its session (45 s) ends.
    gc.tick(5200 + 45_000)
    assert gc.consumer.groups["g"].members == {}
    assert gc.consumer.groups["g"].state().value == "Empty"


def test_static_member_temporary_leave_and_rejoin_keep_the_assignment():
    gc, _, t = setup()
    hb(gc, cg_req("a", 0, topics=["t"], instance="i-a"))
    r, _ = hb(gc, cg_req("b", 0, topics=["t"], instance="i-b"))
    r, _ = hb(gc, cg_req("a", 2, instance="i-a", owned={t: set(range(6))}))
    keep = assigned(r)[t]
    hb(gc, cg_req("a", 2, instance="i-a", owned={t: keep}))
    epoch = gc.consumer.groups["g"].group_epoch
    # While a's instance is held, another member id cannot take it.
    r, _ = hb(gc, cg_req("a2", 0, topics=["t"], instance="i-a"))
    assert r["error_code"] == E.UNRELEASED_INSTANCE_ID
    r, _ = hb(gc, cg_req("a", -2, instance="i-a"))
    assert r["member_epoch"] == -2
    r, _ = hb(gc, cg_req("a2", 0, topics=["t"], instance="i-a"))
    assert r["error_code"] == 0 and assigned(r) == {t: keep}
    group = gc.consumer.groups["g"]
    assert group.group_epoch == epoch and "a" not in group.members  # no rebalance
    r, _ = hb(gc, cg_req("a", 3, instance="i-a"))
    assert r["error_code"] == E.FENCED_INSTANCE_ID


def test_regex_subscription_follows_topic_creation():
    gc, topics, t = setup()
    r, _ = hb(gc, cg_req("a", 0, regex="t.*"))
    assert assigned(r) == {t: set(range(6))}
    t2 = topics.create("t2", 2)
    topics.create("other", 1)
    r, _ = hb(gc, cg_req("a", 2))
    assert r["member_epoch"] == 3 and assigned(r) == {t: set(range(6)), t2: {0, 1}}
    group = gc.consumer.groups["g"]
    assert group.resolved_regexes["t.*"].topics == {"t", "t2"}
    r, _ = hb(gc, cg_req("b", 0, regex="(unclosed"))
    assert r["error_code"] == E.INVALID_REGULAR_EXPRESSION
    # The last member using a regex leaves: its resolution goes too.
    hb(gc, cg_req("a", -1))
    assert group.resolved_regexes == {}


def test_request_errors():
    gc, _, _ = setup(max_size=10)
    assert hb(gc, cg_req("", 0, topics=["t"]))[0]["error_code"] == E.INVALID_REQUEST  # v1 needs a member id
    r, _ = hb(gc, cg_req("", 0, topics=["t"]), version=0)
    assert r["error_code"] == 0 and r["member_id"]  # v0: the coordinator names the member
    assert hb(gc, cg_req("a", 0))[0]["error_code"] == E.INVALID_REQUEST  # no subscription
    assert hb(gc, cg_req("a", 0, topics=["t"], assignor="sticky"))[0]["error_code"] == E.UNSUPPORTED_ASSIGNOR
    assert hb(gc, cg_req("a", -3))[0]["error_code"] == E.INVALID_REQUEST
    assert hb(gc, cg_req("a", 5, group="none"))[0]["error_code"] == E.GROUP_ID_NOT_FOUND
    hb(gc, cg_req("a", 0, topics=["t"]))
    assert hb(gc, cg_req("a", 9))[0]["error_code"] == E.FENCED_MEMBER_EPOCH
    assert hb(gc, cg_req("zz", 3))[0]["error_code"] == E.UNKNOWN_MEMBER_ID


def test_group_ids_of_other_types_and_conversions():
    # Migration disabled: only empty groups change type (the online migrations are in test_migration.py).
    gc, _, _ = setup(consumer=ConsumerConfig(migration_policy="disabled"))
    w = Waiters(gc)
    mid = w.answers[w.join(join_req(group="cl"), 1000)]["member_id"]
    w.join(join_req(mid, group="cl"), 1000)
    w.tick(1000)
    r, _ = hb(gc, cg_req("a", 0, topics=["t"], group="cl"))
    assert r["error_code"] == E.GROUP_ID_NOT_FOUND
    assert r["error_message"] == "Cannot upgrade classic group cl to consumer group because online upgrade is disabled."
    w.run(gc.leave_group("cl", [{"member_id": mid, "group_instance_id": None}], 2000))
    # An empty classic group gives way to a consumer group, and back.
    r, records = hb(gc, cg_req("a", 0, topics=["t"], group="cl"))
    assert r["error_code"] == 0 and gc.group_type_of("cl") == "consumer"
    assert records[0].value is None  # the classic group's tombstone first
    # A classic member of another protocol type cannot join the consumer group.
    assert w.answers[w.join(join_req(group="cl", protocol_type="connect"), 3000)]["error_code"] == \
        E.INCONSISTENT_GROUP_PROTOCOL
    hb(gc, cg_req("a", -1, group="cl"))
    first = w.join(join_req(group="cl"), 4000)
    assert w.answers[first]["error_code"] == E.MEMBER_ID_REQUIRED and gc.group_type_of("cl") == "classic"
    share = {"group_id": "sh", "member_id": "m", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": ["t"]}
    gc.share.heartbeat(share, 1000)
    assert hb(gc, cg_req("a", 0, topics=["t"], group="sh"))[0]["error_code"] == E.GROUP_ID_NOT_FOUND


def test_offsets_with_member_epochs():
    gc, _, t = setup()
    hb(gc, cg_req("a", 0, topics=["t"]))

    def commit(epoch, member="a", version=9):
        req = {"group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": member,
               "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                   {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                    "committed_metadata": None}]}]}
        return gc.commit_offsets(req, version, 1000).response["topics"][0]["partitions"][0]["error_code"]

    assert commit(2) == 0
    assert commit(3) == E.STALE_MEMBER_EPOCH
    assert commit(2, "zz") == E.UNKNOWN_MEMBER_ID
    assert commit(2, version=8) == E.UNSUPPORTED_VERSION
    assert commit(-1, "") == E.UNKNOWN_MEMBER_ID  # not while the group has members
    fetched = gc.fetch_offsets("g", [{"name": "t", "partition_indexes": [0]}], 9, "a", 2)
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 5
    assert gc.fetch_offsets("g", None, 9, "a", 7)["error_code"] == E.STALE_MEMBER_EPOCH
    assert gc.fetch_offsets("g", None, 9, None, -1)["error_code"] == 0  # admin
    res = gc.delete_offsets("g", [{"name": "t", "partitions": [{"partition_index": 0}]}])
    assert res.response["topics"][0]["partitions"][0]["error_code"] == E.GROUP_SUBSCRIBED_TO_TOPIC


def test_admin_sees_consumer_groups():
    gc, _, t = setup()
    hb(gc, cg_req("a", 0, topics=["t"]))
    assert gc.list_groups(types=["consumer"]) == [
        {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable", "group_type": "consumer"}]
    [d] = gc.consumer_group_describe(["g"])
    assert d["group_state"] == "Stable" and d["assignor_name"] == "uniform"
    [m] = d["members"]
    assert m["assignment"]["topic_partitions"][0]["topic_name"] == "t" and m["member_type"] == 1
    assert gc.consumer_group_describe(["nope"])[0]["error_code"] == E.GROUP_ID_NOT_FOUND
    assert gc.describe_groups(["g"], 6)[0]["error_message"] == "Group g is not a classic group."
    assert gc.delete_groups(["g"]).response["results"] == {"g": E.NON_EMPTY_GROUP}
    hb(gc, cg_req("a", -1))
    assert gc.delete_groups(["g"]).response["results"] == {"g": 0}
    assert gc.group_type_of("g") is None


def test_records_replay_to_the_same_groups():
    gc, topics, t = setup()
    written = []
    for req, now in [(cg_req("a", 0, topics=["t"], instance="i"), 1), (cg_req("b", 0, regex="t"), 2),
                     (cg_req("a", 1, instance="i", owned={t: set(range(6))}), 3)]:
        written += hb(gc, req, now)[1]
    loaded = make(topics)
    for r in written:
        loaded.replay(r.key, r.value)
    assert loaded.snapshot()["consumer"] == gc.snapshot()["consumer"]


def test_a_join_may_subscribe_to_nothing_but_must_say_so():
    gc, _, t = setup()
    r, _ = hb(gc, cg_req("a", 0, topics=[]))
    # nothing subscribed, no new epoch: the group's first assignment (epoch 1) is empty
    assert r["error_code"] == 0 and r["member_epoch"] == 1 and assigned(r) == {}
    r, _ = hb(gc, cg_req("b", 0))
    assert r["error_code"] == E.INVALID_REQUEST
    assert r["error_message"] == ("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                                  "(re-)joining.")


def test_a_change_of_the_preferred_server_assignor_is_a_new_assignment():
    gc, _, t = setup()
    hb(gc, cg_req("a", 0, topics=["t"]))
    group = gc.consumer.groups["g"]
    epoch = group.group_epoch
    r, _ = hb(gc, cg_req("a", epoch, assignor="range"))
    assert group.group_epoch == epoch + 1 and r["member_epoch"] == epoch + 1
    [d] = gc.consumer_group_describe(["g"])
    assert d["assignor_name"] == "range"
    r, _ = hb(gc, cg_req("a", epoch + 1, assignor="range"))  # the same assignor again: nothing changes
    assert group.group_epoch == epoch + 1


def test_describe_shows_partitions_pending_revocation_as_assigned():
    gc, _, t = setup()
    hb(gc, cg_req("a", 0, topics=["t"]))
    hb(gc, cg_req("b", 0, topics=["t"]))
    r, _ = hb(gc, cg_req("a", 2, owned={t: set(range(6))}))  # a must revoke half
    assert len(assigned(r)[t]) == 3
    described = {m["member_id"]: m for m in gc.consumer_group_describe(["g"])[0]["members"]}
    # Kafka's describe: what the member owns until it confirms the revocation
    assert described["a"]["assignment"]["topic_partitions"][0]["partitions"] == list(range(6))
    assert len(described["a"]["target_assignment"]["topic_partitions"][0]["partitions"]) == 3


def test_the_last_member_leaving_settles_the_empty_groups_assignment_epoch():
    gc, _, t = setup()
    hb(gc, cg_req("a", 0, topics=["t"]))
    hb(gc, cg_req("a", -1))
    group = gc.consumer.groups["g"]
    assert group.group_epoch == 3 and group.assignment_epoch == 3 and group.state().value == "Empty"
