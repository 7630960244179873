"""docs/operations.md's migration, step by step, from one Shoal broker to a second one standing in for the Kafka
cluster (it speaks the same protocol): `shoal-migrate copy` (run twice, and resumed from an older state file),
`shoal-migrate acls`, `shoal-migrate groups`, then `shoal-share-groups --describe` on the target. Afterwards a
confluent-kafka consumer group reads on the target exactly the records it had not consumed on the source, a
share group resumes at its translated start offset, and the topics' configs, the groups' configs and the ACLs
are there. One topic is transactional (markers and an aborted transaction), so its offsets are not kept 1:1."""

from __future__ import annotations

import shutil
import time

import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    ConsumerGroupTopicPartitions,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ConfigResource,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
)

from shoal_client.admin import ShareGroupAdmin
from shoal_client.connection import BrokerConnection
from shoal_client.migrate import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS, alter_quotas_body, quota_entries
from shoal_client.offset_map import MigrationState
from tests.helpers.bounded_close import close_within
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.confluent_clients import (
    admin_client,
    alter_group_config,
    create_topic,
    describe_group_config,
)
from tests.helpers.console_scripts import run_script
from tests.helpers.migration_data import produce_orders
from tests.helpers.share_consumers import messages
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

# An authorizer on both brokers (ACLs are served only with one); the PLAINTEXT listener's ANONYMOUS principal is
# a super user, so the clients here are allowed everything.
SETTINGS = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
            "group.share.min.heartbeat.interval.ms": "50", "group.share.heartbeat.interval.ms": "100",
            "group.share.min.session.timeout.ms": "2000", "group.share.session.timeout.ms": "3000"}
ORDERS_CONFIG = {"retention.ms": "86400000", "max.message.bytes": "2000000"}
T0 = 1_700_000_000_000  # record timestamps (CreateTime) the copy must keep
ACLS = [("orders", ResourcePatternType.LITERAL, "User:alice", AclOperation.READ),
        ("pay", ResourcePatternType.PREFIXED, "User:bob", AclOperation.WRITE)]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("migration")
    started: list[BrokerProcess] = []
    try:
        for name in ("source", "target"):
            started.append(BrokerProcess(tmp / name, tmp / f"{name}.log", overrides=SETTINGS).start())
        yield started[0], started[1], tmp
    finally:
        for proc in started:
            proc.stop()


def produce_payments(bootstrap: str) -> None:
    """Committed p0-p4 (offsets 0-4, marker 5), aborted x0-x2 (6-8, marker 9), committed p5-p9 (10-14, marker 15)."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "payments-writer", "linger.ms": 0})
    p.init_transactions(30)
    for values, commit in ((range(5), True), (range(3), False), (range(5, 10), True)):
        p.begin_transaction()
        for i in values:
            p.produce("payments", f"{'p' if commit else 'x'}{i}".encode(), partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)


def read_all(bootstrap: str, partitions: list[tuple[str, int]], want: int) -> list[tuple]:
    """(topic, partition, offset, key, value, headers, timestamp) of every record, read_committed, from the start."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition(t, p, 0) for t, p in partitions])
    got: list[tuple] = []
    try:
        def enough() -> bool:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append((m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.timestamp()))
            return len(got) >= want
        wait_until(enough, 30, f"{want} records")
    finally:
        c.close()
    return sorted(got, key=lambda r: r[:3])


def share_group_state(bootstrap: str, group: str) -> tuple[str | None, dict[tuple[str, int], int]]:
    with ShareGroupAdmin(bootstrap) as admin:
        state = dict(admin.list_groups(types=("share",))).get(group)
        if state is None:
            return None, {}
        return state, {(o.topic, o.partition): o.start_offset for o in admin.share_group_offsets(group)}


def migrate(*args: str) -> str:
    done = run_script("shoal-migrate", *args)
    assert done.returncode == 0, f"shoal-migrate {args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_migration_to_a_second_cluster(clusters) -> None:
    source, target, tmp = clusters
    src_admin = admin_client(source.bootstrap)

    # ---- the source: topics, records, ACLs, a consumer group and a share group, all stopped
    create_topic(source.bootstrap, "orders", 3, ORDERS_CONFIG)
    create_topic(source.bootstrap, "payments", 1)
    produce_orders(source.bootstrap, range(30), t0=T0, flush_timeout_s=30)
    produce_payments(source.bootstrap)
    for future in src_admin.create_acls([
            AclBinding(ResourceType.TOPIC, name, pattern, who, "*", op, AclPermissionType.ALLOW)
            for name, pattern, who, op in ACLS]).values():
        future.result(timeout=30)

    cg = Consumer({"bootstrap.servers": source.bootstrap, "group.id": "cg", "enable.auto.commit": False})
    cg.commit(offsets=[*(TopicPartition("orders", p, 4) for p in range(3)), TopicPartition("payments", 0, 12)],
              asynchronous=False)  # read orders 0-3 of each partition, payments p0-p6 (source offset 11)
    cg.close()

    alter_group_config(src_admin, "sg", "share.auto.offset.reset", "earliest")
    alter_group_config(src_admin, "sg", "share.isolation.level", "read_committed")
    sc = ShareConsumer({"bootstrap.servers": source.bootstrap, "group.id": "sg",
                        "share.acknowledgement.mode": "explicit"})
    sc.subscribe(["payments"])
    try:
        seen: set[int] = set()

        def all_seen() -> bool:
            for m in messages(sc, 0.5):
                seen.add(m.offset())
                sc.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 12 else AcknowledgeType.RELEASE)
            sc.commit_sync()
            return {0, 1, 2, 3, 4, 10, 11} <= seen
        wait_until(all_seen, 30, "the share consumer to see payments up to offset 11")
    finally:
        close_within(sc)
    wait_until(lambda: share_group_state(source.bootstrap, "sg") == ("Empty", {("payments", 0): 12}), 30,
               "the source share group to be empty at start offset 12")

    # ---- step 1: copy topics and records (first while "producers still write", then the tail)
    state = tmp / "migration-state.json"
    common = ["--source", source.bootstrap, "--target", target.bootstrap]
    out = migrate("copy", *common, "--state", str(state))
    assert "Copied 40 records" in out, out
    before_tail = tmp / "state-before-tail.json"
    shutil.copy(state, before_tail)
    produce_orders(source.bootstrap, range(30, 33), t0=T0, flush_timeout_s=30)
    assert "Copied 3 records" in migrate("copy", *common, "--state", str(state))
    # A run that died after the target took the tail but before saving the state: resuming skips those records.
    shutil.copy(before_tail, state)
    assert "Copied 0 records" in migrate("copy", *common, "--state", str(state))

    # ---- steps 2 and 3: ACLs, then group offsets
    migrate("acls", *common)
    out = migrate("groups", *common, "--state", str(state))
    assert "cg payments 0 12 -> 7" in out and "sg payments 0 12 -> 7" in out, out
    described = run_script("shoal-share-groups", "--bootstrap-server", target.bootstrap, "--describe",
                           "--group", "sg")
    assert described.returncode == 0, described.stderr
    assert ["sg", "payments", "0", "7"] in [line.split()[:4] for line in described.stdout.splitlines()], \
        described.stdout

    # ---- the target holds the same records, configs and ACLs
    orders = [(t, p) for t in ("orders",) for p in range(3)]
    assert read_all(target.bootstrap, orders, 33) == read_all(source.bootstrap, orders, 33)
    payments = read_all(target.bootstrap, [("payments", 0)], 10)
    assert [(r[2], r[4]) for r in payments] == [(i, f"p{i}".encode()) for i in range(10)]

    tgt_admin = admin_client(target.bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, "orders")
    entries = tgt_admin.describe_configs([resource])[resource].result(30)
    assert {k: e.value for k, e in entries.items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value} == ORDERS_CONFIG
    assert len(tgt_admin.list_topics(timeout=30).topics["orders"].partitions) == 3
    assert describe_group_config(tgt_admin, "sg")["share.isolation.level"].value == "read_committed"
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    acls = tgt_admin.describe_acls(everything).result(timeout=30)
    assert sorted((a.name, a.resource_pattern_type, a.principal, a.operation) for a in acls) == sorted(ACLS)

    # ---- the consumer group resumes at the translated offsets: exactly what it had not read
    committed = tgt_admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("cg")])["cg"].result(30)
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in committed.topic_partitions) == [
        ("orders", 0, 4), ("orders", 1, 4), ("orders", 2, 4), ("payments", 0, 7)]
    resumed = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "cg", "enable.auto.commit": False,
                        "auto.offset.reset": "earliest"})
    resumed.subscribe(["orders", "payments"])
    got: list[bytes] = []
    expected = sorted([f"v{i}".encode() for i in range(12, 33)] + [b"p7", b"p8", b"p9"])
    try:
        def caught_up() -> bool:
            for m in resumed.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
            return len(got) >= len(expected)
        wait_until(caught_up, 30, "the consumer group to read its remaining records on the target")
        got.extend(m.value() for m in resumed.consume(100, 1.0))  # anything beyond would show here
    finally:
        close_within(resumed)
    assert sorted(got) == expected

    # ---- the share group resumes at its start offset: the released records, none of the accepted ones
    share = ShareConsumer({"bootstrap.servers": target.bootstrap, "group.id": "sg"})
    share.subscribe(["payments"])
    values: list[bytes] = []
    try:
        def delivered() -> bool:
            values.extend(m.value() for m in messages(share, 0.5))
            return len(values) >= 3
        wait_until(delivered, 30, "the share group to get its records on the target")
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            values.extend(m.value() for m in messages(share, 0.3))
    finally:
        close_within(share)
    assert sorted(values) == [b"p7", b"p8", b"p9"]


def test_migrate_reports_what_it_cannot_do(clusters) -> None:
    source, target, tmp = clusters
    common = ["--source", source.bootstrap, "--target", target.bootstrap]
    done = run_script("shoal-migrate", "groups", *common, "--state", str(tmp / "absent.json"))
    assert done.returncode == 1 and "run `shoal-migrate copy` first" in done.stderr, done
    done = run_script("shoal-migrate", "copy", *common, "--state", str(tmp / "x.json"), "--topic", "nope")
    assert done.returncode == 1 and "Topics not found on the source: nope" in done.stderr, done
    done = run_script("shoal-migrate", "copy", *common)
    assert done.returncode == 1 and "--state" in done.stderr, done
    other = tmp / "other-pair.json"
    MigrationState("elsewhere:9092", target.bootstrap).save(other)
    done = run_script("shoal-migrate", "groups", *common, "--state", str(other))
    assert done.returncode == 1 and "was written for --source elsewhere:9092" in done.stderr, done
    done = run_script("shoal-migrate", "--help")
    assert done.returncode == 0 and "usage:" in done.stdout, done


def test_acls_from_a_source_without_authorizer_over_sasl(tmp_path) -> None:
    """A source without an authorizer has no ACLs (SECURITY_DISABLED): nothing to copy, not a failure. The
    source is reached over SASL_PLAINTEXT/SCRAM with --source-config (librdkafka's names), as documented."""
    plain = BrokerProcess(tmp_path / "plain", tmp_path / "plain.log",
                          overrides={"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                                     "sasl.enabled.mechanisms": "SCRAM-SHA-512"},
                          extra_args=["--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"]).start()
    config = tmp_path / "source.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.username=admin\nsasl.password=admin-secret\n")
    try:
        sasl = f"127.0.0.1:{plain.ports['SASL_PLAINTEXT']}"
        done = run_script("shoal-migrate", "acls", "--source", sasl, "--source-config", str(config),
                          "--target", plain.bootstrap)
        assert done.returncode == 0 and "no authorizer" in done.stdout, done
        config.write_text(config.read_text().replace("admin-secret", "wrong"))
        done = run_script("shoal-migrate", "acls", "--source", sasl, "--source-config", str(config),
                          "--target", plain.bootstrap)
        assert done.returncode == 1 and "Error:" in done.stderr and "auth" in done.stderr.lower(), done
    finally:
        plain.stop()


def test_quotas_and_scram_users_move(tmp_path) -> None:
    """`shoal-migrate quotas` copies every client quota (user, client-id, their combination, defaults) and
    `shoal-migrate users` creates the SCRAM users again with the same mechanisms and iterations, from a passwords
    file: they log in on the target with their passwords; a user without a password is reported (exit 1)."""
    sasl = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}
    users = ["SCRAM-SHA-512=[name=carol,password=carol-pw]", "SCRAM-SHA-256=[name=carol,password=carol-pw]",
             "SCRAM-SHA-256=[name=dave,iterations=8192,password=dave-pw]"]
    source = BrokerProcess(tmp_path / "src", tmp_path / "src.log", overrides=sasl,
                           extra_args=[a for u in users for a in ("--add-scram", u)]).start()
    target = BrokerProcess(tmp_path / "tgt", tmp_path / "tgt.log", overrides=sasl).start()
    try:
        quotas = {(("user", "carol"),): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
                  (("client-id", "reports"), ("user", "dave")): {"request_percentage": 50.0},
                  (("user", None),): {"producer_byte_rate": 4194304.0}}
        with BrokerConnection("127.0.0.1", source.port, client_id="t") as conn:
            resp = conn.call(ALTER_CLIENT_QUOTAS, 1, alter_quotas_body(quotas))
            assert all(e.error_code == 0 for e in resp.entries), resp
        common = ["--source", source.bootstrap, "--target", target.bootstrap]
        out = migrate("quotas", *common)
        assert "Quotas of user=carol" in out, out
        with BrokerConnection("127.0.0.1", target.port, client_id="t") as conn:
            got = quota_entries(conn.call(DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False}))
        assert got == quotas

        passwords = tmp_path / "passwords.properties"
        passwords.write_text("carol=carol-pw\n")
        done = run_script("shoal-migrate", "users", *common, "--passwords", str(passwords))
        assert done.returncode == 1 and "user dave: no password in the passwords file" in done.stderr, done
        passwords.write_text("carol=carol-pw\ndave=dave-pw\n")
        out = migrate("users", *common, "--passwords", str(passwords))
        assert "User dave: SCRAM-SHA-256 with 8192 iterations" in out, out
        tgt_admin = admin_client(target.bootstrap)  # kept until its future is done
        described = tgt_admin.describe_user_scram_credentials().result(30)
        assert {u: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
                for u, d in described.items()} == {
            "carol": [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)], "dave": [("SCRAM_SHA_256", 8192)]}
        sasl_target = f"127.0.0.1:{target.ports['SASL_PLAINTEXT']}"
        for user, mechanism in (("carol", "SCRAM-SHA-512"), ("carol", "SCRAM-SHA-256"), ("dave", "SCRAM-SHA-256")):
            login = admin_client(sasl_target, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                                                 "sasl.username": user, "sasl.password": f"{user}-pw"})
            assert login.list_topics(timeout=30).brokers, (user, mechanism)
    finally:
        source.stop()
        target.stop()
