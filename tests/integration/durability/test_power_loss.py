"""Power losses: the broker's log directory on a file system that loses whatever was not fsynced
(tests/helpers/powerloss_fs.py), directory entries included, at seeded random moments, then a restart.

kill -9 keeps the page cache, so only these tests see a missing fsync. Each scenario loses power several times
while clients work (sometimes once more in the middle of the restart's recovery), half the losses "torn" (part
of what was pending persists), then checks what the broker acknowledged. The seed is printed
(SHOAL_POWERLOSS_SEED=N replays a run's choices; the timing of the clients still varies) and so are the figures
of each scenario (POWER-LOSS FIGURES ...).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType

from tests.helpers.confluent_clients import admin_client, read_partitions, share_from_earliest
from tests.helpers.powerloss_clients import (
    AcceptingShareConsumer,
    AckedProducer,
    OffsetCommitter,
    ShareLedger,
    TopicAdmin,
    TransactionsWorker,
)
from tests.helpers.powerloss_mount import fuse_available
from tests.helpers.powerloss_rig import PowerLossRig
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("SHOAL_POWERLOSS_SEED") or random.SystemRandom().randrange(1 << 30))
SMALL_SEGMENTS = {"internal.segment.bytes": "16384"}  # segments roll every ~150 records of 100 bytes


@pytest.fixture
def rig_factory(tmp_path, request):
    why = fuse_available()
    if why is not None:
        pytest.fail(f"the power-loss file system needs FUSE: {why}")
    print(f"power-loss seed {SEED} ({request.node.name})")
    rigs: list[PowerLossRig] = []

    def make(**overrides: str) -> PowerLossRig:
        rig = PowerLossRig(tmp_path / f"rig{len(rigs)}", random.Random(f"{SEED}:{request.node.name}"),
                           overrides=overrides)
        rigs.append(rig)
        return rig

    try:
        yield make
    finally:
        for rig in rigs:
            rig.close()


def report(name: str, rig: PowerLossRig, **figures: object) -> None:
    print(f"POWER-LOSS FIGURES {json.dumps({'scenario': name, 'seed': SEED, **rig.figures(), **figures})}")


def cluster_id(bootstrap: str) -> str:
    return admin_client(bootstrap).list_topics(timeout=20).cluster_id


# --- scenarios -------------------------------------------------------------------------------------------------
def test_first_start(rig_factory):
    """Losses at random points of a fresh broker's first start (and just after it): every restart succeeds, and
    once a client saw the cluster id, it stays; then the broker keeps an acknowledged topic and its records."""
    rig = rig_factory()
    seen: list[str] = []
    during = 0
    for _ in range(4):
        during += rig.lose_power_during_start(on_started=lambda: seen.append(cluster_id(rig.bootstrap)))
    rig.start()
    now = cluster_id(rig.bootstrap)
    assert not seen or now == seen[0], f"cluster id changed by a power loss: {seen} then {now}"
    assert len(set(seen)) <= 1, f"cluster id changed by a power loss: {seen}"
    rig.create_topic("first", 2)
    producer = AckedProducer(rig.bootstrap, "first", rate=500)
    producer.start()
    try:
        wait_until(lambda: producer.reached(200), 60, "200 records acknowledged")
        rig.lose_power(changes=(1, 60), wait_s=5)
        rig.restart()
        assert cluster_id(rig.bootstrap) == now
    except BaseException:
        producer.stop(flush_s=1)
        raise
    producer.stop()
    stored = {(p, o): v for p, records in read_partitions(rig.bootstrap, "first", 2).items() for o, v in records}
    lost = [k for k, v in producer.acked.items() if stored.get(k) != v]
    report("first start", rig, losses_before_listening=during, records_acked=len(producer.acked),
           lost=len(lost))
    assert lost == []


def test_idempotent_producer_across_losses(rig_factory):
    """An idempotent acks=all producer on three partitions whose segments roll: after each loss the producer
    goes on (it reconnects to the same port); no acknowledged record is lost and none is written twice."""
    rig = rig_factory()
    rig.start()
    rig.create_topic("idem", 3, SMALL_SEGMENTS)
    producer = AckedProducer(rig.bootstrap, "idem", rate=600)
    producer.start()
    try:
        for _cycle in range(4):
            target = producer.acked_count() + rig.rng.randint(150, 600)
            wait_until(lambda t=target: producer.reached(t), 90, f"{target} records acknowledged")
            rig.lose_power(changes=(1, 150))
            rig.restart(recovery_loss_chance=0.3)
        target = producer.acked_count() + 100
        wait_until(lambda: producer.reached(target), 90, "records acknowledged after the last restart")
    except BaseException:
        producer.stop(flush_s=1)
        raise
    undelivered = producer.stop()
    stored = read_partitions(rig.bootstrap, "idem", 3)
    by_key = {(p, o): v for p, records in stored.items() for o, v in records}
    lost = sorted(k for k, v in producer.acked.items() if by_key.get(k) != v)
    counts = Counter(v for records in stored.values() for _o, v in records)
    duplicated = sorted(v for v, n in counts.items() if n > 1)
    segments = sum(1 for p in range(3) for f in os.listdir(rig.broker.data_dir / f"idem-{p}") if f.endswith(".log"))
    report("idempotent producer", rig, records_acked=len(producer.acked), records_stored=len(by_key),
           lost=len(lost), duplicated=len(duplicated), undelivered=undelivered, segments=segments,
           producer_errors=dict(producer.failed), producer_fatal=producer.fatal)
    assert lost == [], f"{len(lost)} acknowledged records lost, first {lost[:5]}; producer: {producer.fatal}"
    assert duplicated == [], f"{len(duplicated)} values stored twice, first {duplicated[:5]}"
    assert producer.fatal is None
    assert segments > 6, "segments did not roll"


def test_topic_creation_and_config_changes(rig_factory):
    """CreateTopics, IncrementalAlterConfigs and DeleteTopics acknowledged before a loss hold after it: the
    topic with its partitions and id, the last acknowledged value (or one sent later), the deletion."""
    rig = rig_factory(**{"auto.create.topics.enable": "false"})  # only the admin client creates topics
    rig.start()
    admin = TopicAdmin(rig.bootstrap, rig.rng.randrange(1 << 30))
    admin.start()
    violations: list[str] = []
    try:
        for _cycle in range(4):
            ops = admin.ops
            wait_until(lambda o=ops: admin.ops >= o + rig.rng.randint(3, 8), 90, "admin requests answered")
            rig.lose_power(changes=(1, 40), wait_s=10)
            rig.restart(recovery_loss_chance=0.3)
            admin.pause()
            violations += check_topics(rig.bootstrap, admin)
            admin.resume()
    finally:
        admin.stop()
    report("topics and configs", rig, creates_acked=admin.creates, deletes=len(admin.deleted),
           recreated=len(admin.recreated), config_changes=len(admin.config_acked), violations=len(violations))
    assert admin.creates >= 4
    assert violations == [], violations[:10]


def check_topics(bootstrap: str, admin: TopicAdmin) -> list[str]:
    client = admin_client(bootstrap)
    topics = client.list_topics(timeout=20).topics
    out = []
    live = admin.live()
    for name in live:
        if name not in topics:
            out.append(f"{name}: acknowledged create lost")
        elif len(topics[name].partitions) != admin.created[name]:
            out.append(f"{name}: {len(topics[name].partitions)} partitions, {admin.created[name]} acknowledged")
    for name in admin.deleted:
        if name in topics:
            out.append(f"{name}: acknowledged delete undone")
    with_ids = [n for n in live if n in admin.topic_ids and n in topics]
    if with_ids:
        for name, future in client.describe_topics(TopicCollection(with_ids)).items():
            got = str(future.result(timeout=20).topic_id)
            if got != admin.topic_ids[name]:
                out.append(f"{name}: topic id {got}, acknowledged {admin.topic_ids[name]}")
    for name in live:
        if name not in admin.config_acked or name not in topics:
            continue
        resource = ConfigResource(ResourceType.TOPIC, name)
        got = client.describe_configs([resource])[resource].result(timeout=20)["retention.ms"].value
        value = admin.config_acked[name]
        if got != value and got not in admin.config_sent.get(name, set()):
            out.append(f"{name}: retention.ms {got}, last acknowledged {value}")
    # A re-created topic holds no record of the topic its name had before (each record is its topic's id).
    for name in sorted(set(with_ids) & admin.recreated):
        for _offset, value in read_partitions(bootstrap, name, 1)[0]:
            if value.decode() != admin.topic_ids[name]:
                out.append(f"{name}: a record of topic {value.decode()} in topic {admin.topic_ids[name]}")
    return out


def test_committed_offsets(rig_factory):
    """A group's committed offsets after a loss are never behind the last commit the broker acknowledged (and
    never ahead of the last one sent)."""
    rig = rig_factory()
    rig.start()
    rig.create_topic("offs", 3)
    committer = OffsetCommitter(rig.bootstrap, "pl-group", "offs", 3, rig.rng.randrange(1 << 30))
    committer.start()
    behind: list[str] = []
    try:
        for _cycle in range(4):
            commits = committer.commits
            wait_until(lambda c=commits: committer.commits >= c + rig.rng.randint(10, 60), 90,
                       "offset commits acknowledged")
            rig.lose_power(changes=(1, 80), wait_s=10)
            rig.restart(recovery_loss_chance=0.3)
            committer.pause()
            got = committed(rig.bootstrap, "pl-group", "offs", 3)
            for p, acked in committer.acked.items():
                if not acked <= got.get(p, -1) <= committer.attempted[p]:
                    behind.append(f"partition {p}: committed {got.get(p)}, acknowledged {acked}, "
                                  f"highest sent {committer.attempted[p]}")
            committer.resume()
    finally:
        committer.stop()
    report("committed offsets", rig, commits_acked=committer.commits, behind=len(behind))
    assert committer.commits > 40
    assert behind == []


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


@pytest.mark.parametrize("interval_ms", [0, 400])
def test_share_group_explicit_acknowledgements(rig_factory, interval_ms):
    """Share consumers ACCEPT records explicitly while records keep coming: no record is lost (each acknowledged
    one is delivered), and a record whose ACCEPT the broker confirmed comes back only if the confirmation fell
    within shoal.share.state.fsync.interval.ms of a loss (never with 0)."""
    rig = rig_factory(**{"shoal.share.state.fsync.interval.ms": str(interval_ms)})
    rig.start()
    rig.create_topic("shared", 2)
    share_from_earliest(rig.bootstrap, "pl-share")
    producer = AckedProducer(rig.bootstrap, "shared", rate=150)
    producer.start()
    ledger = ShareLedger()
    consumers = [AcceptingShareConsumer(f"pl-share-{i}", rig.bootstrap, "pl-share", "shared", ledger)
                 for i in range(2)]
    for c in consumers:
        c.start()
    try:
        for _cycle in range(4):
            target = ledger.accepted_count() + rig.rng.randint(50, 250)
            wait_until(lambda t=target: ledger.accepted_count() >= t, 90, f"{target} ACCEPTs confirmed")
            rig.lose_power(changes=(1, 100))
            rig.restart(recovery_loss_chance=0.25)
        target = ledger.accepted_count() + 50
        wait_until(lambda: ledger.accepted_count() >= target, 90, "ACCEPTs confirmed after the last restart")
        producer.stop()
        acked = set(producer.acked)
        wait_until(lambda: acked <= set(ledger.deliveries), 120, "every acknowledged record delivered")
    finally:
        producer.stop(flush_s=1)  # a no-op after the stop above; after a failure the broker may be down
        for c in consumers:
            c.stop()
    # Slack for the deferred fsync's timer and the fsync itself on a loaded machine.
    window = interval_ms / 1000 + 1.0 if interval_ms else 0.0
    too_late = [(key, at) for key, at, _delivered in ledger.redelivered_after_accept
                if not any(loss - window <= at <= loss for loss in rig.loss_times)]
    lost = sorted(acked - set(ledger.deliveries))
    # How long before the loss that undid it the oldest redelivered ACCEPT was confirmed.
    ages = [min((loss - at for loss in rig.loss_times if loss >= at), default=float("inf"))
            for _key, at, _delivered in ledger.redelivered_after_accept]
    report(f"share group, fsync interval {interval_ms} ms", rig, records_acked=len(acked),
           accepts_confirmed=len(ledger.accepted_at), redelivered_after_accept=len(ledger.redelivered_after_accept),
           oldest_redelivered_accept_s=round(max(ages, default=0.0), 3),
           redelivered_outside_window=len(too_late), lost=len(lost),
           consumer_errors=sum(sum(c.errors.values()) for c in consumers))
    assert lost == []
    assert too_late == [], f"{len(too_late)} confirmed ACCEPTs delivered again, first {too_late[:5]}"


def test_transactions(rig_factory):
    """Transactions committed and aborted across losses: read_committed sees every transaction whose commit the
    broker acknowledged, whole, none whose abort it acknowledged, and any other either whole or not at all."""
    rig = rig_factory()
    rig.start()
    rig.create_topic("tx", 3, SMALL_SEGMENTS)
    worker = TransactionsWorker(rig.bootstrap, "tx", 3, rig.rng.randrange(1 << 30))
    worker.start()
    try:
        for _cycle in range(4):
            target = worker.settled() + rig.rng.randint(5, 30)
            wait_until(lambda t=target: worker.settled() >= t, 120, f"{target} transactions ended")
            rig.lose_power(changes=(1, 150))
            rig.restart(recovery_loss_chance=0.25)
        target = worker.settled() + 5
        wait_until(lambda: worker.settled() >= target, 120, "transactions ended after the last restart")
    finally:
        worker.stop()
    # A new producer with the same transactional.id ends whatever the last one left open.
    last = Producer({"bootstrap.servers": rig.bootstrap, "transactional.id": "powerloss-txn"})
    last.init_transactions(60)
    stored = read_partitions(rig.bootstrap, "tx", 3, committed=True)
    seen: dict[int, Counter[int]] = {}
    for records in stored.values():
        for _o, value in records:
            txn, i, _n = (int(x) for x in value.decode().split(":"))
            seen.setdefault(txn, Counter())[i] += 1
    problems = []
    for txn, (n, state) in worker.outcome.items():
        got = seen.get(txn, Counter())
        whole = sorted(got) == list(range(n)) and all(c == 1 for c in got.values())
        if state == "committed" and not whole:
            problems.append(f"txn {txn} committed ({n} records): read_committed sees {dict(got)}")
        elif state == "aborted" and got:
            problems.append(f"txn {txn} aborted: read_committed sees {dict(got)}")
        elif state == "unknown" and got and not whole:
            problems.append(f"txn {txn} (outcome unknown, {n} records): read_committed sees part {dict(got)}")
    states = Counter(state for _n, state in worker.outcome.values())
    report("transactions", rig, committed=states["committed"], aborted=states["aborted"], unknown=states["unknown"],
           problems=len(problems), producer_errors=dict(worker.errors))
    assert states["committed"] >= 10 and states["aborted"] >= 2
    assert problems == [], problems[:10]


def test_compacted_topic_while_cleaning(rig_factory):
    """A compacted topic whose cleaner swaps cleaned segments in (renames) while losses fall: every key keeps its
    last acknowledged value or a later one, the log reads from start to end, nothing unknown appears."""
    rig = rig_factory(**{"log.cleaner.backoff.ms": "100"})
    rig.start()
    rig.create_topic("compact", 2, {**SMALL_SEGMENTS, "cleanup.policy": "compact",
                                                "min.cleanable.dirty.ratio": "0.01", "segment.ms": "300"})
    producer = AckedProducer(rig.bootstrap, "compact", rate=700, keys=150)
    producer.start()
    try:
        for _cycle in range(4):
            target = producer.acked_count() + rig.rng.randint(400, 1200)
            wait_until(lambda t=target: producer.reached(t), 90, f"{target} records acknowledged")
            rig.lose_power(changes=(1, 200))
            rig.restart(recovery_loss_chance=0.3)
    except BaseException:
        producer.stop(flush_s=1)
        raise
    producer.stop()
    stored = read_partitions(rig.bootstrap, "compact", 2, keys=True)
    latest_stored: dict[bytes, int] = {}
    for records in stored.values():
        for _offset, key, value in records:  # offset order: the last one of a key is its value
            latest_stored[key] = int(value[:9])
    latest_acked: dict[bytes, int] = {}
    for value in producer.acked.values():
        seq = int(value[:9])
        key = b"k%d" % (seq % 150)
        latest_acked[key] = max(latest_acked.get(key, -1), seq)
    behind = sorted(k for k, seq in latest_acked.items() if latest_stored.get(k, -1) < seq)
    unknown = sorted(k for k, seq in latest_stored.items() if seq >= producer.sent)
    kept = sum(len(records) for records in stored.values())
    report("compacted topic", rig, records_acked=len(producer.acked), records_kept=kept, keys_behind=len(behind),
           producer_fatal=producer.fatal)
    assert kept < len(producer.acked), "nothing was compacted"
    assert behind == [], f"{len(behind)} keys lost their last acknowledged value, first {behind[:5]}"
    assert unknown == []
    assert producer.fatal is None


def test_power_loss_during_recovery(rig_factory):
    """Losses that fall in the middle of start-up, one after the other, after a loss that left torn segment
    tails: recovery's own truncations and deletions must be safe to lose too; no acknowledged record is lost."""
    rig = rig_factory()
    rig.start()
    rig.create_topic("recover", 2, SMALL_SEGMENTS)
    producer = AckedProducer(rig.bootstrap, "recover", rate=800)
    producer.start()
    try:
        wait_until(lambda: producer.reached(1500), 90, "1500 records acknowledged")
        rig.lose_power(changes=(1, 100))
    finally:
        producer.stop(flush_s=1)  # the broker is down: what is still in flight stays unacknowledged
    during = sum(rig.lose_power_during_start() for _ in range(4))
    rig.start()
    rig.check_topics()
    stored = {(p, o): v for p, records in read_partitions(rig.bootstrap, "recover", 2).items() for o, v in records}
    lost = sorted(k for k, v in producer.acked.items() if stored.get(k) != v)
    report("power loss during recovery", rig, records_acked=len(producer.acked), losses_during_start=during,
           lost=len(lost))
    assert lost == [], f"{len(lost)} acknowledged records lost, first {lost[:5]}"

