"""ShareGroupHeartbeat / ShareGroupDescribe behaviour of the share-group coordinator."""

from __future__ import annotations

from broker.groups.share import records as rec
from broker.groups.share.config import ShareGroupConfig
from broker.groups.share.manager import ShareGroupManager
from protocol.codec import response_codec
from protocol.errors import ErrorCode
from tests.unit.groups.share_helpers import Topics, assigned, complete_init, hb, make, request


def joined(svc: ShareGroupManager, topics: list[str], members: list[str], now: int = 0) -> dict[str, int]:
    """Join members, initialize everything they need, and heartbeat until each holds its target."""
    epochs = {}
    for m in members:
        res = hb(svc, "g", m, 0, topics, now)
        complete_init(svc, res)
        epochs[m] = res.response["member_epoch"]
    for _ in range(2):  # a round to pick up initialized partitions, one more so everyone sees the result
        for m, member in sorted(svc.groups["g"].members.items()):
            epochs[m] = hb(svc, "g", m, member.member_epoch, now=now).response["member_epoch"]
    return epochs


def test_join_creates_group_and_member() -> None:
    topics = Topics()
    topics.create("t", 3)
    svc = make(topics)
    res = hb(svc, "g", "m1", 0, ["t"], now=100)
    assert res.response["error_code"] == 0
    assert res.response["member_id"] == "m1"
    assert res.response["member_epoch"] == 2  # a new group starts at epoch 1, as Kafka's
    assert res.response["heartbeat_interval_ms"] == 5000
    assert assigned(res) == {}  # nothing initialized yet
    names = [rec.decode(r.key, r.value).name for r in res.records]
    assert names == ["ShareGroupMemberMetadata", "ShareGroupMetadata", "ShareGroupTargetAssignmentMember",
                     "ShareGroupTargetAssignmentMetadata", "ShareGroupCurrentMemberAssignment",
                     "ShareGroupStatePartitionMetadata"]
    g = svc.groups["g"]
    assert (g.group_epoch, g.assignment_epoch, g.state.value) == (2, 2, "Stable")


def test_partitions_are_assigned_only_once_initialized() -> None:
    topics = Topics()
    tid = topics.create("t", 2)
    svc = make(topics)
    res = hb(svc, "g", "m", 0, ["t"])
    [init] = res.initialize
    assert init.group_id == "g" and init.state_epoch == 2 and init.topics == {tid: frozenset({0, 1})}
    md = svc.groups["g"].partition_metadata
    assert md is not None and set(md.initializing) == {tid} and not md.initialized

    # Still initializing: not asked again within the retry interval, nothing assigned.
    res = hb(svc, "g", "m", 2, now=1000)
    assert res.initialize == [] and res.response["assignment"] is None

    svc.initialized("g", tid, [0])
    res = hb(svc, "g", "m", 2, now=2000)
    assert res.response["member_epoch"] == 3  # newly initialized partition -> new epoch
    assert assigned(res) == {tid: {0}}

    svc.initialized("g", tid, [1])
    res = hb(svc, "g", "m", 3, now=3000)
    assert assigned(res) == {tid: {0, 1}}
    md = svc.groups["g"].partition_metadata
    assert md is not None and not md.initializing and md.initialized[tid].partitions == {0, 1}
    assert hb(svc, "g", "m", 4, now=4000).response["assignment"] is None  # unchanged -> null


def test_initialization_is_retried_after_interval_and_after_failure() -> None:
    topics = Topics()
    tid = topics.create("t", 1)
    svc = make(topics, initialize_retry_interval_ms=10_000)
    hb(svc, "g", "m", 0, ["t"], now=0)
    assert hb(svc, "g", "m", 2, now=9_999).initialize == []
    [again] = hb(svc, "g", "m", 2, now=10_000).initialize
    assert again.topics == {tid: frozenset({0})}
    svc.initialize_failed("g", tid, [0])
    assert not svc.groups["g"].partition_metadata.initializing
    assert hb(svc, "g", "m", 2, now=10_001).initialize[0].topics == {tid: frozenset({0})}


def test_new_partitions_and_topics_are_initialized_then_assigned() -> None:
    topics = Topics()
    tid = topics.create("t", 1)
    svc = make(topics)
    epochs = joined(svc, ["t"], ["m"])
    topics.grow("t", 3)
    res = hb(svc, "g", "m", epochs["m"])
    assert res.initialize[0].topics == {tid: frozenset({1, 2})}
    epoch = res.response["member_epoch"]
    assert epoch == epochs["m"] + 1  # metadata hash changed
    complete_init(svc, res)
    res = hb(svc, "g", "m", epoch)
    assert assigned(res) == {tid: {0, 1, 2}}

    # Subscribing to a topic that does not exist yet: nothing happens until it is created.
    res = hb(svc, "g", "m", res.response["member_epoch"], ["t", "later"])
    assert res.initialize == []
    t2 = topics.create("later", 2)
    res = hb(svc, "g", "m", res.response["member_epoch"])
    assert res.initialize[0].topics == {t2: frozenset({0, 1})}
    complete_init(svc, res)
    res = hb(svc, "g", "m", res.response["member_epoch"])
    assert assigned(res) == {tid: {0, 1, 2}, t2: {0, 1}}


def test_topic_deletion_removes_partitions() -> None:
    topics = Topics()
    topics.create("a", 2)
    tb = topics.create("b", 2)
    svc = make(topics)
    epochs = joined(svc, ["a", "b"], ["m"])
    ta = topics.delete("a")
    svc.topics_deleted([ta])
    assert ta not in svc.groups["g"].partition_metadata.initialized
    res = hb(svc, "g", "m", epochs["m"])
    assert assigned(res) == {tb: {0, 1}}
    assert res.initialize == []


def test_balance_and_sharing() -> None:
    topics = Topics()
    tid = topics.create("t", 4)
    svc = make(topics)
    joined(svc, ["t"], ["a", "b"])
    g = svc.groups["g"]
    assert sorted(len(m.assigned_partitions[tid]) for m in g.members.values()) == [2, 2]

    joined(svc, ["t"], ["c", "d", "e", "f", "h", "i"])
    g = svc.groups["g"]
    for m in g.members.values():
        assert m.member_epoch == g.assignment_epoch
        assert len(m.assigned_partitions[tid]) == 1  # 8 members, 4 partitions: each consumes one
    sharers = [sum(p in m.assigned_partitions[tid] for m in g.members.values()) for p in range(4)]
    assert sharers == [2, 2, 2, 2]


def test_leave_removes_member_and_rebalances_others() -> None:
    topics = Topics()
    tid = topics.create("t", 4)
    svc = make(topics)
    epochs = joined(svc, ["t"], ["a", "b"])
    res = hb(svc, "g", "a", -1)
    assert res.response == {"error_code": 0, "member_id": "a", "member_epoch": -1,
                            "heartbeat_interval_ms": 0, "assignment": None}
    [removed] = res.removed_members
    assert (removed.member_id, removed.reason, len(removed.assigned[tid])) == ("a", "left", 2)
    assert "a" not in svc.groups["g"].members
    res = hb(svc, "g", "b", epochs["b"])
    assert assigned(res) == {tid: {0, 1, 2, 3}}
    assert hb(svc, "g", "b", -1).response["error_code"] == 0
    assert svc.groups["g"].state.value == "Empty"
    # A left member is unknown; it may join again with epoch 0.
    assert hb(svc, "g", "a", epochs["a"]).response["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert hb(svc, "g", "a", 0, ["t"]).response["error_code"] == 0


def test_unknown_member_group_and_fencing() -> None:
    topics = Topics()
    topics.create("t", 1)
    svc = make(topics)
    assert hb(svc, "nope", "m", 3).response["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert hb(svc, "nope", "m", -1).response["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    joined(svc, ["t"], ["m"])
    topics.grow("t", 2)  # metadata change: one more epoch, so that epoch - 2 is neither 0 nor previous
    epoch = hb(svc, "g", "m", svc.groups["g"].members["m"].member_epoch).response["member_epoch"]
    assert epoch >= 3
    assert hb(svc, "g", "other", 1).response["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert hb(svc, "g", "other", -1).response["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    res = hb(svc, "g", "m", epoch + 1)
    assert res.response["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH and res.records == []
    assert hb(svc, "g", "m", epoch - 2).response["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    # The previous epoch is accepted (the response carrying the new one may have been lost).
    prev = svc.groups["g"].members["m"].previous_member_epoch
    assert hb(svc, "g", "m", prev).response["member_epoch"] == epoch


def test_session_timeout() -> None:
    topics = Topics()
    tid = topics.create("t", 2)
    svc = make(topics, session_timeout_ms=45_000)
    epochs = joined(svc, ["t"], ["a", "b"], now=0)
    hb(svc, "g", "b", epochs["b"], now=30_000)
    assert svc.next_deadline() == 45_000
    assert svc.expire_sessions(44_999).records == []
    res = svc.expire_sessions(45_000)
    assert [(r.member_id, r.reason) for r in res.removed_members] == [("a", "session expired")]
    assert set(svc.groups["g"].members) == {"b"}
    assert svc.next_deadline() == 75_000
    assert assigned(hb(svc, "g", "b", epochs["b"], now=46_000)) == {tid: {0, 1}}
    assert hb(svc, "g", "a", epochs["a"], now=46_000).response["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size() -> None:
    topics = Topics()
    topics.create("t", 1)
    svc = make(topics, max_size=2)
    assert hb(svc, "g", "a", 0, ["t"]).response["error_code"] == 0
    assert hb(svc, "g", "b", 0, ["t"]).response["error_code"] == 0
    res = hb(svc, "g", "c", 0, ["t"])
    assert res.response["error_code"] == ErrorCode.GROUP_MAX_SIZE_REACHED and res.records == []
    assert hb(svc, "g", "a", 0, ["t"]).response["error_code"] == 0  # existing members may rejoin


def test_no_cap_on_the_number_of_share_groups() -> None:
    """Kafka has no group.share.max.groups any more: the 11th (and 50th) group joins, and groups emptied by
    their members leaving are kept (Kafka retains share groups until they are deleted)."""
    topics = Topics()
    topics.create("t", 1)
    svc = make(topics)
    for i in range(50):
        res = hb(svc, f"g{i}", "a", 0, ["t"])
        assert res.response["error_code"] == 0, (i, res.response)
        assert hb(svc, f"g{i}", "a", -1).response["error_code"] == 0
    assert len(svc.groups) == 50 and all(g.state.value == "Empty" for g in svc.groups.values())
    assert hb(svc, "another", "a", 0, ["t"]).response["error_code"] == 0


def test_invalid_requests() -> None:
    svc = make(Topics())
    cases = [
        (request("g", "", 0, ["t"]), "MemberId can't be empty."),
        (request("", "m", 0, ["t"]), "GroupId can't be empty."),
        (request("g", "m", 0, ["t"], rack=""), "RackId can't be empty."),
        (request("g", "m", 0, None), "SubscribedTopicNames must be set in first request."),
        (request("g", "m", 0, []), "SubscribedTopicNames must be set in first request."),
        (request("g", "m", -2), "MemberEpoch is invalid."),
    ]
    for req, message in cases:
        res = svc.heartbeat(req, 0)
        assert res.response == {"error_code": ErrorCode.INVALID_REQUEST, "error_message": message}
        response_codec(76, 1).encode(res.response)
    assert svc.groups == {}


def test_group_id_of_another_group_type() -> None:
    topics = Topics()
    topics.create("t", 1)
    svc = ShareGroupManager(topic_info=topics.get, group_type_of={"cg": "consumer"}.get)
    res = hb(svc, "cg", "m", 0, ["t"])
    assert res.response["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert "not a share group" in res.response["error_message"]
    [d] = svc.describe(["cg"])
    assert d["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_subscription_change_filters_assignment() -> None:
    topics = Topics()
    ta = topics.create("a", 1)
    tb = topics.create("b", 1)
    svc = make(topics)
    epoch = joined(svc, ["a", "b"], ["m"])["m"]
    res = hb(svc, "g", "m", epoch, ["b"])
    assert res.response["member_epoch"] == epoch + 1
    assert assigned(res) == {tb: {0}}
    assert ta not in svc.groups["g"].target_assignment["m"]


def test_rack_and_client_are_recorded_and_described() -> None:
    topics = Topics()
    tid = topics.create("t", 2)
    svc = make(topics)
    res = svc.heartbeat(request("g", "m", 0, ["t"], rack="r1"), 0, client_id="cli", client_host="/10.0.0.1")
    complete_init(svc, res)
    svc.heartbeat(request("g", "m", 2), 1, client_id="cli", client_host="/10.0.0.1")
    [d] = svc.describe(["g"])
    assert d["group_state"] == "Stable" and d["assignor_name"] == "simple"
    assert (d["group_epoch"], d["assignment_epoch"]) == (3, 3)
    [m] = d["members"]
    assert (m["rack_id"], m["client_id"], m["client_host"], m["member_epoch"]) == ("r1", "cli", "/10.0.0.1", 3)
    assert m["subscribed_topic_names"] == ["t"]
    assert m["assignment"]["topic_partitions"] == [{"topic_id": tid, "topic_name": "t", "partitions": [0, 1]}]
    response_codec(77, 1).encode({"groups": svc.describe(["g", "missing", ""])})
    assert [x["error_code"] for x in svc.describe(["missing", ""])] == [ErrorCode.GROUP_ID_NOT_FOUND,
                                                                      ErrorCode.INVALID_GROUP_ID]
    assert svc.list_groups() == [("g", "Stable")]


def test_heartbeat_result_unpacks_to_response_and_records() -> None:
    topics = Topics()
    topics.create("t", 1)
    response, records = make(topics).heartbeat(request("g", "m", 0, ["t"]), 0)
    assert response["member_epoch"] == 2 and records


def test_target_assignment_is_computed_at_most_once_per_assignment_interval() -> None:
    """Kafka's share.assignment.interval.ms: members joining within the interval after the last computation keep
    the last target (nothing, for a new member) until a heartbeat after the interval computes one for all."""
    topics = Topics()
    tid = topics.create("t", 4)
    svc = make(topics, assignment_interval_ms=1000)
    complete_init(svc, hb(svc, "g", "a", 0, ["t"], now=100))
    b = hb(svc, "g", "b", 0, ["t"], now=200)
    assert (b.response["member_epoch"], assigned(b)) == (2, {})  # the target of epoch 2 has nothing for b
    assert svc.groups["g"].group_epoch == 3 and svc.groups["g"].assignment_epoch == 2
    a = hb(svc, "g", "a", 2, now=1099)  # still within the interval of the computation at 100
    assert (a.response["member_epoch"], a.response["assignment"]) == (2, None)
    a = hb(svc, "g", "a", 2, now=1100)
    b = hb(svc, "g", "b", 2, now=1101)
    assert a.response["member_epoch"] == b.response["member_epoch"] == 3
    assert sorted(p for r in (a, b) for p in assigned(r)[tid]) == [0, 1, 2, 3]
    # 0: computed on every heartbeat that needs it, from the group config lookup
    svc = ShareGroupManager(ShareGroupConfig(), topic_info=topics.get, assignment_interval=lambda gid: 0)
    complete_init(svc, hb(svc, "g", "a", 0, ["t"], now=100))
    assert hb(svc, "g", "b", 0, ["t"], now=101).response["member_epoch"] == 3


def test_last_member_leaving_moves_the_assignment_epoch() -> None:
    """Kafka writes the empty group's target assignment at the new epoch when its last member leaves, with no
    assignment time: the next member is assigned at once."""
    topics = Topics()
    topics.create("t", 1)
    svc = make(topics, assignment_interval_ms=60_000)
    complete_init(svc, hb(svc, "g", "a", 0, ["t"], now=100))
    hb(svc, "g", "a", -1, now=200)
    g = svc.groups["g"]
    assert (g.group_epoch, g.assignment_epoch, g.assignment_timestamp) == (3, 3, 0)
    res = hb(svc, "g", "b", 0, ["t"], now=300)
    assert res.response["member_epoch"] == 4 and len(assigned(res)) == 1
