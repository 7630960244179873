"""shoal_client on a three-broker Kafka 4.4 cluster (KRaft, replication factor 3, min.insync.replicas=2, topics
whose partition leaders go round the brokers): members fetch from every leader with a share session per broker,
acknowledge to the broker that acquired, find the group coordinator wherever it is, and follow leadership as it
moves with every broker up (NOT_LEADER_OR_FOLLOWER), when a broker is stopped (SIGTERM) and when one is killed
(SIGKILL) while they consume: every record produced is delivered at least once, none is lost, and
acknowledgements that can no longer be delivered are reported with the errors Kafka's share consumer reports.
`shoal-share-groups` and `shoal-transactions` find coordinators and leaders across the brokers, also right after
a broker was killed.

One cluster for the module, with a short broker session (a killed broker is fenced, and its partitions led by
others, within ~3 s instead of 9). Each scenario leaves every broker running for the next. The figures of each
scenario (produced, delivered, redelivered, lost, failed acknowledgements) are printed (`pytest -s`)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.errors import ErrorCode
from shoal_client import ACCEPT, ShareGroupMember, acknowledgements
from tests.helpers import cluster_ops as ops
from tests.helpers.confluent_clients import share_from_earliest
from tests.helpers.console_scripts import run_script
from tests.helpers.kafka_process import KafkaCluster
from tests.helpers.share_members import MemberLoops, SteadyProducer, Tally, drain_leftovers, records_in
from tests.helpers.waiting import wait_until

PARTITIONS = 6
NOT_LEADER, NETWORK = ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NETWORK_EXCEPTION
# What a member's acknowledgements may fail with while a broker goes: the acquiring broker lost or no longer the
# leader (NETWORK_EXCEPTION, NOT_LEADER_OR_FOLLOWER, or the old leader's UNKNOWN_TOPIC_OR_PARTITION), or the share
# coordinator moving under the leader's state write (Kafka answers COORDINATOR_NOT_AVAILABLE, or
# UNKNOWN_SERVER_ERROR for the persister errors it does not map).
FAILOVER_ACK_ERRORS = {"NETWORK_EXCEPTION", "NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION",
                       "COORDINATOR_NOT_AVAILABLE", "UNKNOWN_SERVER_ERROR"}


@pytest.fixture(scope="module")
def kafka_cluster_overrides() -> dict[str, str]:
    # A killed broker is fenced after broker.session.timeout.ms (9 s by default); members get their assignment
    # from heartbeats every group.share.heartbeat.interval.ms (5 s by default).
    return {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
            "group.share.heartbeat.interval.ms": "500"}


def names(what: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:6]
    return f"{what}-{tag}", f"g-{what}-{tag}"


def setup(cluster: KafkaCluster, what: str) -> tuple[str, str, dict[int, int], int]:
    """A topic whose leaders go round the brokers, a share group reading it from the earliest offset, and the
    group's coordinator."""
    topic, group = names(what)
    leaders = ops.create_spread_topic(cluster, topic, PARTITIONS)
    share_from_earliest(cluster.bootstrap, group)
    return topic, group, leaders, ops.group_coordinator(cluster, group)


def hold(cluster: KafkaCluster, group: str, topic: str, count: int) -> tuple[ShareGroupMember, list]:
    """A member of another group that acquires `count` records and keeps them unacknowledged."""
    member = ShareGroupMember(cluster.bootstrap, group, [topic], client_id="holder").start()
    assert member.wait_for_assignment(30)
    held: list = []

    def acquired() -> bool:
        held.extend(member.fetch(max_records=count, max_bytes=1 << 20, max_wait_ms=300).acquired)
        return sum(a.count for a in held) >= count

    wait_until(acquired, 60, f"the holder to acquire {count} records")
    return member, held


class Redeliveries:
    """The holder fetching on (ACCEPTing what it gets): it learns where the leaders went, and collects the values
    delivered to it again."""

    def __init__(self, member: ShareGroupMember) -> None:
        self.member, self.values, self._pending = member, set(), {}

    def fetch(self) -> None:
        got = self.member.fetch(max_records=500, max_bytes=1 << 20, max_wait_ms=200, acknowledgements=self._pending)
        self._pending = acknowledgements(got.acquired, ACCEPT)
        self.values.update(value for a in got.acquired for _, value, _ in records_in(a))

    def until(self, condition, what: str) -> None:
        wait_until(lambda: self.fetch() or condition(), 60, what)


def finish(cluster: KafkaCluster, loops: MemberLoops, producer: SteadyProducer, group: str, topic: str,
           scenario: str) -> Tally:
    """Stop producing, wait until the members got every record produced, stop them, and check that the group has
    nothing left but records whose last acknowledgement failed (delivered before)."""
    produced = producer.stop()
    loops.wait_for(produced, 120)
    loops.stop()
    assert loops.failures() == []
    alive = ",".join(n.bootstrap for n in cluster.nodes if n.alive())
    leftovers = drain_leftovers(alive, group, [topic])
    assert set(leftovers) <= loops.delivered()  # nothing new: only repeats of failed acknowledgements
    tally = loops.tally(produced)
    print(tally.line(scenario) + f"; delivered again after the members stopped: {len(leftovers)}")
    assert tally.lost == 0 and tally.delivered == tally.produced
    return tally


def test_members_fetch_from_every_leader_and_find_the_coordinator_on_another_broker(kafka_cluster):
    topic, group, leaders, coordinator = setup(kafka_cluster, "spread")
    assert set(leaders.values()) == {1, 2, 3}
    # Bootstrapped from one broker that is not the group's coordinator.
    elsewhere = next(n for n in kafka_cluster.nodes if n.node_id != coordinator)
    producer = SteadyProducer(kafka_cluster.bootstrap, topic, "spread", partitions=PARTITIONS)
    first = producer.produce(600)
    with MemberLoops(elsewhere.bootstrap, group, [topic], 2) as loops:
        producer.start()
        loops.wait_for(first, 60)
        # each member has a share session with every leader of the partitions assigned to it, and all three
        # brokers serve one of the two members
        for loop in loops.loops:
            member = loop.member
            assert member._coordinator.port == kafka_cluster.node(coordinator).port
            served = {leaders[tp.partition] for tp in member.assignment()}
            assert served and served <= set(member._sessions), (served, set(member._sessions))
        assert set().union(*(set(loop.member._sessions) for loop in loops.loops)) == {1, 2, 3}
        # every delivery came from the partition's leader
        assert {(p, node) for _, p, _, node in loops.deliveries} <= set(leaders.items())
        tally = finish(kafka_cluster, loops, producer, group, topic, "spread")
    assert tally.redelivered == 0 and tally.ack_errors == {} and tally.max_delivery_count == 1


def test_leadership_moving_while_every_broker_is_up(kafka_cluster):
    topic, group, leaders, _ = setup(kafka_cluster, "moves")
    share_from_earliest(kafka_cluster.bootstrap, group + "-holder")
    producer = SteadyProducer(kafka_cluster.bootstrap, topic, "moves", partitions=PARTITIONS)
    first = producer.produce(600)
    holder, held = hold(kafka_cluster, group + "-holder", topic, 600)
    try:
        with MemberLoops(kafka_cluster.bootstrap, group, [topic], 2) as loops:
            producer.start()
            loops.wait_for(first, 60)
            moved = {p: leader % 3 + 1 for p, leader in leaders.items()}  # every partition to the next broker
            ops.move_leadership(kafka_cluster, topic, moved)
            finish(kafka_cluster, loops, producer, group, topic, "leadership moved, brokers up")
            assert sum(loop.member.errors_seen[NOT_LEADER] for loop in loops.loops) > 0

        # The holder's records were acquired on the old leaders. Asked explicitly (as commitSync does), the old
        # leader answers for itself: it no longer leads the partition, or no longer has it at all.
        explicit = [a for a in held if a.partition < 3]
        answers = holder.acknowledge(acknowledgements(explicit, ACCEPT))
        assert answers.keys() == {a.ack_key for a in explicit}
        assert set(answers.values()) <= {NOT_LEADER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}, answers
        # Once its fetches learned the new leaders (NOT_LEADER_OR_FOLLOWER naming them), acknowledgements riding
        # on a fetch are not sent to the old leader: NOT_LEADER_OR_FOLLOWER, as Kafka's consumer completes them.
        again = Redeliveries(holder)
        again.until(lambda: all(holder.leader(a.key) == moved[a.partition] for a in held),
                    "the holder to learn the new leaders")
        rest = [a for a in held if a.partition >= 3]
        result = holder.fetch(max_records=0, max_bytes=1, max_wait_ms=0,
                              acknowledgements=acknowledgements(rest, ACCEPT))
        assert result.ack_errors == dict.fromkeys({a.ack_key for a in rest}, NOT_LEADER)
        # The new leaders deliver them again: nothing the holder held is lost.
        want = {value for a in held for _, value, _ in records_in(a)}
        again.until(lambda: want <= again.values, "the new leaders to deliver the held records again")
        print(f"holder: {len(want)} records held across the move; explicit acknowledgements answered "
              f"{sorted({ErrorCode(c).name for c in answers.values()})}, piggybacked NOT_LEADER_OR_FOLLOWER; "
              f"all {len(want)} delivered again by the new leaders")
    finally:
        holder.close()


def test_a_broker_stopped_with_sigterm_while_members_consume(kafka_cluster):
    topic, group, _, coordinator = setup(kafka_cluster, "sigterm")
    victim = kafka_cluster.node(coordinator)  # the group's coordinator leads partitions too
    producer = SteadyProducer(kafka_cluster.bootstrap, topic, "sigterm", partitions=PARTITIONS)
    first = producer.produce(600)
    try:
        with MemberLoops(kafka_cluster.bootstrap, group, [topic], 2) as loops:
            producer.start()
            loops.wait_for(first, 60)
            victim.stop()  # a controlled shutdown: leadership moves before the process exits
            ops.wait_for_failover(kafka_cluster, topic, victim.node_id)
            tally = finish(kafka_cluster, loops, producer, group, topic, "SIGTERM of the coordinator's broker")
        assert set(tally.ack_errors) <= FAILOVER_ACK_ERRORS
        # the members found the group's new coordinator and kept their membership
        assert ops.group_coordinator(kafka_cluster, group) != victim.node_id
    finally:
        if not victim.alive():
            victim.start()
        ops.wait_for_full_isr(kafka_cluster, [topic])


def test_a_broker_killed_with_sigkill_while_members_consume(kafka_cluster):
    topic, group, _, coordinator = setup(kafka_cluster, "sigkill")
    victim = kafka_cluster.node(coordinator)
    share_from_earliest(kafka_cluster.bootstrap, group + "-holder")
    producer = SteadyProducer(kafka_cluster.bootstrap, topic, "sigkill", partitions=PARTITIONS)
    first = producer.produce(600)
    holder, held = hold(kafka_cluster, group + "-holder", topic, 600)
    on_victim = [a for a in held if a.node == victim.node_id]
    assert len(on_victim) >= 2, "the holder got records from the victim's partitions"
    try:
        with MemberLoops(kafka_cluster.bootstrap, group, [topic], 2) as loops:
            producer.start()
            loops.wait_for(first, 60)
            victim.kill9()
            # Right away the victim still leads its partitions (it is not fenced yet) and its session is gone
            # with its connection: NETWORK_EXCEPTION.
            first_half, second_half = on_victim[: len(on_victim) // 2], on_victim[len(on_victim) // 2:]
            answers = holder.acknowledge(acknowledgements(first_half, ACCEPT))
            assert answers == dict.fromkeys({a.ack_key for a in first_half}, NETWORK)
            # Once the controller fenced it and others lead: NOT_LEADER_OR_FOLLOWER, not sent.
            ops.wait_for_failover(kafka_cluster, topic, victim.node_id)
            again = Redeliveries(holder)
            again.until(lambda: all(holder.leader(a.key) not in (None, victim.node_id) for a in second_half),
                        "the holder to learn the new leaders")
            answers = holder.acknowledge(acknowledgements(second_half, ACCEPT))
            assert answers == dict.fromkeys({a.ack_key for a in second_half}, NOT_LEADER)
            want = {value for a in on_victim for _, value, _ in records_in(a)}
            again.until(lambda: want <= again.values, "the new leaders to deliver the held records again")
            print(f"holder: {len(want)} records held on the killed broker; acknowledged at once: NETWORK_EXCEPTION, "
                  f"after the failover: NOT_LEADER_OR_FOLLOWER; all {len(want)} delivered again by the new leaders")
            # The shoal-share-groups tool, right after the kill, bootstrapped from the dead broker first: it finds
            # the group's coordinator (moving, if the victim was it) and the partitions' offsets.
            dead_first = ",".join([victim.bootstrap] + [n.bootstrap for n in kafka_cluster.nodes if n is not victim])
            r = run_script("shoal-share-groups", "--bootstrap-server", dead_first, "--describe", "--group", group,
                           "--state")
            assert r.returncode == 0, r.stderr
            now = ops.group_coordinator(kafka_cluster, group)
            assert f"127.0.0.1:{kafka_cluster.node(now).port}" in r.stdout, r.stdout
            tally = finish(kafka_cluster, loops, producer, group, topic, "SIGKILL of the coordinator's broker")
        assert set(tally.ack_errors) <= FAILOVER_ACK_ERRORS
    finally:
        holder.close()
        if not victim.alive():
            victim.start()
        ops.wait_for_full_isr(kafka_cluster, [topic])


def open_transaction(bootstrap: str, tid: str, topic: str) -> Producer:
    """A transactional producer with a transaction left open over every partition of `topic`."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 600000})
    producer.init_transactions(60)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, value=f"open-{p}".encode(), partition=p)
    producer.flush(60)
    return producer


def test_the_tools_find_coordinators_and_leaders_across_the_brokers(kafka_cluster):
    topic, group, _, coordinator = setup(kafka_cluster, "tools")
    elsewhere = next(n for n in kafka_cluster.nodes if n.node_id != coordinator)
    producer = SteadyProducer(kafka_cluster.bootstrap, topic, "tools", partitions=PARTITIONS)
    produced = producer.produce(300)
    with MemberLoops(kafka_cluster.bootstrap, group, [topic], 1) as loops:
        loops.wait_for(produced, 60)
    ends = end_offsets(kafka_cluster, topic)

    def share_groups(*args: str):
        r = run_script("shoal-share-groups", "--bootstrap-server", elsewhere.bootstrap, *args)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.stdout

    # ListGroups goes to every broker: the group lives on its coordinator, not on the bootstrap broker
    assert group in share_groups("--list").split()
    assert f"127.0.0.1:{kafka_cluster.node(coordinator).port}" in share_groups("--describe", "--group", group,
                                                                                "--state")
    # DescribeShareGroupOffsets on the coordinator (Kafka's share coordinator persists the start offsets lazily,
    # but the lag it reports counts what was acknowledged): everything was, on every partition
    last: list[str] = []

    def no_lag() -> bool:
        last[:] = [share_groups("--describe", "--group", group)]
        return {p: lag for p, (_, lag) in offsets_of(last[0], topic).items()} == dict.fromkeys(range(PARTITIONS), 0)

    try:
        wait_until(no_lag, 30, "a lag of 0 on every partition")
    except AssertionError as err:
        from shoal_client.admin import ShareGroupAdmin
        with ShareGroupAdmin(elsewhere.bootstrap) as admin:
            rows = admin.share_group_offsets(group)
        raise AssertionError(f"{err}; the members' failed acknowledgements: {dict(loops.ack_errors)}; the last "
                             f"description:\n{last[0]}\n{rows}") from None
    # reset to earliest: ListOffsets on each partition's leader, AlterShareGroupOffsets on the coordinator
    share_groups("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert offsets_of(share_groups("--describe", "--group", group), topic) == {p: (0, end) for p, end in ends.items()}
    share_groups("--delete", "--group", group)
    assert group not in share_groups("--list").split()

    # shoal-transactions: an open transaction over partitions led by all three brokers
    tid = f"tx-{uuid.uuid4().hex[:6]}"
    txn = open_transaction(kafka_cluster.bootstrap, tid, topic)
    try:
        def transactions(*args: str):
            r = run_script("shoal-transactions", "--bootstrap-server", elsewhere.bootstrap, *args)
            assert r.returncode == 0, (args, r.stdout, r.stderr)
            return [line.split() for line in r.stdout.splitlines() if line.strip()]

        tx_coordinator = ops.transaction_coordinator(kafka_cluster, tid)
        # ListTransactions on every broker: the id is listed by its coordinator's broker id
        assert [tid, str(tx_coordinator)] in [row[:2] for row in transactions("list")]
        # DescribeTransactions on the id's coordinator
        [_, row] = transactions("describe", "--transactional-id", tid)
        assert row[:2] == [str(tx_coordinator), tid] and "Ongoing" in row
        # DescribeProducers on each partition's leader: the open transaction's producer on every partition
        # (the idempotent producer of the records is there too, without a transaction)
        pids = set()
        for p in range(PARTITIONS):
            [head, *producers] = transactions("describe-producers", "--topic", topic, "--partition", str(p))
            start = head.index("CurrentTransactionStartOffset")
            [pid] = [row[0] for row in producers if row[start].isdigit()]
            pids.add(pid)
        assert len(pids) == 1
        # find-hanging asks every partition's leader (the coordinator still means to end it: nothing hangs)
        assert len(transactions("find-hanging", "--topic", topic, "--max-transaction-timeout", "0")) == 1
    finally:
        txn.abort_transaction(60)


def end_offsets(cluster: KafkaCluster, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ends"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def offsets_of(describe_out: str, topic: str) -> dict[int, tuple[int | None, int | None]]:
    """partition -> (start offset, lag) from a `shoal-share-groups --describe` table (columns found by their
    headers)."""
    rows = [line.split() for line in describe_out.splitlines() if line.strip()]
    head = next(r for r in rows if "PARTITION" in r and "START-OFFSET" in r)
    part, start, lag = head.index("PARTITION"), head.index("START-OFFSET"), head.index("LAG")
    def number(cell: str) -> int | None:  # "-": not known
        return int(cell) if cell.lstrip("-").isdigit() else None

    return {int(r[part]): (number(r[start]), number(r[lag])) for r in rows if topic in r and r is not head}


