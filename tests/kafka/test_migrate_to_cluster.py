"""docs/operations.md's cut-over, as tested: a populated Shoal broker moved with `shoal-migrate` to a three-broker
Kafka 4.4 cluster (KRaft, replication factor 3, min.insync.replicas=2, StandardAuthorizer), then the same clients
pointed at the cluster.

Shoal holds: topics with configs (one compacted, one transactional with an aborted transaction), records with
keys, headers and timestamps, a classic consumer group that consumed part of its topics and committed, a share
group whose member accepted some records, accepted some out of order and held others in flight (acquired,
unacknowledged) when it was stopped, ACLs, SCRAM users and client quotas. After `copy` (twice: before and after
the clients stop), `acls`, `quotas`, `users` and `groups`:

- the classic consumer group continues on the cluster exactly where it stopped: no record lost, none repeated;
- the share group continues at its start offset: records accepted below it are not delivered again; those in
  flight at the cut-over are delivered again, and so are records accepted above the start offset (the share
  state past the start offset does not move: docs/operations.md says so);
- producers (idempotent and transactional, same transactional.id) go on writing to the cluster;
- topic configs, group configs, ACLs, quotas and SCRAM users (iterations kept; log in with SCRAM on the run's SASL
  Kafka, `kafka_sasl`, since the cluster fixture is PLAINTEXT) are there; `shoal-share-groups` and
  `shoal-transactions` work against the cluster.

The figures (produced, delivered, redelivered, lost; the cut-over's duration) are printed (`pytest -s`)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
)

from shoal_client import ACCEPT, RELEASE, ShareGroupMember
from shoal_client.admin import ShareGroupAdmin
from shoal_client.connection import BrokerConnection
from shoal_client.migrate import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS, alter_quotas_body, quota_entries
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.confluent_clients import alter_group_config, create_topic, describe_group_config
from tests.helpers.console_scripts import run_script
from tests.helpers.kafka_process import SCRAM_USERS, STANDARD_AUTHORIZER, KafkaCluster, KafkaNode
from tests.helpers.migration_data import produce_orders, transactional_producer, write_payments
from tests.helpers.share_members import records_in
from tests.helpers.waiting import wait_until

# The cut-over tests share a worker (tests/conftest.py): each starts a three-broker cluster, never both at once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka-cut-over")]

TAG = uuid.uuid4().hex[:6]
CAROL, DAVE = f"carol-{TAG}", f"dave-{TAG}"  # unique: the SASL Kafka is shared by the whole run
SHOAL_SETTINGS = {
    "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS",
    "group.share.min.heartbeat.interval.ms": "50", "group.share.heartbeat.interval.ms": "100",
    "group.share.min.session.timeout.ms": "2000", "group.share.session.timeout.ms": "3000",
}
SCRAM = [f"SCRAM-SHA-512=[name={CAROL},password=carol-pw]", f"SCRAM-SHA-256=[name={CAROL},password=carol-pw]",
         f"SCRAM-SHA-256=[name={DAVE},iterations=8192,password=dave-pw]"]
ORDERS_CONFIG = {"retention.bytes": "1073741824", "max.message.bytes": "2000000"}
PROFILES_CONFIG = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2"}
T0 = (int(time.time()) - 3600) * 1000  # record timestamps (CreateTime) the copy must keep
ORDERS_PER_PARTITION = 20
ACLS = [(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, f"User:{CAROL}", AclOperation.READ),
        (ResourceType.TOPIC, "pay", ResourcePatternType.PREFIXED, f"User:{DAVE}", AclOperation.WRITE),
        (ResourceType.GROUP, "cg", ResourcePatternType.LITERAL, f"User:{CAROL}", AclOperation.READ),
        (ResourceType.TRANSACTIONAL_ID, "payments-writer", ResourcePatternType.LITERAL, f"User:{DAVE}",
         AclOperation.WRITE)]
QUOTAS = {(("user", CAROL),): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
          (("client-id", "reports"), ("user", DAVE)): {"request_percentage": 50.0},
          (("user", None),): {"producer_byte_rate": 4194304.0}}


@pytest.fixture(scope="module")
def kafka_cluster_overrides() -> dict[str, str]:
    # ACLs need an authorizer; every client here is ANONYMOUS on PLAINTEXT, a super user (as are the brokers
    # reaching their controllers).
    return {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS",
            "group.share.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def shoal(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("shoal-source")
    proc = BrokerProcess(tmp / "data", tmp / "broker.log", overrides=SHOAL_SETTINGS,
                         extra_args=[a for s in SCRAM for a in ("--add-scram", s)]).start()
    try:
        yield proc, tmp
    finally:
        proc.stop()


# ---------------------------------------------------------------------- clients


def produce_profiles(bootstrap: str) -> None:
    """Keyed records of a compacted topic: updates of the same keys and a tombstone."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(12):
        p.produce("profiles", value=f"profile{i}".encode(), key=f"user{i % 4}".encode(), timestamp=T0 + i)
    p.produce("profiles", value=None, key=b"user3", timestamp=T0 + 12)
    assert p.flush(60) == 0


def read_all(bootstrap: str, partitions: list[tuple[str, int]], want: int) -> list[tuple]:
    """(topic, partition, offset, key, value, headers, timestamp) of every record, read_committed, from the start."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([TopicPartition(t, p, 0) for t, p in partitions])
    got: list[tuple] = []
    try:
        def enough() -> bool:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append((m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.timestamp()))
            return len(got) >= want
        wait_until(enough, 60, f"{want} records")
    finally:
        c.close()
    return sorted(got, key=lambda r: r[:3])


def group_consumer(bootstrap: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "cg", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe(["orders", "payments"])
    return c


def consume_and_commit(c: Consumer, count: int, partitions: int) -> list[bytes]:
    """Process records one by one, at least `count` and at least one of each of the `partitions`, and commit the
    position after the last one processed in each partition (records fetched beyond them are not processed)."""
    done: list[bytes] = []
    positions: dict[tuple[str, int], int] = {}

    def processed() -> bool:
        for m in c.consume(1, 0.5):
            assert m.error() is None, m.error()
            done.append(m.value())
            positions[(m.topic(), m.partition())] = m.offset() + 1
        return len(done) >= count and len(positions) >= partitions

    wait_until(processed, 60, f"the consumer group to process {count} records of {partitions} partitions")
    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in positions.items()], asynchronous=False)
    return done


def consume_until(c: Consumer, want: set[bytes], quiet_s: float = 3.0) -> list[bytes]:
    """Every value consumed until `want` is covered, then `quiet_s` more (anything delivered beyond shows)."""
    got: list[bytes] = []

    def covered() -> bool:
        for m in c.consume(100, 0.5):
            assert m.error() is None, m.error()
            got.append(m.value())
        return want <= set(got)

    wait_until(covered, 90, "the consumer group to read its records on the cluster")
    end = time.monotonic() + quiet_s
    while time.monotonic() < end:
        got.extend(m.value() for m in c.consume(100, 0.5) if m.error() is None)
    return got


def share_fetch_all(member: ShareGroupMember, count: int) -> dict[tuple[int, int], tuple[bytes, list]]:
    """(partition, offset) -> (value, the Acquired holding it) until `count` offsets are held."""
    held: dict[tuple[int, int], tuple[bytes, list]] = {}

    def acquired() -> bool:
        for a in member.fetch(max_records=500, max_bytes=1 << 20, max_wait_ms=500).acquired:
            for offset, value, _ in records_in(a):
                held[(a.partition, offset)] = (value, a)
        return len(held) >= count

    wait_until(acquired, 60, f"the share member to acquire {count} records")
    return held


def share_accept_until(member: ShareGroupMember, want: set[bytes], quiet_s: float = 3.0) -> list[tuple]:
    """(partition, offset, value, delivery count) of every record delivered, each ACCEPTed, until `want` is
    covered and `quiet_s` more."""
    got: list[tuple] = []
    pending: dict = {}

    def step() -> None:
        nonlocal pending
        result = member.fetch(max_records=500, max_bytes=1 << 20, max_wait_ms=300, acknowledgements=pending)
        assert not result.ack_errors, result.ack_errors
        pending = {}
        for a in result.acquired:
            got.extend((a.partition, o, v, d) for o, v, d in records_in(a))
            pending.setdefault(a.ack_key, []).extend((f, last, ACCEPT) for f, last, _ in a.ranges)

    def covered() -> bool:
        step()
        return want <= {g[2] for g in got}

    wait_until(covered, 90, "the share group to get its records on the cluster")
    end = time.monotonic() + quiet_s
    while time.monotonic() < end:
        step()
    if pending:
        assert not member.acknowledge(pending)
    return got


def migrate(*args: str) -> str:
    done = run_script("shoal-migrate", *args, timeout=300)
    assert done.returncode == 0, f"shoal-migrate {args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def tool(name: str, bootstrap: str, *args: str) -> list[list[str]]:
    r = run_script(name, "--bootstrap-server", bootstrap, *args)
    assert r.returncode == 0, (name, args, r.stdout, r.stderr)
    return [line.split() for line in r.stdout.splitlines() if line.strip()]


def figures(scenario: str, produced: int, delivered: int, redelivered: int, lost: int) -> None:
    print(f"\n[figures] {scenario}: produced {produced}, delivered {delivered}, delivered again {redelivered}, "
          f"lost {lost}")


# ---------------------------------------------------------------------- the cut-over


def test_cut_over_from_shoal_to_a_kafka_cluster(shoal, kafka_cluster: KafkaCluster, kafka_sasl: KafkaNode) -> None:
    source, tmp = shoal
    src = source.bootstrap
    cluster = kafka_cluster.bootstrap
    src_admin = AdminClient({"bootstrap.servers": src})

    # ---- Shoal, populated: topics with configs, records, ACLs, quotas, groups
    create_topic(src, "orders", 3, ORDERS_CONFIG)
    create_topic(src, "payments", 1)
    create_topic(src, "profiles", 1, PROFILES_CONFIG)
    produce_orders(src, range(3 * ORDERS_PER_PARTITION), t0=T0, flush_timeout_s=60)
    txn = transactional_producer(src)
    # payments: p0-p4 (offsets 0-4, marker 5), aborted x0-x2 (6-8, marker 9), p5-p9 (10-14, marker 15)
    write_payments(txn, [(range(5), True), (range(3), False), (range(5, 10), True)])
    txn.flush(30)
    del txn  # its session on Shoal ends with the cut-over; the same transactional.id goes on on the cluster
    produce_profiles(src)
    for future in src_admin.create_acls([
            AclBinding(rt, name, pattern, who, "*", op, AclPermissionType.ALLOW)
            for rt, name, pattern, who, op in ACLS]).values():
        future.result(timeout=30)
    with BrokerConnection("127.0.0.1", source.port, client_id="test") as conn:
        resp = conn.call(ALTER_CLIENT_QUOTAS, 1, alter_quotas_body(QUOTAS))
        assert all(e.error_code == 0 for e in resp.entries), resp

    # The classic consumer group processes 25 records or more, some of each partition, commits, and stops.
    cg = group_consumer(src)
    before = consume_and_commit(cg, 25, 4)
    cg.close()
    print(f"\n[figures] consumer group cg processed {len(before)} records on Shoal")

    # The share group: its member holds all 60 orders, then
    #   partition 0: ACCEPT 0-19                                     -> start offset 20
    #   partition 1: ACCEPT 0-9, 12-14; RELEASE 15-19; 10-11 in flight -> start offset 10
    #   partition 2: ACCEPT 0-4; 5-19 in flight                        -> start offset 5
    # and is stopped (what it holds is released: in flight at the cut-over).
    alter_group_config(src_admin, "sg", "share.auto.offset.reset", "earliest")
    member = ShareGroupMember(src, "sg", ["orders"], client_id="sg-member").start()
    assert member.wait_for_assignment(30)
    held = share_fetch_all(member, 3 * ORDERS_PER_PARTITION)
    accepted = {(0, o) for o in range(20)} | {(1, o) for o in (*range(10), 12, 13, 14)} | {(2, o) for o in range(5)}
    released = {(1, o) for o in range(15, 20)}
    in_flight = set(held) - accepted - released
    acks: dict = {}
    for (p, o) in sorted(accepted | released):
        acks.setdefault(held[(p, o)][1].ack_key, []).append((o, o, ACCEPT if (p, o) in accepted else RELEASE))
    assert not member.acknowledge(acks)
    member.close()
    start_offsets = {("orders", 0): 20, ("orders", 1): 10, ("orders", 2): 5}
    with ShareGroupAdmin(src) as admin:
        wait_until(lambda: dict(admin.list_groups(types=("share",))).get("sg") == "Empty" and {
            (o.topic, o.partition): o.start_offset for o in admin.share_group_offsets("sg")} == start_offsets,
            30, "the share group on Shoal to be empty at its start offsets")

    # ---- the cut-over, as docs/operations.md gives it
    state = tmp / "migration.json"
    common = ["--source", src, "--target", cluster]
    t0 = time.monotonic()
    out = migrate("copy", *common, "--state", str(state), "--replication-factor", "3")  # 1. while producing
    first_copy_s = time.monotonic() - t0
    assert "Copied 83 records" in out, out  # 60 orders, 10 payments, 13 profiles
    produce_orders(src, range(60, 63), t0=T0, flush_timeout_s=60)  # written to Shoal until the producers stop
    # 2. every client stopped (above); no transaction open on Shoal
    listed = tool("shoal-transactions", src, "list")
    assert not [row for row in listed if "Ongoing" in row], listed
    t1 = time.monotonic()
    assert "Copied 3 records" in migrate("copy", *common, "--state", str(state), "--replication-factor", "3")
    migrate("acls", *common)  # 3.
    migrate("quotas", *common)
    passwords = tmp / "passwords.properties"
    passwords.write_text(f"{CAROL}=carol-pw\n{DAVE}=dave-pw\n")
    migrate("users", *common, "--passwords", str(passwords))
    out = migrate("groups", *common, "--state", str(state))
    cut_over_s = time.monotonic() - t1
    # payments' offsets shift (markers, the aborted transaction): p7 is 12 on Shoal, 7 on the cluster
    print(f"\n[figures] first copy {first_copy_s:.1f} s; cut-over (tail copy, acls, quotas, users, groups) "
          f"{cut_over_s:.1f} s\n{out}")
    for line in ("sg orders 0 20 -> 20", "sg orders 1 10 -> 10", "sg orders 2 5 -> 5"):
        assert line in out, out

    # ---- the cluster holds the same records, configs, ACLs, quotas, users
    orders = [("orders", p) for p in range(3)]
    assert read_all(cluster, orders, 63) == read_all(src, orders, 63)
    assert read_all(cluster, [("profiles", 0)], 13) == read_all(src, [("profiles", 0)], 13)
    payments = read_all(cluster, [("payments", 0)], 10)
    assert [(r[2], r[4]) for r in payments] == [(i, f"p{i}".encode()) for i in range(10)]

    admin = AdminClient({"bootstrap.servers": cluster})
    for topic, config in (("orders", ORDERS_CONFIG), ("profiles", PROFILES_CONFIG), ("payments", {})):
        resource = ConfigResource(ResourceType.TOPIC, topic)
        entries = admin.describe_configs([resource])[resource].result(30)
        assert {k: e.value for k, e in entries.items()
                if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value} == config, topic
    layout = admin.list_topics(timeout=30).topics
    assert all(len(p.replicas) == 3 for t in ("orders", "payments", "profiles") for p in layout[t].partitions.values())
    assert describe_group_config(admin, "sg")["share.auto.offset.reset"].value == "earliest"
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    acls = admin.describe_acls(everything).result(timeout=30)
    assert sorted((a.restype, a.name, a.resource_pattern_type, a.principal, a.operation) for a in acls) == \
        sorted(ACLS)
    with BrokerConnection("127.0.0.1", kafka_cluster.nodes[1].port, client_id="test") as conn:
        assert quota_entries(conn.call(DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})) == QUOTAS
    described = admin.describe_user_scram_credentials().result(30)
    assert {u: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
            for u, d in described.items()} == {CAROL: [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)],
                                               DAVE: [("SCRAM_SHA_256", 8192)]}

    # ---- the tools against the cluster
    share_rows = tool("shoal-share-groups", cluster, "--describe", "--group", "sg")
    assert {(r[1], int(r[2]), int(r[3])) for r in share_rows if r[:2] == ["sg", "orders"]} == \
        {(t, p, o) for (t, p), o in start_offsets.items()}, share_rows

    # ---- producers go on, on the cluster (the transactional one with the same transactional.id)
    produce_orders(cluster, range(63, 93), t0=T0, flush_timeout_s=60)
    txn = transactional_producer(cluster)
    write_payments(txn, [(range(10, 13), True), (range(3, 5), False)])
    listed = tool("shoal-transactions", cluster, "list")
    assert "payments-writer" in [row[0] for row in listed], listed
    [_, row] = tool("shoal-transactions", cluster, "describe", "--transactional-id", "payments-writer")
    assert "CompleteAbort" in row, row

    # ---- the classic consumer group continues: nothing lost, nothing repeated
    all_values = {f"v{i}".encode() for i in range(93)} | {f"p{i}".encode() for i in range(13)}
    cg = group_consumer(cluster)
    try:
        after = consume_until(cg, all_values - set(before))
    finally:
        cg.close()
    delivered = before + after
    lost = all_values - set(delivered)
    repeated = len(delivered) - len(set(delivered))
    figures("consumer group cg (orders + payments)", len(all_values), len(set(delivered)), repeated, len(lost))
    assert not lost and repeated == 0 and set(delivered) == all_values

    # ---- the share group continues at its start offsets
    sg = ShareGroupMember(cluster, "sg", ["orders"], client_id="sg-member").start()
    try:
        assert sg.wait_for_assignment(30)
        expected_again = {held[k][0] for k in set(held) - accepted if k[1] >= start_offsets[("orders", k[0])]}
        new = {f"v{i}".encode() for i in range(60, 93)}
        got = share_accept_until(sg, expected_again | new)
    finally:
        sg.close()
    values = [g[2] for g in got]
    on_shoal = {value for value, _ in held.values()}
    again = {v for v in values if v in on_shoal}
    accepted_again = {held[k][0] for k in accepted} & again
    order_values = {f"v{i}".encode() for i in range(93)}
    accepted_on_shoal = {held[k][0] for k in accepted}
    lost = order_values - accepted_on_shoal - set(values)
    figures("share group sg (orders)", len(order_values), len(set(values) | accepted_on_shoal), len(again),
            len(lost))
    print(f"[figures] share group sg: delivered again: {len(again)} = in flight at the cut-over "
          f"{len({held[k][0] for k in in_flight})} + released {len(released)} + accepted above the start offset "
          f"{len(accepted_again)}")
    assert len(values) == len(set(values)), "a record delivered twice on the cluster"
    # Exactly: what was not accepted below its start offset on Shoal, plus the records produced since.
    assert set(values) == {held[k][0] for k in held if k[1] >= start_offsets[("orders", k[0])]} | new
    assert accepted_again == {held[(1, o)][0] for o in (12, 13, 14)}
    assert not lost

    # ---- SCRAM users log in on a Kafka with a SASL listener (the run's `kafka_sasl`), moved the same way
    target_config = tmp / "kafka-sasl.properties"
    target_config.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                             f"sasl.username=admin\nsasl.password={SCRAM_USERS['admin']}\n")
    migrate("users", "--source", src, "--target", kafka_sasl.bootstrap, "--target-config", str(target_config),
            "--passwords", str(passwords))
    for user, mechanism in ((CAROL, "SCRAM-SHA-512"), (CAROL, "SCRAM-SHA-256"), (DAVE, "SCRAM-SHA-256")):
        login = AdminClient({"bootstrap.servers": kafka_sasl.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": mechanism, "sasl.username": user,
                             "sasl.password": "carol-pw" if user == CAROL else "dave-pw"})
        wait_until(lambda login=login: bool(login.list_topics(timeout=10).brokers), 60,
                   f"{user} to log in with {mechanism}")
    # The shared SASL Kafka keeps no users of this test.
    sasl_admin = AdminClient(kafka_sasl.client_config("admin"))
    for user, mechanism in ((CAROL, ScramMechanism.SCRAM_SHA_512), (CAROL, ScramMechanism.SCRAM_SHA_256),
                            (DAVE, ScramMechanism.SCRAM_SHA_256)):
        sasl_admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, mechanism)])[user].result(30)
