"""Online migration between the classic and the consumer (KIP-848) group protocols with real clients over TCP:
confluent-kafka consumers with `group.protocol=classic` and `group.protocol=consumer` in one group while
records flow. A rolling upgrade (classic members replaced one by one by consumer-protocol members) converts
the group to a consumer group; a rolling downgrade converts it back when the last consumer-protocol member
leaves; `group.consumer.migration.policy=disabled` refuses the upgrade with Kafka's error; a converted group
with members of both protocols survives a kill -9 of the broker."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupType

from tests.helpers.broker_process import free_port, restart
from tests.helpers.confluent_clients import (
    BackgroundProducer,
    admin_client,
    committed_offsets,
    create_topic,
    first_consumer_error,
    produce_batch,
)
from tests.helpers.group_members import PARTITIONS, Member, check_delivery, consumed_all, covered
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

CLASSIC, CONSUMER = ConsumerGroupType.CLASSIC, ConsumerGroupType.CONSUMER


@pytest.fixture
def threads():
    """Members and producers a test starts; whatever a failed test left running is stopped at the end."""
    started: list = []
    yield started
    for t in started:
        t._halt.set()
    for t in started:
        t.join(30)


def start(threads: list, thread):
    threads.append(thread)
    thread.start()
    return thread


def group_type(broker, group: str) -> ConsumerGroupType:
    admin = admin_client(broker.bootstrap)
    return admin.describe_consumer_groups([group])[group].result(timeout=30).type


def member_types(broker, group: str) -> dict[str, int]:
    """client id -> member type from ConsumerGroupDescribe (0 classic, 1 consumer)."""
    with RawClient(broker.port) as raw:
        [g] = raw.call(69, 1, {"group_ids": [group], "include_authorized_operations": False}).groups
    assert g.error_code == 0, g.error_message
    return {m.client_id: m.member_type for m in g.members}


def classic_state(broker, group: str) -> tuple[int, str, str]:
    """(error code, state, protocol type) of DescribeGroups v5."""
    with RawClient(broker.port) as raw:
        [g] = raw.call(15, 5, {"groups": [group], "include_authorized_operations": False}).groups
    return g.error_code, g.group_state, g.protocol_type


def ends(produced: set[tuple[int, int]]) -> dict[int, int]:
    return {p: 1 + max(o for q, o in produced if q == p) for p in range(PARTITIONS)}


def replace_one_by_one(threads: list, group: str, old: list[Member], make_new, on_first=None) -> list[Member]:
    """Start a new member, wait until it has partitions and every partition has one owner, stop an old one;
    repeat until no old member is left. Returns the new members (running)."""
    live = list(old)
    new: list[Member] = []
    for i in range(len(old)):
        m = make_new(i)
        start(threads, m)
        new.append(m)
        live.append(m)
        wait_until(lambda m=m: m.assigned and covered(live), 90, f"{m.name} assigned")
        if i == 0 and on_first is not None:
            on_first()
        leaving = live.pop(0)
        leaving.stop()
        wait_until(lambda: covered(live), 90, f"{leaving.name}'s partitions taken over")
    return new


def drain_and_check(broker, group: str, topic: str, producer, live: list[Member], everyone: list[Member]) -> None:
    """Stop producing, wait until every record was consumed, stop the live members (they commit as they close),
    then check: nothing lost, duplicates only inside uncommitted windows, everything read committed."""
    produced = producer.stop()
    try:
        wait_until(lambda: consumed_all(everyone, produced), 90, "every record consumed")
    except AssertionError:
        seen = {rec for m in everyone for rec in list(m.consumed)}
        missing = sorted(produced - seen)
        raise AssertionError(f"{len(missing)} missing e.g. {missing[:3]}; " + "; ".join(
            f"{m.name} assigned={sorted(m.assigned)} n={m.count()} err={m.errors[-2:]}" for m in live)) from None
    finally:
        for m in live:
            m.stop()
    records, _ = check_delivery(produced, everyone)
    assert records == len(produced) > 600
    assert committed_offsets(broker, group, topic) == ends(produced)


# Eager client assignors: librdkafka's cooperative-sticky puts its state in the assignment's user data, which
# Kafka 4.1 refuses to upgrade (see the next test).
@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_rolling_upgrade_from_classic_to_consumer_protocol(broker, strategy, threads):
    topic, group = "up-topic", f"up-{strategy}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = BackgroundProducer(broker.bootstrap, topic, "u")
    start(threads, producer)
    classic = [Member(f"k{i}", broker.bootstrap, group, topic, "classic",
                      extra={"partition.assignment.strategy": strategy}) for i in range(3)]
    for m in classic:
        start(threads, m)
    wait_until(lambda: covered(classic) and all(len(m.assigned) == 2 for m in classic), 60, "3 classic x 2")
    wait_until(lambda: sum(m.count() for m in classic) >= 300, 60, "records flowing")
    assert group_type(broker, group) == CLASSIC

    def mixed() -> None:
        # The first consumer-protocol member converted the group; the classic members are still in it.
        assert group_type(broker, group) == CONSUMER
        assert member_types(broker, group) == {"k0": 0, "k1": 0, "k2": 0, "c0": 1}

    new = replace_one_by_one(threads, group, classic,
                             lambda i: Member(f"c{i}", broker.bootstrap, group, topic, "consumer"), mixed)
    assert member_types(broker, group) == {"c0": 1, "c1": 1, "c2": 1}
    # Commits made under both protocols are the group's: everything read was committed.
    drain_and_check(broker, group, topic, producer, new, classic + new)
    assert group_type(broker, group) == CONSUMER


def test_upgrade_of_a_group_whose_assignor_keeps_user_data_is_refused(broker, threads):
    """librdkafka's cooperative-sticky assignor echoes its state as the assignment's user data: Kafka 4.1 cannot
    take over such an assignor's work and refuses the upgrade (GROUP_ID_NOT_FOUND, "unsupported custom
    assignor"); the classic group goes on unharmed."""
    create_topic(broker.bootstrap, "coop", PARTITIONS)
    produced = produce_batch(broker.bootstrap, "coop", 300, "c")
    classic: list[Member] = []
    for i in range(2):
        # One after the other: from its second generation on, a member's assignment carries the assignor's state.
        classic.append(start(threads, Member(f"k{i}", broker.bootstrap, "coop-g", "coop", "classic",
                                             extra={"partition.assignment.strategy": "cooperative-sticky"})))
        wait_until(lambda: covered(classic) and all(len(m.assigned) == 6 // len(classic) for m in classic), 60,
                   f"{len(classic)} classic members assigned")
    base = {"bootstrap.servers": broker.bootstrap, "group.id": "coop-g", "group.protocol": "consumer"}
    err = first_consumer_error(base, "coop")
    assert "group id does not exist" in err.str() or "unsupported custom assignor" in err.str(), err.str()
    assert group_type(broker, "coop-g") == CLASSIC
    wait_until(lambda: consumed_all(classic, produced), 60, "every record consumed by the classic members")
    for m in classic:
        m.stop()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_rolling_downgrade_from_consumer_to_classic_protocol(broker, strategy, threads):
    topic, group = "down-topic", f"down-{strategy}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = BackgroundProducer(broker.bootstrap, topic, "d")
    start(threads, producer)
    consumers = [Member(f"c{i}", broker.bootstrap, group, topic, "consumer") for i in range(3)]
    for m in consumers:
        start(threads, m)
    wait_until(lambda: covered(consumers) and all(len(m.assigned) == 2 for m in consumers), 60, "3 consumers x 2")
    wait_until(lambda: sum(m.count() for m in consumers) >= 300, 60, "records flowing")

    def mixed() -> None:
        # A classic member joined the consumer group as a classic-protocol member.
        assert group_type(broker, group) == CONSUMER
        assert member_types(broker, group) == {"c0": 1, "c1": 1, "c2": 1, "k0": 0}

    new = replace_one_by_one(threads, group, consumers,
                             lambda i: Member(f"k{i}", broker.bootstrap, group, topic, "classic",
                                              extra={"partition.assignment.strategy": strategy}), mixed)
    # The last consumer-protocol member left: the group is a classic group again, rebalanced by its members.
    wait_until(lambda: classic_state(broker, group) == (0, "Stable", "consumer"), 60, "a stable classic group")
    assert group_type(broker, group) == CLASSIC
    drain_and_check(broker, group, topic, producer, new, consumers + new)


def test_migration_policy_disabled_refuses_the_upgrade(broker_factory, threads):
    """Kafka's `disabled` policy: a consumer-protocol member cannot join a classic group with members
    (GROUP_ID_NOT_FOUND); a consumer group still admits classic members but stays a consumer group when its last
    consumer-protocol member leaves."""
    broker = broker_factory({"group.consumer.migration.policy": "disabled"})
    create_topic(broker.bootstrap, "pol", PARTITIONS)
    produced = produce_batch(broker.bootstrap, "pol", 300, "p")
    old = Member("k0", broker.bootstrap, "pol-classic", "pol", "classic")
    start(threads, old)
    try:
        wait_until(lambda: covered([old]), 60, "the classic member assigned")
        base = {"bootstrap.servers": broker.bootstrap, "group.id": "pol-classic", "group.protocol": "consumer"}
        err = first_consumer_error(base, "pol")
        assert "group id does not exist" in err.str() and "ConsumerGroupHeartbeat" in err.str()
        assert group_type(broker, "pol-classic") == CLASSIC and covered([old])
    finally:
        old.stop()
    c = Member("c0", broker.bootstrap, "pol-consumer", "pol", "consumer")
    start(threads, c)
    k = Member("k1", broker.bootstrap, "pol-consumer", "pol", "classic")
    try:
        wait_until(lambda: covered([c]), 60, "the consumer member assigned")
        start(threads, k)
        wait_until(lambda: k.assigned and covered([c, k]), 90, "the classic member assigned in the consumer group")
        c.stop()
        wait_until(lambda: covered([k]), 90, "the classic member took everything")
        assert group_type(broker, "pol-consumer") == CONSUMER
        assert member_types(broker, "pol-consumer") == {"k1": 0}
        wait_until(lambda: consumed_all([c, k], produced), 60, "every record consumed")
    finally:
        k.stop()
    check_delivery(produced, [c, k])


def test_a_converted_group_survives_a_broker_kill(broker_factory, threads):
    """Classic members upgraded into a consumer group by a consumer-protocol member: the group, its classic
    members and the commits are replayed after kill -9; the members carry on where they were."""
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    topic, group = "kill-topic", "kill-g"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = produce_batch(broker.bootstrap, topic, 900, "a")
    extra = {"session.timeout.ms": 45_000}  # the classic sessions outlive the restart
    members = [Member(f"k{i}", broker.bootstrap, group, topic, "classic", commit_every=10, extra=extra)
               for i in range(2)]
    for m in members:
        start(threads, m)
    try:
        wait_until(lambda: covered(members), 60, "2 classic members assigned")
        joiner = Member("c0", broker.bootstrap, group, topic, "consumer", commit_every=10)
        start(threads, joiner)
        members.append(joiner)
        wait_until(lambda: joiner.assigned and covered(members), 90, "the consumer member assigned")
        wait_until(lambda: consumed_all(members, first), 60, "the first records consumed")
        assert member_types(broker, group) == {"k0": 0, "k1": 0, "c0": 1}
        restart(broker, "kill9")
        assert group_type(broker, group) == CONSUMER
        assert member_types(broker, group) == {"k0": 0, "k1": 0, "c0": 1}
        second = produce_batch(broker.bootstrap, topic, 600, "b")
        wait_until(lambda: consumed_all(members, first | second), 90, "every record consumed after the restart")
        wait_until(lambda: covered(members), 90, "every partition owned once")
    finally:
        for m in members:
            m.stop()
    records, _ = check_delivery(first | second, members)
    assert records == 1500
    assert committed_offsets(broker, group, topic) == ends(first | second)


def test_static_members_roll_to_the_consumer_protocol_and_back(broker, threads):
    """Static members (`group.instance.id`) restarted one by one with the other protocol and the same instance
    id take over their instance's place: the first consumer-protocol one upgrades the group, the last classic
    one replacing the last consumer-protocol member downgrades it (without a rebalance, as in Kafka)."""
    topic, group = "static-topic", "static-g"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = start(threads, BackgroundProducer(broker.bootstrap, topic, "s"))

    def member(name: str, i: int, protocol: str) -> Member:
        return Member(name, broker.bootstrap, group, topic, protocol, extra={"group.instance.id": f"i{i}"})

    live = [start(threads, member(f"k{i}", i, "classic")) for i in range(3)]
    everyone = list(live)
    wait_until(lambda: covered(live) and all(len(m.assigned) == 2 for m in live), 60, "3 static classic x 2")
    wait_until(lambda: sum(m.count() for m in live) >= 300, 60, "records flowing")
    for generation, protocol in (("c", "consumer"), ("r", "classic")):
        for i in range(3):
            old = live.pop(0)
            old.stop()  # a static member closes without leaving: its instance keeps its partitions
            new = start(threads, member(f"{generation}{i}", i, protocol))
            everyone.append(new)
            live.append(new)
            wait_until(lambda new=new: new.assigned and covered(live), 90, f"{new.name} took over i{i}")
            expected = CONSUMER if protocol == "consumer" or i < 2 else CLASSIC
            assert group_type(broker, group) == expected, (new.name, expected)
    wait_until(lambda: classic_state(broker, group) == (0, "Stable", "consumer"), 60, "a stable classic group")
    drain_and_check(broker, group, topic, producer, live, everyone)
