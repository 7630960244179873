"""Differential: share-group administration against Kafka 4.4 and Shoal, raw requests through our codecs:
ShareGroupDescribe, DescribeShareGroupOffsets (start offsets and lag), AlterShareGroupOffsets,
DeleteShareGroupOffsets, ListGroups with types, DeleteGroups of share groups, share.auto.offset.reset and group
configs changed while the group runs.
"""

from __future__ import annotations

import time

import pytest

from tests.helpers.differential import Target, assert_same
from tests.helpers.raw_requests import join as classic_join
from tests.helpers.share_differential import (
    ACCEPT,
    Member,
    acknowledged,
    alter_group,
    append,
    fetched,
    make_topic,
    share_group,
    wait_coordinator,
)

pytestmark = pytest.mark.integration


def _describe(raw, *groups: str, operations: bool = False) -> list:
    resp = raw.call(77, 1, {"group_ids": list(groups), "include_authorized_operations": operations})
    out = []
    for g in resp.groups:
        out.append({"group_id": g.group_id, "error_code": g.error_code, "error_message": g.error_message,
                    "state": g.group_state, "epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                    "assignor": g.assignor_name, "operations": g.authorized_operations,
                    "members": sorted((m.member_id, m.rack_id, m.member_epoch, m.client_id,
                                       sorted(m.subscribed_topic_names),
                                       sorted((t.topic_name, sorted(t.partitions)) for t in m.assignment.topic_partitions))
                                      for m in g.members)})
    return out


def _offsets(raw, group: str, topics=None, version: int = 1, values: bool = True) -> list:
    """DescribeShareGroupOffsets; without `values`, start offsets and lags of share-partitions whose state was
    written are left out (Shoal writes them as they move: see test_share_fetch.py's known difference)."""
    resp = raw.call(90, version, {"groups": [{"group_id": group, "topics": topics}]})
    out = []
    for g in resp.groups:
        def shown(p):
            if values or p.start_offset == -1 and p.get("lag", -1) == -1 and p.error_code:
                return p.start_offset, p.get("lag", None)
            return "written", "written"

        out.append({"group_id": g.group_id, "error_code": g.error_code, "error_message": g.error_message,
                    "topics": sorted((t.topic_name, [(p.partition_index, *shown(p), p.leader_epoch,
                                                      p.error_code, p.error_message)
                                                     for p in sorted(t.partitions, key=lambda p: p.partition_index)])
                                     for t in g.topics)})
    return out


def _alter(raw, group: str, topics: dict) -> dict:
    resp = raw.call(91, 0, {"group_id": group, "topics": [
        {"topic_name": name, "partitions": [{"partition_index": p, "start_offset": o} for p, o in parts]}
        for name, parts in topics.items()]})
    return {"error_code": resp.error_code, "error_message": resp.error_message,
            "topics": sorted((t.topic_name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
                             for t in resp.responses)}


def _delete_offsets(raw, group: str, topics: list[str]) -> dict:
    resp = raw.call(92, 0, {"group_id": group, "topics": [{"topic_name": t} for t in topics]})
    return {"error_code": resp.error_code, "error_message": resp.error_message,
            "topics": sorted((t.topic_name, t.error_code, t.error_message) for t in resp.responses)}


def test_describe_a_running_group_and_its_offsets(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid = make_topic(target, raw, "adm", [[5, 5], [4]])
            group = share_group(target, raw, "adm-g")
            m = Member(raw, group, target.unique("m"))
            resp = raw.call(76, 1, {"group_id": group, "member_id": m.id, "member_epoch": 0, "rack_id": "rack-a",
                                    "subscribed_topic_names": [topic]})
            m.epoch = resp.member_epoch
            end = time.monotonic() + 30
            while sum(len(p) for p in m.assigned.values()) < 2:
                assert time.monotonic() < end
                time.sleep(0.05)
                m.heartbeat()
            out = {"described": _describe(raw, group, operations=True)}
            m.fetch({tid: [0, 1]}, max_wait_ms=5000)
            got = fetched(m.fetch(max_wait_ms=500))
            acks = {(tid, p["partition"]): [(a, b, ACCEPT) for a, b, _ in p["acquired"]] for p in got["partitions"]}
            # accept whatever the two fetches acquired from partition 0, in one ShareAcknowledge
            m.acknowledge({(tid, 0): [(0, 9, ACCEPT)]}) if (tid, 0) not in acks else m.acknowledge(acks)
            append(raw, topic, 1, [3], tag="more")
            out["offsets"] = _offsets(raw, group, values=False)
            out["offsets_v0"] = _offsets(raw, group, version=0, values=False)
            out["named"] = _offsets(raw, group, [{"topic_name": topic, "partitions": [0, 1]}], values=False)
            out["named_unknown"] = _offsets(raw, group, [{"topic_name": "no-such-topic-adm", "partitions": [0]}])
            out["missing_group"] = _offsets(raw, target.unique("adm-none"))
            out["listed"] = _listed(raw, group)
            out["delete_non_empty"] = _delete_groups(raw, group)
            out["alter_non_empty"] = _alter(raw, group, {topic: [(0, 1)]})
            out["delete_offsets_non_empty"] = _delete_offsets(raw, group, [topic])
            m.leave()
            out["after_leave"] = _describe(raw, group)
            out["listed_empty"] = _listed(raw, group)
            return out

    assert_same(pair.run(scenario), "a share group described, its offsets and its admin refusals")


def _listed(raw, group: str) -> list:
    out = []
    for version, body in ((5, {"states_filter": [], "types_filter": ["share"]}),
                          (5, {"states_filter": [], "types_filter": ["consumer"]}),
                          (4, {"states_filter": []})):
        resp = raw.call(16, version, body)
        out.append([(g.group_id, g.protocol_type, g.get("group_state"), g.get("group_type"))
                    for g in resp.groups if g.group_id == group])
    return out


def _delete_groups(raw, *groups: str) -> list:
    resp = raw.call(42, 2, {"groups_names": list(groups)})
    return sorted((r.group_id, r.error_code) for r in resp.results)


def test_alter_and_delete_offsets_of_an_empty_group(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid = make_topic(target, raw, "adm-alter", [[5, 5], [4]])
            other, _ = make_topic(target, raw, "adm-other", [[3]])
            group = target.unique("adm-alter-g")
            out = {"new_group": _alter(raw, group, {topic: [(0, 3), (1, 0), (7, 1)], "no-such-topic-x": [(0, 1)]})}
            out["described"] = _describe(raw, group)
            out["offsets"] = _offsets(raw, group)
            out["negative"] = _alter(raw, group, {topic: [(0, -1)]})
            # a member of the group starts where the offsets were altered to
            m = Member(raw, group, target.unique("m"))
            m.join([topic], want=2)
            first = fetched(m.fetch({tid: [0, 1]}, max_wait_ms=5000))
            out["fetched"] = [(p["partition"], p["acquired"]) for p in first["partitions"]]
            m.leave()
            out["delete"] = _delete_offsets(raw, group, [topic, other, "no-such-topic-y"])
            out["offsets_after_delete"] = _offsets(raw, group)
            out["delete_group"] = _delete_groups(raw, group, target.unique("adm-never"))
            out["described_deleted"] = _describe(raw, group)
            return out

    assert_same(pair.run(scenario), "AlterShareGroupOffsets and DeleteShareGroupOffsets")


@pytest.mark.parametrize("reset", ["earliest", "latest", "by_duration:PT1H"])
def test_share_auto_offset_reset(pair, reset):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid = make_topic(target, raw, "adm-reset", [[3, 2]])
            group = share_group(target, raw, "adm-reset-g", **{"share.auto.offset.reset": reset})
            m = Member(raw, group, target.unique("m"))
            m.join([topic], want=1)
            first = fetched(m.fetch({tid: [0]}, max_wait_ms=500))
            append(raw, topic, 0, [2], tag="late")
            second = fetched(m.fetch(max_wait_ms=1000))
            return [first, second]

    assert_same(pair.run(scenario), f"share.auto.offset.reset={reset}")


def test_group_configs_change_while_the_group_runs(pair):
    """The lock duration and the isolation level read at each use; invalid values refused as Kafka does."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid, = make_topic(target, raw, "adm-cfg", [[2]])
            group = share_group(target, raw, "adm-cfg-g")
            m = Member(raw, group, target.unique("m"))
            m.join([topic], want=1)
            out = {"first": fetched(m.fetch({tid: [0]}, max_wait_ms=5000))}
            out["set_lock"] = alter_group(raw, group, {"share.record.lock.duration.ms": "1000"})
            append(raw, topic, 0, [2], tag="b")
            out["second"] = fetched(m.fetch(max_wait_ms=1000))
            out["invalid"] = [alter_group(raw, group, {k: v}) for k, v in (
                ("share.record.lock.duration.ms", "999"), ("share.delivery.count.limit", "11"),
                ("share.isolation.level", "serializable"), ("share.auto.offset.reset", "sometimes"),
                ("share.assignment.interval.ms", "-1"), ("share.no.such.config", "1"))]
            out["read_committed"] = alter_group(raw, group, {"share.isolation.level": "read_committed"})
            out["ack"] = acknowledged(m.acknowledge({(tid, 0): [(0, 3, ACCEPT)]}))
            return out

    assert_same(pair.run(scenario), "group configs of a running share group")


def test_describe_unknown_and_other_groups(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, _ = make_topic(target, raw, "adm-desc", [[1]])
            classic = target.unique("adm-classic")
            wait_coordinator(raw, classic)
            joined = classic_join(raw, 5, classic)
            classic_join(raw, 5, classic, joined.member_id)
            missing = target.unique("adm-missing")
            described = _describe(raw, classic, missing, "")
            # the empty id first, then the others (Kafka answers them in the hash order of their coordinators)
            return {"described": described[:1] + sorted(described[1:], key=lambda g: g["group_id"]),
                    "offsets_classic": _offsets(raw, classic),
                    "alter_classic": _alter(raw, classic, {topic: [(0, 0)]}),
                    "delete_offsets_classic": _delete_offsets(raw, classic, [topic]),
                    "delete_offsets_missing": _delete_offsets(raw, missing, [topic])}

    assert_same(pair.run(scenario), "describing groups that are not share groups")
