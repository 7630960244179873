"""KIP-848 and classic group semantics seen by a real client (confluent-kafka / librdkafka): regular-expression
subscriptions that follow topic creation, no partition owned by two members at once while members come and go,
a crashed member removed at its session timeout, and group ids that belong to another group type."""

from __future__ import annotations

import select
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer

from tests.helpers.confluent_clients import (
    BackgroundProducer,
    admin_client,
    create_topic,
    first_consumer_error,
    produce_batch,
)
from tests.helpers.group_members import Member
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

# Short consumer-protocol sessions, so that a crashed member is noticed within seconds (Kafka's names).
SHORT_SESSIONS = {"group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
                  "group.consumer.heartbeat.interval.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "1000"}


def test_regex_subscription_follows_a_new_matching_topic(broker):
    """`^rx-.*` with group.protocol=consumer is resolved by the broker (SubscribedTopicRegex), and re-resolved
    when a matching topic is created: the member gets the new topic's partitions without resubscribing."""
    create_topic(broker.bootstrap, "rx-a", 2)
    create_topic(broker.bootstrap, "other", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("rx-a", b"a%d" % i, partition=i % 2)
        producer.produce("other", b"o%d" % i)
    assert producer.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rx", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["^rx-.*"])
    seen: list[tuple[str, int, int]] = []

    def drain(n: int, what: str) -> None:
        end = time.monotonic() + 60
        while len(seen) < n:
            assert time.monotonic() < end, f"timed out waiting for {what}: {seen}"
            msg = c.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                seen.append((msg.topic(), msg.partition(), msg.offset()))

    try:
        drain(10, "rx-a's records")
        create_topic(broker.bootstrap, "rx-b", 2)
        for i in range(6):
            producer.produce("rx-b", b"b%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        drain(16, "rx-b's records")
        assert {t for t, _, _ in seen} == {"rx-a", "rx-b"}  # never `other`
        assert sorted((tp.topic, tp.partition) for tp in c.assignment()) == \
            [("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-b", 1)]
        admin = admin_client(broker.bootstrap)  # kept alive until the result is in
        [member] = admin.describe_consumer_groups(["rx"])["rx"].result(timeout=30).members
        assert sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions) == \
            [("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-b", 1)]
    finally:
        c.close()


class OwnershipSampler(threading.Thread):
    """Samples every member's owned partitions (as their rebalance callbacks report them) and remembers any
    partition seen owned by two members at the same time.

    Each sample is one atomic snapshot: every member's lock is held while the sets are read. Reading them one
    after another could see a partition in the old owner's set (read first) and in the new owner's set (read
    after a stall of this thread, during which the old owner revoked it and the new one was given it)."""

    def __init__(self, members: list[Member]) -> None:
        super().__init__(daemon=True)
        self.members = members
        self.overlaps: list[tuple[int, list[str]]] = []
        self.emptied: set[str] = set()  # members seen with nothing after having owned partitions
        self._owned_some: set[str] = set()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            owners: dict[int, list[str]] = {}
            members = list(self.members)
            for m in members:  # a member's callbacks take only its own lock: no lock order to get wrong
                m._lock.acquire()
            try:
                snapshot = [(m, set(m.assigned)) for m in members]
            finally:
                for m in reversed(members):
                    m._lock.release()
            for m, owned in snapshot:
                if owned:
                    self._owned_some.add(m.name)
                elif m.name in self._owned_some and m.is_alive() and not m._halt.is_set():
                    self.emptied.add(m.name)
                for p in owned:
                    owners.setdefault(p, []).append(m.name)
            self.overlaps += [(p, names) for p, names in owners.items() if len(names) > 1]
            time.sleep(0.002)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


@pytest.mark.parametrize(("protocol", "extra", "incremental"), [
    pytest.param("classic", {"partition.assignment.strategy": "range"}, False, id="classic-eager"),
    pytest.param("classic", {"partition.assignment.strategy": "cooperative-sticky"}, True, id="classic-cooperative"),
    pytest.param("consumer", {}, True, id="consumer"),
])
def test_a_partition_is_revoked_before_another_member_gets_it(broker, protocol, extra, incremental):
    topic, group = "own-topic", f"own-{protocol}"
    create_topic(broker.bootstrap, topic, 6)
    producer = BackgroundProducer(broker.bootstrap, topic, "a")
    producer.start()
    members = [Member(f"m{i}", broker.bootstrap, group, topic, protocol, extra=extra) for i in range(2)]
    sampler = OwnershipSampler(members)
    for m in members:
        m.start()
    sampler.start()
    try:
        wait_until(lambda: sorted(p for m in members for p in m.assigned) == list(range(6))
                   and all(len(m.assigned) == 3 for m in members), 60, "2 members x 3")
        joiner = Member("m2", broker.bootstrap, group, topic, protocol, extra=extra)
        members.append(joiner)
        joiner.start()
        wait_until(lambda: all(len(m.assigned) == 2 for m in members), 60, "3 members x 2")
        if incremental:
            # Cooperative and KIP-848 rebalances move only what must move: the first members kept 2 of their 3.
            assert not sampler.emptied & {"m0", "m1"}, (sampler.emptied, timeline(members))
        leaver = members[0]
        leaver.stop()
        wait_until(lambda: sorted(p for m in members[1:] for p in m.assigned) == list(range(6)), 60,
                   "the leaver's partitions moved")
    except AssertionError as err:  # a wait that timed out: say what the members were given and when
        raise AssertionError(f"{err}; {timeline(members)}") from None
    finally:
        sampler.stop()
        producer.stop()
        for m in members:
            if m.is_alive():
                m.stop()
    assert not sampler.overlaps, (sampler.overlaps[:5], timeline(members))
    # A commit that races a rebalance is refused (Kafka's answers); nothing else may go wrong.
    racing = ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "STALE_MEMBER_EPOCH")
    assert not [e for m in members for e in m.errors if not any(r in e for r in racing)], \
        ([(m.name, m.errors) for m in members], timeline(members))


def timeline(members: list[Member]) -> list[tuple[float, str, str, tuple[int, ...]]]:
    """Every member's assign/revoke callbacks in time order (what a failure of the checks above needs)."""
    start = min((t for m in members for t, _, _ in m.events), default=0.0)
    return sorted((round(t - start, 3), m.name, kind, parts) for m in members for t, kind, parts in m.events)


CRASHING_MEMBER = """
import sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, protocol = sys.argv[1:5]
conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
        "auto.offset.reset": "earliest", "enable.auto.commit": False}
if protocol == "classic":
    conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
c = Consumer(conf)
c.subscribe([topic])
announced = False
while True:
    c.poll(0.1)
    if c.assignment() and not announced:
        print("assigned", flush=True)
        announced = True
"""


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_session_timeout_removes_a_crashed_member(broker_factory, protocol):
    broker = broker_factory(SHORT_SESSIONS)
    topic, group = "crash-topic", f"crash-{protocol}"
    create_topic(broker.bootstrap, topic, 4)
    produce_batch(broker.bootstrap, topic, 40, "a")
    extra = {"session.timeout.ms": 6000} if protocol == "classic" else {}
    survivor = Member("survivor", broker.bootstrap, group, topic, protocol, extra=extra)
    survivor.start()
    crasher = subprocess.Popen([sys.executable, "-c", CRASHING_MEMBER, broker.bootstrap, group, topic, protocol],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        ready, _, _ = select.select([crasher.stdout], [], [], 60)  # never block without a deadline
        assert ready and crasher.stdout.readline().strip() == "assigned", "the second member never got partitions"
        wait_until(lambda: len(survivor.assigned) == 2, 60, "the partitions shared by two members")
        admin = admin_client(broker.bootstrap)

        def members() -> int:
            return len(admin.describe_consumer_groups([group])[group].result(timeout=30).members)

        assert members() == 2
        crasher.kill()  # no LeaveGroup, no leave heartbeat: only the session timeout can tell
        crasher.wait(10)
        wait_until(lambda: len(survivor.assigned) == 4, 60, "the crashed member's partitions reassigned")
        assert members() == 1
    finally:
        if crasher.poll() is None:
            crasher.kill()
            crasher.wait(10)
        survivor.stop()


def test_group_id_of_a_share_group_is_refused_to_consumers(broker):
    """A share group's id answers JoinGroup with INCONSISTENT_GROUP_PROTOCOL and ConsumerGroupHeartbeat with
    GROUP_ID_NOT_FOUND, as Kafka's group coordinator does; the share group is untouched."""
    from tests.helpers.share_consumers import consumer as share_consumer

    create_topic(broker.bootstrap, "typed", 2)
    share = share_consumer(broker, "typed-g", "typed")
    try:
        share.poll(1)  # joins the share group
        base = {"bootstrap.servers": broker.bootstrap, "group.id": "typed-g"}
        err = first_consumer_error({**base, "group.protocol": "classic"}, "typed")
        assert err.name() == "INCONSISTENT_GROUP_PROTOCOL"
        err = first_consumer_error({**base, "group.protocol": "consumer"}, "typed")
        assert "group id does not exist" in err.str() and "ConsumerGroupHeartbeat" in err.str()
        with RawClient(broker.port) as raw:
            listed = raw.call(16, 5, {"states_filter": [], "types_filter": []}).groups
        assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [("typed-g", "share", "Stable")]
    finally:
        share.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_static_member_restart_keeps_its_partitions_without_a_rebalance(broker, protocol):
    """A member with `group.instance.id` closes (no LeaveGroup for classic, a temporary leave for KIP-848) and a
    new process with the same instance id comes back within the session timeout: it gets the same partitions
    and the other member is not rebalanced."""
    create_topic(broker.bootstrap, "static", 4)
    group = f"static-{protocol}"

    def member(name: str, instance: str) -> Member:
        extra = {"group.instance.id": instance, **({"session.timeout.ms": 30_000} if protocol == "classic" else {})}
        return Member(name, broker.bootstrap, group, "static", protocol, extra=extra)

    first, other = member("first", "inst-0"), member("other", "inst-1")
    for m in (first, other):
        m.start()
    again = member("again", "inst-0")
    try:
        wait_until(lambda: len(first.assigned) == 2 and len(other.assigned) == 2, 60, "2 members x 2")
        held, rounds = set(first.assigned), other.assignments
        first.stop()
        admin = admin_client(broker.bootstrap)
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        # The instance keeps its place (and its partitions) while it is away.
        assert {m.group_instance_id for m in described.members} == {"inst-0", "inst-1"}
        again.start()
        wait_until(lambda: again.assigned == held, 60, "the restarted instance's partitions")
        produce_batch(broker.bootstrap, "static", 40, "a")
        wait_until(lambda: again.count() + other.count() >= 40, 60, "records after the restart")
        assert other.assignments == rounds and len(other.assigned) == 2  # never rebalanced
        assert not [e for m in (first, other, again) for e in m.errors]
    finally:
        for m in (other, again):
            if m.is_alive():
                m.stop()
