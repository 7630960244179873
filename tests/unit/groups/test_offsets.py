"""Committed offsets, retention and group administration in the sans-IO group coordinator."""

from __future__ import annotations

from broker.groups import offsets as offset_records
from broker.groups.coordinator import OffsetsConfig
from protocol.coordinator_records import value_version
from protocol.errors import ErrorCode
from tests.unit.groups.group_helpers import Topics, Waiters, hb_req, join_req, make, sync_req

E = ErrorCode
DAY = 24 * 3600 * 1000


def commit(gc, group="g", *, generation=-1, member="", topic="t", partitions=(0,), offset=10, version=8, now=1000,
           metadata=None, retention=-1, topic_id=None):
    req = {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
           "group_instance_id": None, "retention_time_ms": retention,
           "topics": [{"name": topic, "topic_id": topic_id, "partitions": [
               {"partition_index": p, "committed_offset": offset + p, "committed_leader_epoch": 3,
                "committed_metadata": metadata} for p in partitions]}]}
    return gc.commit_offsets(req, version, now)


def codes(res) -> list[int]:
    return [p["error_code"] for t in res.response["topics"] for p in t["partitions"]]


def setup(**kw):
    topics = Topics()
    tid = topics.create("t", 3)
    topics.create("u", 1)
    return make(topics, **kw), topics, tid


def test_standalone_commit_creates_a_simple_group_and_fetch_returns_it():
    gc, _, _ = setup()
    res = commit(gc, partitions=(0, 1))
    assert codes(res) == [0, 0] and len(res.records) == 2
    assert [value_version(r.value) for r in res.records] == [3, 3]
    group = gc.classic.groups["g"]
    assert group.is_empty() and group.protocol_type is None
    fetched = gc.fetch_offsets("g", [{"name": "t", "partition_indexes": [0, 1, 2]}], 7)
    assert [(p["committed_offset"], p["committed_leader_epoch"]) for p in fetched["topics"][0]["partitions"]] == [
        (10, 3), (11, 3), (-1, -1)]
    every = gc.fetch_offsets("g", None, 7)
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in every["topics"]] == [("t", [0, 1])]
    assert gc.list_groups() == [{"group_id": "g", "protocol_type": "", "group_state": "Empty", "group_type": "classic"}]


def test_commit_errors():
    gc, _, _ = setup()
    assert codes(commit(gc, topic="nope")) == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert codes(commit(gc, partitions=(3,))) == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert codes(commit(gc, metadata="x" * 4097)) == [E.OFFSET_METADATA_TOO_LARGE]
    assert codes(commit(gc, "absent", generation=3, member="m", version=8)) == [E.ILLEGAL_GENERATION]
    assert codes(commit(gc, "absent", generation=3, member="m", version=9)) == [E.GROUP_ID_NOT_FOUND]


def test_commits_from_members_are_checked_against_the_generation():
    gc, _, _ = setup()
    w = Waiters(gc)
    mid = w.answers[w.join(join_req(), 1000)]["member_id"]
    j = w.join(join_req(mid), 1000)
    w.tick(1000)
    assert codes(commit(gc, generation=1, member=mid)) == [E.REBALANCE_IN_PROGRESS]  # CompletingRebalance
    w.sync(sync_req(mid, 1, {mid: b""}), 1000)
    assert codes(commit(gc, generation=1, member=mid)) == [0]
    assert codes(commit(gc, generation=0, member=mid)) == [E.ILLEGAL_GENERATION]
    assert codes(commit(gc, generation=1, member="other")) == [E.UNKNOWN_MEMBER_ID]
    # A non-member commit (admin) is refused while the group has members.
    assert codes(commit(gc)) == [E.UNKNOWN_MEMBER_ID]
    # A commit keeps the member's session alive.
    commit(gc, generation=1, member=mid, now=9000)
    w.tick(12_000)
    assert gc.heartbeat(hb_req(mid, 1), 12_000).response == {"error_code": 0}
    del j


def test_share_groups_refuse_commits_and_have_no_offsets():
    gc, _, _ = setup()
    hb = {"group_id": "s", "member_id": "m", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": ["t"]}
    assert gc.share.heartbeat(hb, 1000).response["error_code"] == 0
    assert codes(commit(gc, "s")) == [E.GROUP_ID_NOT_FOUND]
    fetched = gc.fetch_offsets("s", [{"name": "t", "partition_indexes": [0]}], 8)
    assert fetched["error_code"] == 0 and fetched["topics"][0]["partitions"][0]["committed_offset"] == -1
    w = Waiters(gc)
    assert w.answers[w.join(join_req(group="s"), 1000)]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_topic_ids_from_v10():
    gc, topics, tid = setup()
    res = commit(gc, topic="", topic_id=tid, version=10)
    assert codes(res) == [0] and res.response["topics"][0]["topic_id"] == tid
    import uuid
    assert codes(commit(gc, topic="", topic_id=uuid.uuid4(), version=10)) == [E.UNKNOWN_TOPIC_ID]
    fetched = gc.fetch_offsets("g", [{"topic_id": tid, "partition_indexes": [0]}], 10)
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 10
    every = gc.fetch_offsets("g", None, 10)
    assert every["topics"][0]["topic_id"] == tid


def test_retention_time_of_old_versions_is_an_expire_timestamp():
    gc, _, _ = setup()
    res = commit(gc, version=2, retention=5000, now=1000)
    assert value_version(res.records[0].value) == 1
    assert gc.offsets.get("g", "t", 0).expire_timestamp_ms == 6000


def test_offset_delete_rules():
    gc, _, _ = setup()
    commit(gc, partitions=(0, 1))
    res = gc.delete_offsets("g", [{"name": "t", "partitions": [{"partition_index": 0}]},
                                  {"name": "zz", "partitions": [{"partition_index": 0}]}])
    assert [p["error_code"] for t in res.response["topics"] for p in t["partitions"]] == [
        0, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert gc.offsets.get("g", "t", 0) is None and gc.offsets.get("g", "t", 1) is not None
    assert gc.delete_offsets("nope", []).response["error_code"] == E.GROUP_ID_NOT_FOUND
    # A group of consumers may delete offsets of topics it does not subscribe to only.
    w = Waiters(gc)
    mid = w.answers[w.join(join_req(group="c"), 1000)]["member_id"]
    w.join(join_req(mid, group="c"), 1000)
    w.tick(1000)
    w.sync(sync_req(mid, 1, {mid: b""}, group="c"), 1000)
    commit(gc, "c", generation=1, member=mid, topic="u")
    res = gc.delete_offsets("c", [{"name": "t", "partitions": [{"partition_index": 0}]},
                                  {"name": "u", "partitions": [{"partition_index": 0}]}])
    assert [p["error_code"] for t in res.response["topics"] for p in t["partitions"]] == [
        E.GROUP_SUBSCRIBED_TO_TOPIC, 0]


def test_replay_of_the_written_records_rebuilds_offsets_and_groups():
    gc, topics, _ = setup()
    written = []
    for i in range(20):
        written += commit(gc, partitions=(i % 3,), offset=i, now=1000 + i).records
    written += gc.delete_offsets("g", [{"name": "t", "partitions": [{"partition_index": 2}]}]).records
    loaded = make(topics)
    loaded.begin_load(5000)
    for r in written:
        loaded.replay(r.key, r.value)
    assert loaded.snapshot()["offsets"] == gc.snapshot()["offsets"]
    assert "g" in loaded.classic.groups
    # Compaction keeps the latest record per key: the same state.
    latest = {}
    for r in written:
        latest[r.key] = r
    compacted = make(topics)
    for r in latest.values():
        compacted.replay(r.key, r.value)
    assert compacted.snapshot()["offsets"] == gc.snapshot()["offsets"]


def test_offsets_expire_after_retention_and_empty_groups_are_deleted():
    gc, _, _ = setup(offsets=OffsetsConfig(retention_ms=DAY, retention_check_interval_ms=60_000))
    gc.loaded(0)
    commit(gc, "simple", now=1000)
    commit(gc, "other", now=DAY // 2)
    res = gc.tick(DAY + 1000)  # the first commit is a day old
    assert "simple" not in gc.classic.groups and gc.offsets.get("simple", "t", 0) is None
    assert "other" in gc.classic.groups
    assert res.records[-1].value is None  # group tombstone after the offset tombstone
    gc.tick(DAY + DAY // 2 + 60_000)
    assert gc.list_groups() == []


def test_empty_group_without_offsets_is_deleted_at_the_next_cleanup():
    gc, _, _ = setup(offsets=OffsetsConfig(retention_check_interval_ms=60_000))
    gc.loaded(0)
    w = Waiters(gc)
    mid = w.answers[w.join(join_req(), 1000)]["member_id"]
    w.join(join_req(mid), 1000)
    w.tick(1000)
    w.run(gc.leave_group("g", [{"member_id": mid, "group_instance_id": None}], 2000))
    assert gc.classic.groups["g"].is_empty()
    w.tick(60_000)
    assert "g" not in gc.classic.groups


def test_list_describe_and_delete_groups_of_every_type():
    gc, _, _ = setup()
    w = Waiters(gc)
    mid = w.answers[w.join(join_req(group="live"), 1000)]["member_id"]
    w.join(join_req(mid, group="live"), 1000)
    w.tick(1000)
    w.sync(sync_req(mid, 1, {mid: b"A"}, group="live"), 1000)
    commit(gc, "simple")
    hb = {"group_id": "sh", "member_id": "m", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": ["t"]}
    gc.share.heartbeat(hb, 1000)
    listed = {g["group_id"]: (g["group_state"], g["group_type"], g["protocol_type"]) for g in gc.list_groups()}
    assert listed == {"live": ("Stable", "classic", "consumer"), "simple": ("Empty", "classic", ""),
                      "sh": ("Stable", "share", "share")}
    assert [g["group_id"] for g in gc.list_groups(states=["STABLE"])] == ["live", "sh"]
    assert [g["group_id"] for g in gc.list_groups(types=["Share"])] == ["sh"]
    described = gc.describe_groups(["live", "sh", "nope"], 5)
    assert described[0]["members"][0]["member_assignment"] == b"A" and described[0]["protocol_data"] == "range"
    assert [(d["group_state"], d["error_code"]) for d in described[1:]] == [("Dead", 0), ("Dead", 0)]
    v6 = gc.describe_groups(["sh", "nope"], 6)
    assert [(d["error_code"], d["error_message"]) for d in v6] == [
        (E.GROUP_ID_NOT_FOUND, "Group sh is not a classic group."), (E.GROUP_ID_NOT_FOUND, "Group nope not found.")]
    res = gc.delete_groups(["live", "simple", "sh", "nope"])
    assert res.response["results"] == {"live": E.NON_EMPTY_GROUP, "simple": 0, "sh": E.NON_EMPTY_GROUP,
                                       "nope": E.GROUP_ID_NOT_FOUND}
    assert "simple" not in gc.classic.groups and not gc.offsets.has_offsets("simple")
    gc.share.heartbeat({**hb, "member_epoch": -1}, 2000)
    plan = gc.plan_delete_groups(["sh"])
    assert plan.deletable == ["sh"]
    gc.delete_groups(["sh"])
    assert "sh" not in gc.share.groups


def test_offsets_of_a_deleted_topic_are_removed():
    gc, _, _ = setup()
    commit(gc, partitions=(0, 1))
    res = gc.topic_deleted("t")
    assert len(res.records) == 2 and not gc.offsets.has_offsets("g")
    assert offset_records.tombstone("g", "t", 0) in res.records
