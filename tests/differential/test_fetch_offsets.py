"""Fetch, ListOffsets, DeleteRecords and OffsetForLeaderEpoch against Kafka 4.4 and Shoal with the same raw
requests (our codecs): every Fetch version's fields (high watermark, last stable offset, log start offset, aborted
transactions), offsets out of range, byte limits (KIP-74), leader epochs, topic ids, fetch sessions, read_committed
reads of open and aborted transactions; ListOffsets of every special timestamp and version, by timestamp on
CreateTime and LogAppendTime topics, after DeleteRecords; DeleteRecords' errors; OffsetForLeaderEpoch's epochs and
fencing. Partitions are sorted where Kafka answers from a hash map."""

from __future__ import annotations

import uuid

import pytest

from protocol import records as rec
from tests.helpers import differential_raw as dr
from tests.helpers.differential import Target, assert_same, known_difference
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

BIG = rec.build_batch([rec.Record(None, b"x" * 3000)], timestamp=1_000)
SPECIAL = (-1, -2, -3, -4, -5, -6)


def summary(part) -> dict:
    """A fetched partition without its record bytes: the batches' (base offset, last offset delta, size)."""
    out = {k: v for k, v in part.items() if k != "records"}
    records = part.records
    out["batches"] = None if records is None else [(h.base_offset, h.last_offset_delta, h.size)
                                                   for _, h in rec.iter_batches(bytes(records))]
    return out


def test_every_fetch_version(pair):
    """Fetch v4-v17 of a partition holding four 3 KB batches: from 0, at and past the high watermark, a negative
    offset, MaxBytes and PartitionMaxBytes below a batch (KIP-74) and at 0, MinBytes above what there is,
    partitions past the count, leader epochs (v9+), unknown topics and topic ids (v13+)."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "f-versions")
        out = {}
        with target.raw() as raw:
            for _ in range(4):
                assert dr.produce(raw, topic, BIG).error_code == 0
            tid = dr.topic_id(raw, topic)
            for version in (4, 5, 7, 9, 11, 12, 13, 15, 16, 17):
                name, id_ = (topic, dr.ZERO_UUID) if version < 13 else ("", tid)

                def fetch(offset: int = 0, topic_name=name, topic_id=id_, version=version, **kwargs):
                    return summary(dr.fetch(raw, topic_name, offset, version=version, topic_id_=topic_id, **kwargs))

                cases = {"from-0": fetch(), "past-hw": fetch(10), "at-hw": fetch(4), "negative": fetch(-1),
                         "max-bytes-10": fetch(max_bytes=10), "max-bytes-0": fetch(max_bytes=0),
                         "partition-max-10": fetch(1, partition_max_bytes=10),
                         "partition-max-0": fetch(partition_max_bytes=0),
                         "partition-max-2-batches": fetch(partition_max_bytes=2 * len(BIG)),
                         "partition-3": fetch(partition=3), "partition-minus-1": fetch(partition=-1)}
                # MinBytes above what there is: answered with it once MaxWaitMs (short here) has passed
                waited = raw.call(dr.FETCH, version, {**dr.fetch_request(
                    [dr.fetch_partition(name, 2, topic_id_=id_)]), "min_bytes": 1 << 20, "max_wait_ms": 50})
                cases["min-bytes-over-what-there-is"] = summary(waited.responses[0].partitions[0])
                if version >= 9:
                    cases.update({f"epoch-{e}": fetch(current_leader_epoch=e) for e in (0, 5, -2)})
                if version >= 13:
                    cases.update({"unknown-id": fetch(topic_id=uuid.uuid4()), "zero-id": fetch(topic_id=dr.ZERO_UUID)})
                else:
                    cases["unknown-topic"] = fetch(topic_name="nope-" + topic)
                out[f"v{version}"] = cases
        return out

    assert_same(pair.run(scenario), "Fetch answers")


def test_fetch_returns_whole_batches_only(pair):
    """PartitionMaxBytes of two batches and a few bytes: Kafka fills it with the start of the third batch, which
    no client can read; Shoal stops at the last whole batch."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "f-partial")
        with target.raw() as raw:
            for _ in range(3):
                assert dr.produce(raw, topic, BIG).error_code == 0
            part = dr.fetch(raw, topic, 0, partition_max_bytes=2 * len(BIG) + 5)
            return {"bytes": len(part.records), "whole batches": len(list(rec.iter_batches(bytes(part.records))))}

    known_difference(pair.run(scenario), kafka={"bytes": 2 * len(BIG) + 5, "whole batches": 2},
                     shoal={"bytes": 2 * len(BIG), "whole batches": 2},
                     reason="Fetch returns whole batches only")


def test_fetch_sessions(pair):
    """Fetch sessions (KIP-227): Kafka creates one for a full fetch with epoch 0 and returns its id; Shoal keeps
    none and answers session id 0, as Kafka does when its session cache is full. Incremental fetches of a session
    the broker does not have (any epoch but -1 and 0) are FETCH_SESSION_ID_NOT_FOUND on both."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "f-sessions")
        out = {}
        with target.raw() as raw:
            assert dr.produce(raw, topic, BIG).error_code == 0
            for version in (7, 12, 17):
                name, id_ = (topic, dr.ZERO_UUID) if version < 13 else ("", dr.topic_id(raw, topic))
                for session_id, epoch in ((12345, 1), (12345, -1), (0, 5), (0, -1)):
                    answer = raw.call(dr.FETCH, version, dr.fetch_request(
                        [dr.fetch_partition(name, 0, topic_id_=id_)], session_id=session_id, session_epoch=epoch))
                    out[f"v{version}-{session_id}-{epoch}"] = {
                        "error_code": answer.error_code, "session_id": answer.session_id,
                        "partitions": [summary(p) for t in answer.responses for p in t.partitions]}
        return out

    assert_same(pair.run(scenario), "Fetch session errors")

    def new_session(target: Target):
        topic = dr.new_topic(target, "f-new-session")
        with target.raw() as raw:
            out = {}
            for session_id in (0, 12345):  # a full fetch (epoch 0), naming no session or one to replace
                answer = raw.call(dr.FETCH, 12, dr.fetch_request([dr.fetch_partition(topic, 0)],
                                                                 session_id=session_id, session_epoch=0))
                out[f"from {session_id}"] = {"error_code": answer.error_code, "session created": answer.session_id != 0}
            return out

    created = {"error_code": 0, "session created": True}
    none = {"error_code": 0, "session created": False}
    known_difference(pair.run(new_session), kafka={"from 0": created, "from 12345": created},
                     shoal={"from 0": none, "from 12345": none}, reason="No fetch sessions")


def test_read_committed_fetch_and_list_offsets(pair):
    """A transaction open between two plain batches, then aborted: Fetch (v4 and v12) and ListOffsets in both
    isolation levels, with the last stable offset and the aborted transactions (producer ids compared as 'ours')."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "f-txn")
        transactional_id = target.unique("f-txn-id")
        out = {}
        with target.raw() as raw:
            init = dr.init_producer_id(raw, transactional_id)
            pid, epoch = init.producer_id, init.producer_epoch

            def ours(part) -> dict:
                """The summary with each aborted transaction's producer id reduced to 'is it ours'."""
                out = summary(part)
                out["aborted_transactions"] = None if out["aborted_transactions"] is None else [
                    (t.producer_id == pid, t.first_offset) for t in out["aborted_transactions"]]
                return out

            def reads(stage: str) -> None:
                for iso in (0, 1):
                    for version in (4, 12):
                        out[f"{stage}-fetch-iso{iso}-v{version}"] = ours(
                            dr.fetch(raw, topic, 0, version=version, isolation_level=iso))
                    out[f"{stage}-from-2-iso{iso}"] = ours(dr.fetch(raw, topic, 2, isolation_level=iso))
                    out[f"{stage}-offsets-iso{iso}"] = [dict(dr.list_offsets(raw, topic, ts, isolation_level=iso))
                                                        for ts in (-1, -2, -3, 0)]
                    out[f"{stage}-unknown-partition-iso{iso}"] = summary(
                        dr.fetch(raw, topic, 0, partition=3, isolation_level=iso))

            assert dr.produce(raw, topic, rec.build_batch([rec.Record(None, b"plain")], timestamp=1_000)).error_code == 0
            added = raw.call(dr.ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
            out["added"] = added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            out["produced"] = dr.produce(raw, topic, rec.build_batch(
                [rec.Record(None, b"t1"), rec.Record(None, b"t2")], timestamp=2_000, producer_id=pid,
                producer_epoch=epoch, base_sequence=0, transactional=True), transactional_id=transactional_id).error_code
            assert dr.produce(raw, topic, rec.build_batch([rec.Record(None, b"plain2")], timestamp=3_000)).error_code == 0
            reads("open")
            ended = raw.call(dr.END_TXN, 3, {"transactional_id": transactional_id, "producer_id": pid,
                                             "producer_epoch": epoch, "committed": False})
            out["ended"] = ended.error_code

            def settled() -> bool:
                part = dr.fetch(raw, topic, 0, isolation_level=1)
                return part.last_stable_offset == part.high_watermark
            wait_until(settled, 30, "the abort marker")
            reads("aborted")
        return out

    assert_same(pair.run(scenario), "read_committed reads")


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_list_offsets(pair, timestamp_type):
    """Every special timestamp with every version (v1-v11), by timestamp (CreateTime: exact record timestamps),
    current leader epochs, unknown topics and partitions, a partition named twice, timestamps no version knows;
    then after DeleteRecords to the middle of a batch and to the high watermark."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "lo", {"message.timestamp.type": timestamp_type}, partitions=2)
        out = {}
        with target.raw() as raw:
            def lookups(stage: str, stamps) -> None:
                for version in (1, 4, 7, 8, 9, 10, 11):
                    out[f"{stage}-v{version}"] = [dict(dr.list_offsets(raw, topic, ts, version=version))
                                                  for ts in SPECIAL + tuple(stamps)]

            lookups("empty", (0,))
            for ts in (3_000, 1_000, 2_000):
                batch = rec.build_batch([rec.Record(None, b"a", timestamp=ts), rec.Record(None, b"b", timestamp=ts - 500)])
                assert dr.produce_apart(raw, topic, batch).error_code == 0
            batch = rec.build_batch([rec.Record(None, b"c", timestamp=2_900)], compression=rec.COMPRESSION_GZIP)
            assert dr.produce_apart(raw, topic, batch).error_code == 0
            stamps = (0, 2_000, 2_001, 2_500, 2_950, 3_000, 3_001) if timestamp_type == "CreateTime" else (0, 1 << 50)
            lookups("filled", stamps)
            out["epochs"] = [dict(dr.list_offsets(raw, topic, -1, partition=p, current_leader_epoch=e))
                             for p, e in ((0, 0), (0, 1), (0, -1), (0, -2), (1, 0), (5, -1), (-1, -1))]
            out["bad-timestamps"] = [dict(dr.list_offsets(raw, topic, ts, partition=p))
                                     for ts, p in ((-7, 0), (-100, 0), (-7, 5), (-3, 0))]
            out["bad-timestamp-unknown-topic"] = dict(dr.list_offsets(raw, "nope-" + topic, -7))
            out["old-version-special-unknown-partition"] = dict(dr.list_offsets(raw, topic, -3, version=6,
                                                                                partition=5))
            out["unknown-topic"] = dict(dr.list_offsets(raw, "nope-" + topic, -1))

            def shapes(topics: list[dict]):
                answer = raw.call(dr.LIST_OFFSETS, 10, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                                                        "topics": topics})
                return sorted([t.name, sorted((dict(p) for p in t.partitions),
                                              key=lambda p: (p["partition_index"], p["error_code"]))]
                              for t in answer.topics)

            def spec(partition: int, ts: int = -1) -> dict:
                return {"partition_index": partition, "timestamp": ts, "current_leader_epoch": -1}

            out["twice-in-one-topic"] = shapes([{"name": topic, "partitions": [spec(0), spec(0), spec(1)]}])
            out["twice-in-two-topics"] = shapes([{"name": topic, "partitions": [spec(0)]},
                                                 {"name": topic, "partitions": [spec(0), spec(1)]}])
            out["twice-bad-timestamp"] = shapes([{"name": topic, "partitions": [spec(0, -7), spec(0, -7)]}])
            out["twice-unknown"] = shapes([{"name": topic, "partitions": [spec(5), spec(5)]},
                                           {"name": "nope-" + topic, "partitions": [spec(0), spec(0)]}])
            out["delete-to-3"] = dr_answer(raw.call(dr.DELETE_RECORDS, 2, delete_body(topic, [(0, 3)])))
            lookups("after-delete", stamps)
            out["delete-to-hw"] = dr_answer(raw.call(dr.DELETE_RECORDS, 2, delete_body(topic, [(0, -1)])))
            lookups("all-deleted", stamps)
        return out

    assert_same(pair.run(scenario), f"ListOffsets on a {timestamp_type} topic")


def delete_body(topic: str, specs) -> dict:
    return {"timeout_ms": 5000, "topics": [{"name": topic, "partitions": [{"partition_index": p, "offset": o}
                                                                         for p, o in specs]}]}


def dr_answer(answer) -> list:
    return sorted([t.name, sorted((dict(p) for p in t.partitions), key=lambda p: p["partition_index"])]
                  for t in answer.topics)


def test_delete_records(pair):
    """DeleteRecords v0-v2: to the middle of a batch, -1 (the high watermark), beyond it, backwards, negative,
    unknown partitions and topics, a compacted topic; then Fetch below, at and past the new log start offset."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "dr", partitions=2)
        compacted = dr.new_topic(target, "dr-compact", {"cleanup.policy": "compact"})
        out = {}
        with target.raw() as raw:
            for _ in range(3):
                assert dr.produce(raw, topic, rec.build_batch([rec.Record(b"k", b"a"), rec.Record(b"k", b"b")],
                                                              timestamp=1_000)).error_code == 0
            assert dr.produce(raw, compacted, rec.build_batch([rec.Record(b"k", b"a")])).error_code == 0

            def delete(specs, version: int = 2, name: str = topic):
                return dr_answer(raw.call(dr.DELETE_RECORDS, version, delete_body(name, specs)))

            out["middle-and-hw"] = delete([(0, 3), (1, -1), (5, 0), (-1, 0)])
            out["beyond"] = delete([(0, 100)])
            out["backwards"] = delete([(0, 1)])
            out["negative"] = delete([(0, -2)])
            out["unknown-topic"] = delete([(0, 1)], name="nope-" + topic)
            out["compacted"] = delete([(0, 1)], name=compacted)
            out["v0"] = delete([(0, 4)], version=0)
            out["v1"] = delete([(0, 4)], version=1)
            for offset in (0, 3, 4, 6, 7):
                out[f"fetch-{offset}"] = summary(dr.fetch(raw, topic, offset))
            out["fetch-partition-1"] = summary(dr.fetch(raw, topic, 0, partition=1))
            out["earliest"] = [dict(dr.list_offsets(raw, topic, -2, partition=p)) for p in (0, 1)]
        return out

    assert_same(pair.run(scenario), "DeleteRecords")


def test_offset_for_leader_epoch(pair):
    """OffsetForLeaderEpoch v2-v4: the current epoch, unknown and older epochs, CurrentLeaderEpoch fencing
    (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), unknown partitions and topics, on an empty and a filled partition."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "ofle", partitions=2)
        out = {}
        with target.raw() as raw:
            assert dr.produce(raw, topic, rec.build_batch([rec.Record(None, b"a")] * 3)).error_code == 0
            for version in (2, 3, 4):
                for label, name in (("known", topic), ("unknown", "nope-" + topic)):
                    answer = raw.call(dr.OFFSET_FOR_LEADER_EPOCH, version, {"replica_id": -1, "topics": [
                        {"topic": name, "partitions": [{"partition": p, "current_leader_epoch": c, "leader_epoch": e}
                                                       for p, c, e in ((0, -1, 0), (0, -1, -1), (0, -1, 1),
                                                                       (0, 0, 0), (0, 1, 0), (0, -2, 0), (1, 0, 0),
                                                                       (7, -1, 0), (-1, -1, 0))]}]})
                    out[f"v{version}-{label}"] = [[dict(p) for p in t.partitions] for t in answer.topics]
        return out

    assert_same(pair.run(scenario), "OffsetForLeaderEpoch")


def test_request_shapes(pair):
    """A partition named twice in one Fetch or DeleteRecords (Kafka keys requests by partition: one answer, the
    last values), a topic named in two entries, a follower's Fetch (ReplicaId or ReplicaState, v15+) on a single
    node, isolation levels no version knows in Fetch and ListOffsets, an internal topic."""
    def scenario(target: Target):
        topic = dr.new_topic(target, "f-shapes", partitions=2)
        out = {}
        with target.raw() as raw:
            assert dr.produce(raw, topic, rec.build_batch([rec.Record(None, b"a")] * 3, timestamp=1_000)).error_code == 0
            tid = dr.topic_id(raw, topic)

            def partition(index: int, offset: int) -> dict:
                return {"partition": index, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                        "log_start_offset": -1, "current_leader_epoch": -1}

            def fetch(version: int, entries: list[list[dict]], **body):
                name, id_ = (topic, dr.ZERO_UUID) if version < 13 else ("", tid)
                answer = raw.call(dr.FETCH, version, {**dr.fetch_request(
                    [{"topic": name, "topic_id": id_, "partitions": parts} for parts in entries]), **body})
                return {"error_code": answer.error_code, "session_id": answer.session_id,
                        "responses": [[summary(p) for p in t.partitions] for t in answer.responses]}

            for version in (7, 12, 13, 15, 16, 17):
                out[f"v{version}-twice"] = fetch(version, [[partition(0, 0), partition(0, 2)]])
                out[f"v{version}-two-entries"] = fetch(version, [[partition(0, 2)], [partition(1, 0)]])
                follower = {"replica_id": 5} if version < 15 else {"replica_state": {"replica_id": 5,
                                                                                     "replica_epoch": 1}}
                out[f"v{version}-follower"] = fetch(version, [[partition(0, 0), partition(9, 0)]], **follower)
                out[f"v{version}-isolation-5"] = fetch(version, [[partition(0, 0), partition(9, 0)]],
                                                       isolation_level=5)
            answer = raw.call(dr.LIST_OFFSETS, 10, {"replica_id": -1, "isolation_level": 3, "timeout_ms": 1000,
                                                    "topics": [{"name": topic, "partitions": [
                                                        {"partition_index": 0, "timestamp": -1},
                                                        {"partition_index": 7, "timestamp": -1}]},
                                                        {"name": "nope-" + topic, "partitions": [
                                                            {"partition_index": 0, "timestamp": -1}]}]})
            out["list-offsets-isolation-3"] = [[t.name, [dict(p) for p in t.partitions]] for t in answer.topics]
            out["delete-twice"] = dr_answer(raw.call(dr.DELETE_RECORDS, 2, delete_body(topic, [(0, 1), (0, 2)])))
            out["delete-two-entries"] = dr_answer(raw.call(dr.DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
                {"name": topic, "partitions": [{"partition_index": 1, "offset": 0}]},
                {"name": topic, "partitions": [{"partition_index": 1, "offset": 0}]}]}))
            # __consumer_offsets exists once a group coordinator was looked up (Kafka makes it then)
            wait_until(lambda: raw.call(dr.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
                       .coordinators[0].error_code == 0, 60, "a group coordinator")
            out["delete-internal"] = dr_answer(raw.call(dr.DELETE_RECORDS, 2, delete_body("__consumer_offsets",
                                                                                          [(0, 0)])))
        return out

    assert_same(pair.run(scenario), "request shapes")
