"""Consumer groups with real clients over TCP: confluent-kafka (classic and consumer protocols), kafka-python,
aiokafka and kcat; members joining and leaving mid-stream, commits, and a kill -9 of the broker in between."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.helpers.broker_process import free_port, restart
from tests.helpers.confluent_clients import (
    BackgroundProducer,
    admin_client,
    committed_offsets,
    create_topic,
    produce_batch,
)
from tests.helpers.group_members import PARTITIONS, Member, check_delivery, consumed_all, covered
from tests.helpers.kafka_python_groups import subscribed_consumer
from tests.helpers.kcat import kcat
from tests.helpers.waiting import async_wait_until, wait_until

pytestmark = pytest.mark.integration


def assignor_of(broker, group: str) -> str:
    admin = admin_client(broker.bootstrap)
    return admin.describe_consumer_groups([group])[group].result(timeout=30).partition_assignor


def run_membership_scenario(broker, protocol: str, group: str, topic: str, *, extra: dict | None = None,
                            how: str = "kill9") -> tuple[int, int]:
    """3 members on 6 partitions, a 4th joins and one leaves while records flow, everyone commits and leaves,
    the broker is stopped (SIGTERM or kill -9) and restarted, new members resume from the committed offsets."""
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = BackgroundProducer(broker.bootstrap, topic, "a")
    producer.start()
    members = [Member(f"m{i}", broker.bootstrap, group, topic, protocol, extra=extra) for i in range(3)]
    everyone = list(members)
    for m in members:
        m.start()
    wait_until(lambda: covered(members) and all(len(m.assigned) == 2 for m in members), 60, "3 members x 2")
    assert assignor_of(broker, group) == (extra or {}).get("partition.assignment.strategy",
                                                           (extra or {}).get("group.remote.assignor"))
    wait_until(lambda: sum(m.count() for m in members) >= 300, 60, "records flowing")
    joiner = Member("m3", broker.bootstrap, group, topic, protocol, extra=extra)
    everyone.append(joiner)
    joiner.start()
    members.append(joiner)
    wait_until(lambda: covered(members) and all(m.assigned for m in members), 60, "the 4th member assigned")
    leaver = members.pop(0)
    leaver.stop()
    wait_until(lambda: covered(members), 60, "the leaver's partitions reassigned")
    produced = producer.stop()
    wait_until(lambda: consumed_all(members + [leaver], produced), 60, "every record consumed")
    for m in members:
        m.stop()
    # The group is empty and its offsets are committed; neither a clean stop nor a hard kill may lose them.
    restart(broker, how)
    more = produce_batch(broker.bootstrap, topic, 600, "b")
    produced |= more
    resumed = [Member(f"r{i}", broker.bootstrap, group, topic, protocol, extra=extra) for i in range(2)]
    everyone += resumed
    for m in resumed:
        m.start()
    wait_until(lambda: consumed_all(resumed, more), 60, "records produced after the restart")
    for m in resumed:
        m.stop()
    errors = [e for m in everyone for e in m.errors]
    records, duplicates = check_delivery(produced, everyone)
    # Members after the restart start exactly at the committed offsets: nothing from before is read again.
    before = produced - more
    assert not {rec for m in resumed for rec in m.consumed} & before, errors[:5]
    return records, duplicates


# Client-side assignors of the classic protocol (eager and cooperative) and the broker's assignors of the
# consumer protocol, each with a clean stop or a hard kill of the broker between the two runs.
SCENARIOS = [
    pytest.param("classic", {"partition.assignment.strategy": "range"}, "kill9", id="classic-range-kill9"),
    pytest.param("classic", {"partition.assignment.strategy": "roundrobin"}, "sigterm",
                 id="classic-roundrobin-sigterm"),
    pytest.param("classic", {"partition.assignment.strategy": "cooperative-sticky"}, "kill9",
                 id="classic-cooperative-kill9"),
    pytest.param("classic", {"partition.assignment.strategy": "cooperative-sticky"}, "sigterm",
                 id="classic-cooperative-sigterm"),
    pytest.param("consumer", {"group.remote.assignor": "uniform"}, "sigterm", id="consumer-uniform-sigterm"),
    pytest.param("consumer", {"group.remote.assignor": "range"}, "kill9", id="consumer-range-kill9"),
]


@pytest.mark.parametrize(("protocol", "extra", "how"), SCENARIOS)
def test_group_members_join_leave_commit_and_survive_restart(broker, protocol, extra, how):
    records, _ = run_membership_scenario(broker, protocol, "cg", "cg-topic", extra=extra, how=how)
    assert records > 900


@pytest.mark.parametrize("how", ["kill9", "sigterm"])
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_live_members_ride_through_a_broker_restart(broker_factory, protocol, how):
    """The broker goes down under 3 consuming members that commit as they go; they reconnect to the restarted
    broker and carry on: nothing is lost, and records are read twice only if their commit had not been
    accepted before the restart."""
    # A fixed port: the members reconnect to the address they know.
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    topic, group = "live-topic", f"live-{protocol}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = produce_batch(broker.bootstrap, topic, 1200, "a")
    # A long session timeout: the members' sessions must outlive the restart (Kafka's coordinator also
    # restarts every member's session timer when it loads the group).
    extra = {"session.timeout.ms": 45_000} if protocol == "classic" else {}
    members = [Member(f"m{i}", broker.bootstrap, group, topic, protocol, commit_every=10, extra=extra)
               for i in range(3)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: covered(members), 60, "3 members assigned")
        wait_until(lambda: sum(m.count() for m in members) >= 200, 60, "records flowing")
        restart(broker, how)
        second = produce_batch(broker.bootstrap, topic, 600, "b")
        wait_until(lambda: consumed_all(members, first | second), 90, "every record consumed after the restart")
    finally:
        for m in members:
            m.stop()
    records, _ = check_delivery(first | second, members)
    assert records == 1800
    # The members committed everything they read before leaving.
    ends = {p: 1 + max(o for q, o in first | second if q == p) for p in range(PARTITIONS)}
    assert committed_offsets(broker, group, topic) == ends


def test_kafka_python_group_consumer_commits_and_resumes(broker):
    create_topic(broker.bootstrap, "kp-group", 3)
    first = produce_batch(broker.bootstrap, "kp-group", 300, "a")

    def consume(expect: set[tuple[int, int]]) -> set[tuple[int, int]]:
        consumer = subscribed_consumer("kp-group", 3, bootstrap_servers=broker.bootstrap, group_id="kp",
                                       auto_offset_reset="earliest", enable_auto_commit=False,
                                       consumer_timeout_ms=20_000)
        seen: set[tuple[int, int]] = set()
        for msg in consumer:
            seen.add((msg.partition, msg.offset))
            if seen >= expect:
                break
        consumer.commit()
        consumer.close()
        return seen

    assert consume(first) == first
    second = produce_batch(broker.bootstrap, "kp-group", 200, "b")
    assert consume(second) == second  # resumed from the committed offsets


@pytest.mark.parametrize("assignor", ["range", "sticky"])
def test_kafka_python_members_rebalance_on_join_and_leave(broker, assignor):
    """Three kafka-python group consumers (its own client-side assignors, eager rebalances): a member joins and
    one leaves while records arrive; everything is consumed and nothing committed is read again."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    strategy = {"range": RangePartitionAssignor, "sticky": StickyPartitionAssignor}[assignor]
    create_topic(broker.bootstrap, "kp-many", 4)
    seen: dict[tuple[int, int], list[str]] = {}
    owned: dict[str, set[int]] = {}
    uncommitted: set[tuple[int, int]] = set()
    lock = threading.Lock()

    def run(name: str, halt: threading.Event) -> None:
        # subscribed with the topic's metadata known: see tests/helpers/kafka_python_groups.py
        consumer = subscribed_consumer("kp-many", 4, bootstrap_servers=broker.bootstrap, group_id=f"kp-{assignor}",
                                       auto_offset_reset="earliest", enable_auto_commit=False,
                                       session_timeout_ms=10_000, heartbeat_interval_ms=500,
                                       partition_assignment_strategy=[strategy])
        try:
            while not halt.is_set():
                batch = consumer.poll(200)
                read = [(m.partition, m.offset) for msgs in batch.values() for m in msgs]
                with lock:
                    for rec in read:
                        seen.setdefault(rec, []).append(name)
                    owned[name] = {tp.partition for tp in consumer.assignment()}
                if read:
                    try:
                        consumer.commit()
                    # refused by a rebalance (kafka-python 3 raises the second while one is in progress): these
                    # may be read again
                    except (CommitFailedError, RebalanceInProgressError):
                        uncommitted.update(read)
        finally:
            consumer.close()
            with lock:
                owned.pop(name, None)

    halts = {name: threading.Event() for name in ("k0", "k1", "k2")}
    threads = {name: threading.Thread(target=run, args=(name, halt), daemon=True) for name, halt in halts.items()}

    def all_owned(names: set[str]) -> bool:
        with lock:
            return set(owned) == names and sorted(p for n in names for p in owned[n]) == [0, 1, 2, 3] \
                and all(owned[n] for n in names)

    produced = produce_batch(broker.bootstrap, "kp-many", 200, "a")
    try:
        threads["k0"].start()
        threads["k1"].start()
        wait_until(lambda: all_owned({"k0", "k1"}), 60, "two members")
        threads["k2"].start()
        wait_until(lambda: all_owned({"k0", "k1", "k2"}), 60, "the third member")
        produced |= produce_batch(broker.bootstrap, "kp-many", 200, "b")
        halts["k0"].set()
        threads["k0"].join(30)
        wait_until(lambda: all_owned({"k1", "k2"}), 60, "the leaver's partitions moved")
        produced |= produce_batch(broker.bootstrap, "kp-many", 200, "c")
        wait_until(lambda: set(seen) >= produced, 60, "every record")
    finally:
        for name, halt in halts.items():
            halt.set()
            if threads[name].is_alive() or threads[name].ident is not None:
                threads[name].join(30)
    assert set(seen) == produced
    # Batches are committed before the next poll and revocations happen inside poll: only a batch whose commit
    # a rebalance refused may be read twice.
    again = [rec for rec, readers in seen.items() if len(readers) > 1 and rec not in uncommitted]
    assert not again, again[:5]
    assert {n for readers in seen.values() for n in readers} >= {"k1", "k2"}


def test_aiokafka_group_consumer_commits_and_resumes(broker):
    from aiokafka import AIOKafkaConsumer

    create_topic(broker.bootstrap, "aio-group", 3)
    first = produce_batch(broker.bootstrap, "aio-group", 300, "a")

    async def consume(expect: set[tuple[int, int]]) -> set[tuple[int, int]]:
        consumer = AIOKafkaConsumer("aio-group", bootstrap_servers=broker.bootstrap, group_id="aio",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        seen: set[tuple[int, int]] = set()
        try:
            async with asyncio.timeout(30):
                while not seen >= expect:
                    batch = await consumer.getmany(timeout_ms=500)
                    for msgs in batch.values():
                        seen |= {(m.partition, m.offset) for m in msgs}
            await consumer.commit()
        finally:
            await consumer.stop()
        return seen

    assert asyncio.run(consume(first)) == first
    second = produce_batch(broker.bootstrap, "aio-group", 200, "b")
    assert asyncio.run(consume(second)) == second


def test_aiokafka_members_rebalance_on_join_and_leave(broker):
    """Three aiokafka group consumers (round-robin, client-side): a member joins and one leaves while records
    arrive; every record consumed, none read twice unless a rebalance refused its commit."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import CommitFailedError, RebalanceInProgressError

    create_topic(broker.bootstrap, "aio-many", 4)
    seen: dict[tuple[int, int], list[str]] = {}
    owned: dict[str, set[int]] = {}
    uncommitted: set[tuple[int, int]] = set()

    async def member(name: str, halt: asyncio.Event) -> None:
        consumer = AIOKafkaConsumer("aio-many", bootstrap_servers=broker.bootstrap, group_id="aio-many",
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=10_000, heartbeat_interval_ms=500,
                                    partition_assignment_strategy=(RoundRobinPartitionAssignor,))
        await consumer.start()
        try:
            while not halt.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                read = [(m.partition, m.offset) for msgs in batch.values() for m in msgs]
                for rec in read:
                    seen.setdefault(rec, []).append(name)
                owned[name] = {tp.partition for tp in consumer.assignment()}
                if read:
                    try:
                        await consumer.commit()
                    except (CommitFailedError, RebalanceInProgressError):
                        uncommitted.update(read)
        finally:
            await consumer.stop()
            owned.pop(name, None)

    def all_owned(names: set[str]) -> bool:
        return set(owned) == names and sorted(p for n in names for p in owned[n]) == [0, 1, 2, 3] \
            and all(owned[n] for n in names)

    def until(condition, what: str):
        return async_wait_until(condition, 60, what, interval=0.05)

    async def scenario() -> set[tuple[int, int]]:
        produced = await asyncio.to_thread(produce_batch, broker.bootstrap, "aio-many", 200, "a")
        halts = {name: asyncio.Event() for name in ("a0", "a1", "a2")}
        tasks = {name: asyncio.create_task(member(name, halts[name])) for name in ("a0", "a1")}
        try:
            await until(lambda: all_owned({"a0", "a1"}), "two members")
            tasks["a2"] = asyncio.create_task(member("a2", halts["a2"]))
            await until(lambda: all_owned({"a0", "a1", "a2"}), "the third member")
            produced |= await asyncio.to_thread(produce_batch, broker.bootstrap, "aio-many", 200, "b")
            halts["a0"].set()
            await tasks["a0"]
            await until(lambda: all_owned({"a1", "a2"}), "the leaver's partitions moved")
            produced |= await asyncio.to_thread(produce_batch, broker.bootstrap, "aio-many", 200, "c")
            await until(lambda: set(seen) >= produced, "every record")
        finally:
            for halt in halts.values():
                halt.set()
            await asyncio.gather(*tasks.values())
        return produced

    produced = asyncio.run(scenario())
    assert set(seen) == produced
    again = [rec for rec, readers in seen.items() if len(readers) > 1 and rec not in uncommitted]
    assert not again, again[:5]
    assert {n for readers in seen.values() for n in readers} >= {"a1", "a2"}


def test_kcat_group_consumer(broker):
    create_topic(broker.bootstrap, "kcat-group", 3)
    produced = produce_batch(broker.bootstrap, "kcat-group", 150, "a")
    args = ("-b", broker.bootstrap, "-X", "auto.offset.reset=earliest", "-G", "kcat-g", "kcat-group", "-e",
            "-f", "%p:%o\n")
    out = kcat(*args)
    assert out.returncode == 0, out.stderr.decode()
    got = {tuple(map(int, line.split(":"))) for line in out.stdout.decode().split()}
    assert got == produced
    assert b"rebalanced" in out.stderr
    # kcat commits what it consumed when it leaves: the same group reads only what came after.
    more = produce_batch(broker.bootstrap, "kcat-group", 30, "b")
    out = kcat(*args)
    assert out.returncode == 0, out.stderr.decode()
    assert {tuple(map(int, line.split(":"))) for line in out.stdout.decode().split()} == more


def test_committed_offsets_survive_kill9(broker):
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker.bootstrap, "durable-offsets", 2)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "durable", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("durable-offsets", 0, 7), TopicPartition("durable-offsets", 1, 9)],
             asynchronous=False)
    c.close()
    broker.kill9()
    broker.start()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "durable", "enable.auto.commit": False})
    got = c.committed([TopicPartition("durable-offsets", 0), TopicPartition("durable-offsets", 1)], timeout=30)
    c.close()
    assert [tp.offset for tp in got] == [7, 9]
