"""Differential: ShareFetch and ShareAcknowledge (KIP-932) against Kafka 4.4 and Shoal, raw requests through our
codecs: share sessions and their errors, what is acquired (ranges, delivery counts, MaxRecords, BatchSize,
record_limit), acknowledgements riding on ShareFetch and on ShareAcknowledge and every bad one, lock expiry, the
delivery count limit and RENEW.

Each scenario makes its own topic and group and joins one member (tests/helpers/share_differential.py); the
partitions of a response are compared in partition order (Kafka lists them in hash order).
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.helpers.differential import Target, assert_same, known_difference
from tests.helpers.share_differential import (
    ACCEPT,
    GAP,
    RECORD_LIMIT,
    REJECT,
    RELEASE,
    RENEW,
    Member,
    acknowledged,
    append,
    fetched,
    make_topic,
    share_group,
)

pytestmark = pytest.mark.integration


def _joined(target: Target, raw, layout, **configs) -> tuple[str, uuid.UUID, Member]:
    topic, tid = make_topic(target, raw, "sf", layout)
    group = share_group(target, raw, "sf-g", **configs)
    member = Member(raw, group, target.unique("m"))
    member.join([topic], want=len(layout))
    return topic, tid, member


def _fetch_all(member: Member, tid: uuid.UUID, partitions, **kw) -> dict:
    """The first fetch of a session over `partitions`, waiting for records (a share-partition is loaded on first
    use: Kafka answers as soon as one has records)."""
    return fetched(member.fetch({tid: partitions}, max_wait_ms=5000, **kw))


# --- acquisition --------------------------------------------------------------------------------------------------

def test_first_fetches_of_a_two_partition_session(pair):
    """The first fetch of a session answers as soon as one share-partition is loaded and has records; the next
    one serves the other partition (the session's partitions start at epoch % n)."""
    def scenario(target: Target):
        with target.raw() as raw:
            _, tid, m = _joined(target, raw, [[5, 5], [5, 5]])
            out = [_fetch_all(m, tid, [0, 1])]
            out += [fetched(m.fetch(max_wait_ms=200)) for _ in range(2)]
            return out

    assert_same(pair.run(scenario), "the first fetches of a 2-partition session")


def test_loaded_partitions_are_served_together(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid, m = _joined(target, raw, [[3], [3]])
            _collect(m, m.fetch({tid: [0, 1]}, max_wait_ms=5000))
            end = time.monotonic() + 20
            while len(_owned(m)) < 2:  # drain the first records, whatever the loading order
                assert time.monotonic() < end
                _collect(m, m.fetch(max_wait_ms=200))
            for p in (0, 1):
                append(raw, topic, p, [4], tag="b")
            return [fetched(m.fetch(max_wait_ms=1000)), fetched(m.fetch(max_wait_ms=100))]

    assert_same(pair.run(scenario), "new records of two loaded share-partitions")


def _owned(member: Member) -> set:
    return getattr(member, "seen", set())


def _collect(member: Member, resp) -> None:
    seen = getattr(member, "seen", set())
    for t in resp.responses:
        for p in t.partitions:
            if p.acquired_records:
                seen.add(p.partition_index)
    member.seen = seen


@pytest.mark.parametrize("max_records,batch_size,version,mode", [
    (500, 500, 1, 0), (4, 500, 1, 0), (6, 2, 1, 0), (10, 3, 1, 0), (3, 500, 2, RECORD_LIMIT),
    (7, 500, 2, RECORD_LIMIT), (1, 1, 2, RECORD_LIMIT), (3, 500, 2, 0)])
def test_max_records_and_batch_size(pair, max_records, batch_size, version, mode):
    """One partition of batches of 2, 3 and 5 records: what one fetch acquires (whole batches in batch_optimized
    mode, exactly MaxRecords in record_limit mode), how the acquired records are split by BatchSize, and what the
    next fetch gets."""
    def scenario(target: Target):
        with target.raw() as raw:
            _, tid, m = _joined(target, raw, [[2, 3, 5, 2]])
            first = _fetch_all(m, tid, [0], max_records=max_records, batch_size=batch_size, version=version,
                               mode=mode)
            second = fetched(m.fetch(max_records=max_records, batch_size=batch_size, version=version, mode=mode,
                                     max_wait_ms=100))
            # the acquired offsets and delivery counts; how they are cut into AcquiredRecords entries is pinned
            # by test_acquired_records_granularity
            return [_coalesced(first), _coalesced(second)]

    assert_same(pair.run(scenario), f"MaxRecords {max_records}, BatchSize {batch_size}, v{version} mode {mode}")


def _coalesced(view: dict) -> dict:
    for p in view["partitions"]:
        merged: list = []
        for first, last, count in p["acquired"]:
            if merged and merged[-1][1] + 1 == first and merged[-1][2] == count:
                merged[-1] = (merged[-1][0], last, count)
            else:
                merged.append((first, last, count))
        p["acquired"] = merged
    return view


def test_acquired_records_granularity(pair):
    """Kafka answers one AcquiredRecords entry per in-flight batch (new records cut at log batches every
    BatchSize records, and a record_limit acquisition's remainder kept apart); Shoal one per run of contiguous
    offsets with the same delivery count (docs/kafka-differences.md, "Share groups")."""
    def scenario(target: Target):
        with target.raw() as raw:
            _, tid, m = _joined(target, raw, [[2, 3, 5, 2]])
            first = _fetch_all(m, tid, [0], max_records=6, batch_size=2)
            rest = fetched(m.fetch(max_records=3, version=2, mode=RECORD_LIMIT, max_wait_ms=100))
            return [first["partitions"][0]["acquired"], rest["partitions"][0]["acquired"]]

    known_difference(pair.run(scenario), kafka=[[[0, 1, 1], [2, 4, 1], [5, 9, 1]], [[10, 11, 1]]],
                     shoal=[[[0, 9, 1]], [[10, 11, 1]]],
                     reason="Share groups: AcquiredRecords entries are runs of offsets")


def test_max_records_over_four_partitions(pair):
    """MaxRecords of one batch over four partitions holding new batches: which partition each fetch of the session
    serves (partitions served lately go last). Each fetch serves one partition, so that the order Kafka moves
    several served partitions in (the hash order of its response) does not come into it. Another member loads the
    share-partitions first: how many fetches that takes depends on the machine's speed, and the measured session
    must not inherit it (its epoch decides the rotation)."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid, warmer = _joined(target, raw, [[3]] * 4)
            _collect(warmer, warmer.fetch({tid: [0, 1, 2, 3]}, max_wait_ms=5000, max_records=1))
            end = time.monotonic() + 20
            while len(_owned(warmer)) < 4:  # every share-partition loaded, its first batch served once
                assert time.monotonic() < end
                _collect(warmer, warmer.fetch(max_wait_ms=200, max_records=1))
            acked = warmer.acknowledge({(tid, p): [(0, 2, ACCEPT)] for p in range(4)})
            assert [p.error_code for t in acked.responses for p in t.partitions] == [0] * 4, acked
            warmer.leave()
            m = Member(raw, warmer.group, target.unique("m"))
            m.join([topic], want=4)
            opened = fetched(m.fetch({tid: [0, 1, 2, 3]}))
            out = [opened]
            for round_ in range(8):
                for p in range(4):
                    append(raw, topic, p, [3], tag=f"r{round_}-")
                out.append(fetched(m.fetch(max_wait_ms=300, max_records=3)))
            return out

    assert_same(pair.run(scenario), "MaxRecords 3 over four partitions")


def test_min_bytes_and_max_wait(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid, m = _joined(target, raw, [[1]])
            first = _fetch_all(m, tid, [0])
            start = time.monotonic()
            empty = fetched(m.fetch(max_wait_ms=300))
            waited = time.monotonic() - start >= 0.25
            append(raw, topic, 0, [2], tag="x")
            short = fetched(m.fetch(max_wait_ms=300, min_bytes=1 << 20))  # MinBytes never reached: MaxWait
            return {"first": first, "empty": empty, "waited": waited, "short": short}

    assert_same(pair.run(scenario), "MinBytes and MaxWait")


# --- sessions ---------------------------------------------------------------------------------------------------------

_SESSION_CASES = {
    "epoch 1 without a session": lambda m, tid: m.fetch({tid: [0]}, epoch=1),
    "epoch -1 without a session": lambda m, tid: m.fetch({}, epoch=-1),
    "epoch 5 after opening": lambda m, tid: (m.fetch({tid: [0]}), m.fetch(epoch=5))[1],
    "epoch 0 with acknowledgements": lambda m, tid: m.fetch({tid: [0]}, epoch=0, acks={(tid, 0): [(0, 0, ACCEPT)]}),
    "member id over 36 characters": lambda m, tid: m.fetch({tid: [0]}, member_id="z" * 37),
    "empty member id": lambda m, tid: m.fetch({tid: [0]}, member_id=""),
    "empty group id": lambda m, tid: m.fetch({tid: [0]}, group=""),
    "unknown topic id": lambda m, tid: m.fetch({uuid.UUID(int=77): [0]}),
    "partition out of range": lambda m, tid: m.fetch({tid: [5]}),
    "negative max records": lambda m, tid: (m.fetch({tid: [0]}, max_wait_ms=5000, max_records=1),
                                            m.fetch(max_records=-1, max_wait_ms=100))[1],
    "zero max records": lambda m, tid: (m.fetch({tid: [0]}, max_wait_ms=5000, max_records=1),
                                        m.fetch(max_records=0, max_wait_ms=100))[1],
    "zero max bytes": lambda m, tid: m.fetch({tid: [0]}, max_bytes=0, max_wait_ms=100),
    "negative max bytes": lambda m, tid: (m.fetch({tid: [0]}, max_wait_ms=5000, max_records=1),
                                          m.fetch(max_bytes=-1, max_wait_ms=100))[1],
    "renew ack with fetch limits (v2)": lambda m, tid: m.fetch({tid: [0]}, version=2, renew_only=False,
                                                               max_wait_ms=100, epoch=0) and
    m.raw.call(78, 2, {"group_id": m.group, "member_id": m.id, "share_session_epoch": 1, "max_wait_ms": 5,
                       "min_bytes": 1, "max_bytes": 10, "max_records": 10, "batch_size": 10, "topics": [],
                       "forgotten_topics_data": [], "share_acquire_mode": 0, "is_renew_ack": True}),
    "reopened with epoch 0": lambda m, tid: (m.fetch({tid: [0]}, max_wait_ms=5000), m.fetch({tid: [0]}, epoch=0))[1],
    "closed, then epoch 1": lambda m, tid: (m.fetch({tid: [0]}, max_wait_ms=5000), m.fetch(epoch=-1),
                                            m.fetch(epoch=1))[2],
    "close with partitions to fetch": lambda m, tid: (m.fetch({tid: [0]}, max_wait_ms=5000), m.fetch({tid: [0]}, epoch=-1))[1],
    "forgotten partition": lambda m, tid: (m.fetch({tid: [0]}, max_wait_ms=5000), m.fetch(forget={tid: [0]}),
                                          m.fetch(max_wait_ms=100))[1:],
    "renew ack without acknowledgements (v2)": lambda m, tid: (m.fetch({tid: [0]}, max_wait_ms=5000),
                                                              m.fetch(version=2, renew_only=True))[1],
}


@pytest.mark.parametrize("case", sorted(_SESSION_CASES))
def test_share_sessions(pair, case):
    def scenario(target: Target):
        with target.raw() as raw:
            _, tid, m = _joined(target, raw, [[3]])
            got = _SESSION_CASES[case](m, tid)
            return [fetched(r) for r in got] if isinstance(got, tuple) else fetched(got)

    assert_same(pair.run(scenario), f"ShareFetch: {case}")


def test_fetches_outside_the_members_assignment(pair):
    """Kafka's share-partition leader serves any member id anything it asks for; Shoal serves only members of the
    group, and each only its assigned partitions (docs/kafka-differences.md, "Share groups")."""
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid = make_topic(target, raw, "sf-two", [[2], [2]])
            group = share_group(target, raw, "sf-two-g")
            a, b = Member(raw, group, target.unique("a")), Member(raw, group, target.unique("b"))
            a.join([topic], want=2)
            _collect(a, a.fetch({tid: [0, 1]}, max_wait_ms=5000))
            end = time.monotonic() + 20
            while len(_owned(a)) < 2:  # both share-partitions loaded (their first records acquired by a)
                assert time.monotonic() < end
                _collect(a, a.fetch(max_wait_ms=200))
            b.heartbeat([topic])
            while not (b.assigned.get(tid) and len(a.assigned.get(tid, ())) == 1):
                assert time.monotonic() < end, (a.assigned, b.assigned)
                time.sleep(0.05)
                a.heartbeat()
                b.heartbeat()
            for p in (0, 1):
                append(raw, topic, p, [2], tag="b")
            served = fetched(a.fetch(max_wait_ms=1000))
            stranger = Member(raw, group, target.unique("stranger"))
            for p in (0, 1):
                append(raw, topic, p, [2], tag="c")
            alien = fetched(stranger.fetch({tid: [0, 1]}, max_wait_ms=1000))
            return {"a_served": len([p for p in served["partitions"] if p["acquired"]]),
                    "stranger": (alien["error_code"], len([p for p in alien["partitions"] if p["acquired"]]))}

    known_difference(pair.run(scenario), kafka={"a_served": 2, "stranger": [0, 2]},
                     shoal={"a_served": 1, "stranger": [122, 0]},
                     reason="Share groups: ShareFetch serves members their assigned partitions only")


def test_share_group_offsets_before_and_after_acknowledgements(pair):
    """DescribeShareGroupOffsets of a share-partition that was fetched but not acknowledged, then after its
    records were accepted (docs/kafka-differences.md, "Share groups")."""
    def scenario(target: Target):
        with target.raw() as raw:
            _, tid, m = _joined(target, raw, [[5, 5]])
            _fetch_all(m, tid, [0])
            before = _share_offsets(raw, m.group)
            m.acknowledge({(tid, 0): [(0, 9, ACCEPT)]})
            accepted = _share_offsets(raw, m.group)
            return {"before": before, "accepted": accepted}

    known_difference(pair.run(scenario),
                     kafka={"before": [["sf", [[0, -1, -1, 0]]]], "accepted": [["sf", [[0, 0, 0, 0]]]]},
                     shoal={"before": [["sf", [[0, 0, 10, 0]]]], "accepted": [["sf", [[0, 10, 0, 0]]]]},
                     reason="Share groups: share-partition start offsets are written as they move")


# --- acknowledgements ----------------------------------------------------------------------------------------------

_ACKS = {
    "accept all": [(0, 9, ACCEPT)],
    "release all": [(0, 9, RELEASE)],
    "reject all": [(0, 9, REJECT)],
    "accept, release and reject": [(0, 2, ACCEPT), (3, 5, RELEASE), (6, 9, REJECT)],
    "per-offset types": [(0, 3, [ACCEPT, RELEASE, REJECT, ACCEPT])],
    "gap on acquired records": [(0, 1, GAP), (2, 9, ACCEPT)],
    "part of the records": [(2, 4, ACCEPT)],
    "records not acquired": [(20, 25, ACCEPT)],
    "partly acquired": [(5, 14, ACCEPT)],
    "first after last": [(5, 2, ACCEPT)],
    "overlapping ranges": [(0, 5, ACCEPT), (3, 9, ACCEPT)],
    "unordered ranges": [(5, 9, ACCEPT), (0, 4, ACCEPT)],
    "unknown type": [(0, 9, 9)],
    "renew on v1": [(0, 9, RENEW)],
    "no types": [(0, 9, [])],
    "types not matching the range": [(0, 9, [ACCEPT, RELEASE])],
    "negative offsets": [(-3, -1, ACCEPT)],
    "twice the same records": [(0, 4, ACCEPT), (0, 4, ACCEPT)],
}


def _acked(target: Target, ranges, via: str, version: int = 1):
    """Fetch 10 records of batches of 5, acknowledge `ranges` (on ShareFetch or ShareAcknowledge), then see what
    a fetch gets next and what the group's offsets are."""
    with target.raw() as raw:
        _, tid, m = _joined(target, raw, [[5, 5]])
        first = _fetch_all(m, tid, [0])
        if via == "fetch":
            ack = fetched(m.fetch(acks={(tid, 0): ranges}, max_wait_ms=100, version=version))
        else:
            ack = acknowledged(m.acknowledge({(tid, 0): ranges}, version=version))
        after = fetched(m.fetch(max_wait_ms=100))
        # Kafka runs a ShareFetch's acknowledgements and its acquisition concurrently: records it releases come
        # back in that fetch or in the next one, depending on timing. Compared: the acknowledgement's answer,
        # and what the two fetches acquired together.
        again = []
        for view in ((ack, after) if via == "fetch" else (after,)):
            for p in view.get("partitions", []):
                again.extend(tuple(r) for r in p.pop("acquired"))
                p.pop("offsets")
            view["partitions"] = [p for p in view.get("partitions", []) if
                                  p["error_code"] or p["acknowledge_error_code"] or p["error_message"]]
        return {"first": first, "ack": ack, "after": after, "acquired_again": sorted(again)}


def _share_offsets(raw, group: str) -> list:
    resp = raw.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})
    return [(t.topic_name, [(p.partition_index, p.start_offset, p.lag, p.error_code) for p in t.partitions])
            for g in resp.groups for t in g.topics]


@pytest.mark.parametrize("case", sorted(_ACKS))
@pytest.mark.parametrize("via", ["fetch", "acknowledge"])
def test_acknowledgements(pair, case, via):
    assert_same(pair.run(lambda target: _acked(target, _ACKS[case], via)), f"acknowledgement on {via}: {case}")


_ACK_SESSION = {
    "epoch 0": lambda m, tid: m.acknowledge({(tid, 0): [(0, 4, ACCEPT)]}, epoch=0),
    "no session": lambda m, tid: m.acknowledge({(tid, 0): [(0, 4, ACCEPT)]}, epoch=1, member_id="another-one"),
    "wrong epoch": lambda m, tid: m.acknowledge({(tid, 0): [(0, 4, ACCEPT)]}, epoch=7),
    "member id over 36 characters": lambda m, tid: m.acknowledge({(tid, 0): [(0, 4, ACCEPT)]}, member_id="q" * 37),
    "unknown topic id": lambda m, tid: m.acknowledge({(uuid.UUID(int=78), 0): [(0, 4, ACCEPT)]}),
    "partition out of range": lambda m, tid: m.acknowledge({(tid, 4): [(0, 4, ACCEPT)]}),
    "close with -1": lambda m, tid: m.acknowledge({(tid, 0): [(0, 4, ACCEPT)]}, epoch=-1),
    "nothing to acknowledge": lambda m, tid: m.acknowledge({}),
}


@pytest.mark.parametrize("case", sorted(_ACK_SESSION))
def test_share_acknowledge_sessions(pair, case):
    def scenario(target: Target):
        with target.raw() as raw:
            _, tid, m = _joined(target, raw, [[5, 5]])
            first = _fetch_all(m, tid, [0])
            got = acknowledged(_ACK_SESSION[case](m, tid))
            after = fetched(m.fetch(epoch=m.session if m.session >= 0 else 0, max_wait_ms=100,
                                    topics={tid: [0]} if m.session < 0 else None))
            return {"first": first, "ack": got, "after": after}

    assert_same(pair.run(scenario), f"ShareAcknowledge: {case}")


# --- locks, delivery counts, renew ----------------------------------------------------------------------------------

def test_lock_expiry_and_delivery_count_limit(pair):
    """share.record.lock.duration.ms=1000 and share.delivery.count.limit=2: a lock that expires makes the records
    available again with a higher delivery count, an acknowledgement after expiry is refused, and records past
    the limit are archived."""
    def scenario(target: Target):
        with target.raw() as raw:
            _, tid, m = _joined(target, raw, [[4]], **{"share.record.lock.duration.ms": "1000",
                                                       "share.delivery.count.limit": "2"})
            out = {"first": _fetch_all(m, tid, [0])}
            time.sleep(1.6)
            out["late_ack"] = acknowledged(m.acknowledge({(tid, 0): [(0, 3, ACCEPT)]}))
            out["again"] = fetched(m.fetch(max_wait_ms=2000))
            out["released"] = fetched(m.fetch(acks={(tid, 0): [(0, 1, RELEASE), (2, 3, ACCEPT)]}, max_wait_ms=300))
            out["later"] = fetched(m.fetch(max_wait_ms=300))
            return out

    assert_same(pair.run(scenario), "lock expiry and the delivery count limit")


def test_renew_extends_locks(pair):
    """RENEW (v2) keeps records acquired past their lock duration; an is_renew_ack fetch only acknowledges."""
    def scenario(target: Target):
        with target.raw() as raw:
            _, tid, m = _joined(target, raw, [[4]], **{"share.record.lock.duration.ms": "1000"})
            out = {"first": _fetch_all(m, tid, [0], version=2)}
            time.sleep(0.6)
            out["renew"] = fetched(m.fetch(acks={(tid, 0): [(0, 3, RENEW)]}, version=2, renew_only=True))
            time.sleep(0.6)
            out["renew_unflagged"] = acknowledged(m.acknowledge({(tid, 0): [(0, 1, RENEW)]}, version=2))
            out["renew_ack"] = acknowledged(m.acknowledge({(tid, 0): [(0, 1, RENEW)]}, version=2, renew=True))
            time.sleep(0.6)
            # offsets 2-3 expired (renewed 1.2 s ago); 0-1 renewed 0.6 s ago are still ours
            out["accept"] = acknowledged(m.acknowledge({(tid, 0): [(0, 1, ACCEPT)]}, version=2))
            out["after"] = fetched(m.fetch(max_wait_ms=1000, version=2))
            return out

    assert_same(pair.run(scenario), "RENEW acknowledgements")


def _delivered(view: dict) -> dict:
    """The served offsets a consumer delivers (those in acquired ranges): Kafka also serves the bytes of the
    aborted batches between two acquired ranges, Shoal does not (docs/kafka-differences.md, "Share groups")."""
    for p in view["partitions"]:
        inside = [o for a, b in p["offsets"] for o in range(a, b + 1)
                  if any(f <= o <= last for f, last, _ in p["acquired"])]
        p["offsets"] = [(o, o) for o in inside]
    return view


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_isolation_level_over_transactions(pair, isolation):
    """share.isolation.level: records of an aborted transaction are never delivered under read_committed (they
    are archived), records of an open transaction wait for its end; control batches are never delivered."""
    def scenario(target: Target):
        from confluent_kafka import Producer  # noqa: PLC0415 - only this test produces transactionally

        with target.raw() as raw:
            topic, tid = make_topic(target, raw, "sf-txn", [[2]])
            group = share_group(target, raw, "sf-txn-g", **{"share.isolation.level": isolation})
            producer = Producer({**target.client_config(), "transactional.id": target.unique("tx"),
                                 "linger.ms": 5})
            producer.init_transactions(30)
            for commit in (True, False):
                producer.begin_transaction()
                for i in range(3):
                    # a batch per record: how the client batches is its timing, and acquired ranges follow batches
                    producer.produce(topic, value=f"t{commit}-{i}".encode(), partition=0)
                    producer.flush(30)
                (producer.commit_transaction if commit else producer.abort_transaction)(30)
            producer.begin_transaction()  # left open
            producer.produce(topic, value=b"open", partition=0)
            producer.flush(30)
            append(raw, topic, 0, [1], tag="after")
            m = Member(raw, group, target.unique("m"))
            m.join([topic], want=1)
            first = _delivered(fetched(m.fetch({tid: [0]}, max_wait_ms=3000)))
            producer.commit_transaction(30)
            # the markers are written after EndTxn is answered: fetch until the records of that transaction come
            end = time.monotonic() + 20
            while True:
                second = _delivered(fetched(m.fetch(max_wait_ms=500)))
                if second["partitions"]:
                    break
                assert time.monotonic() < end, second
            return {"first": first, "second": second}

    assert_same(pair.run(scenario), f"{isolation} over committed, aborted and open transactions")
