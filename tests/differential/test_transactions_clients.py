"""Differential: transactions seen by real clients and by Kafka's own tool, Kafka 4.4 against Shoal
(docs/kafka-differences.md, "Transactions").

- confluent-kafka (librdkafka) transactional producer: init, begin, produce, send_offsets_to_transaction, commit,
  abort, and a second instance fencing the first; read_committed and read_uncommitted consumers; the coordinator's
  and the partitions' view of each step (DescribeTransactions, LSO, committed offsets).
- kafka-python's transactional producer (the TV1 requests) and its read_committed consumer.
- A hanging transaction (a transactional batch the coordinator never heard of) found by `kafka-transactions
  find-hanging` and ended by `kafka-transactions abort`, on a dedicated pair of brokers with
  transaction.partition.verification.enable=false on both (with verification, the batch is refused: no hang).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP

from tests.helpers import kafka_dist
from tests.helpers.broker_process import start_broker
from tests.helpers.differential import KAFKA, SHOAL, Pair, Target, assert_same, normalize
from tests.helpers.kafka_process import REFEREE_CONFIG, SINGLE_NODE_CONFIG
from tests.helpers.txn_differential import TxnSession, txn_batch
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration


def error_of(exc: BaseException) -> tuple:
    """What a confluent-kafka exception tells the application: code, fatal, retriable, abortable."""
    err: KafkaError = exc.args[0]
    return err.code(), err.fatal(), err.retriable(), err.txn_requires_abort()


def read_all(t: Target, topic: str, partitions: int, *, committed: bool, timeout: float = 30.0) -> list[list]:
    """Every value a confluent consumer reads from each partition up to its end (the LSO under read_committed)."""
    c = Consumer({**t.client_config(), "group.id": t.unique("reader"), "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": "read_committed" if committed else
                  "read_uncommitted"})
    got: list[list] = [[] for _ in range(partitions)]
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()

        def more() -> bool:
            for m in c.consume(50, 0.2):
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    at_end.add(m.partition())
                else:
                    at_end.discard(m.partition())
                    got[m.partition()].append((m.offset(), m.value()))
            return len(at_end) == partitions
        wait_until(more, timeout, f"the end of {topic}")
        positions = [tp.offset for tp in c.position([TopicPartition(topic, p) for p in range(partitions)])]
    finally:
        c.close()
    return [got, positions]


def test_confluent_transactional_producer(pair: Pair) -> None:
    def scenario(t: Target) -> dict:
        with TxnSession(t) as s:
            topic, tid, group = s.topic("eos", 2), t.unique("eos"), t.unique("eos-group")
            s.ready(tid, groups=[group])
            p = Producer({**t.client_config(), "transactional.id": tid, "linger.ms": 0})
            p.init_transactions(30)
            s.pid(s.describe_raw([tid])[0].producer_id)
            out = {"initialized": s.describe(tid)}
            p.begin_transaction()
            for i in range(4):
                # a flush per record: whether two records share a batch is the client's timing, and
                # "partition 0" below compares batches
                p.produce(topic, f"c{i}".encode(), partition=i % 2)
                assert p.flush(30) == 0
            out["ongoing"] = s.describe(tid)
            out["LSOs while open"] = s.offsets(topic, 2, committed=True)
            out["read_committed while open"] = read_all(t, topic, 2, committed=True)
            out["read_uncommitted while open"] = read_all(t, topic, 2, committed=False)
            consumer = Consumer({**t.client_config(), "group.id": group, "enable.auto.commit": False})
            try:
                p.send_offsets_to_transaction([TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 9)],
                                              consumer.consumer_group_metadata(), 30)
            finally:
                consumer.close()
            out["with the offsets"] = s.describe(tid)
            out["offsets pending"] = s.offset_fetch(group, topic, [0, 1], stable=True)
            p.commit_transaction(30)
            s.wait_state(tid, "CompleteCommit")
            out["committed"] = s.describe(tid)
            out["offsets committed"] = s.offset_fetch(group, topic, [0, 1], stable=True)
            p.begin_transaction()
            p.produce(topic, b"a0", partition=0)
            p.produce(topic, b"a1", partition=1)
            assert p.flush(30) == 0
            p.abort_transaction(30)
            s.wait_state(tid, "CompleteAbort")
            out["aborted"] = s.describe(tid)
            p.begin_transaction()
            p.produce(topic, b"z0", partition=0)
            assert p.flush(30) == 0
            # a second instance with the same transactional id fences the first and aborts its transaction
            successor = Producer({**t.client_config(), "transactional.id": tid, "linger.ms": 0})
            successor.init_transactions(30)
            out["fenced"] = s.describe(tid)
            p.produce(topic, b"zombie", partition=0)
            try:
                p.flush(10)
                p.commit_transaction(10)
                out["zombie"] = "committed"
            except KafkaException as e:
                out["zombie"] = error_of(e)
            successor.begin_transaction()
            successor.produce(topic, b"s0", partition=1)
            successor.commit_transaction(30)
            s.wait_state(tid, "CompleteCommit")
            out["successor committed"] = s.describe(tid)
            out["read_committed"] = read_all(t, topic, 2, committed=True)
            out["read_uncommitted"] = read_all(t, topic, 2, committed=False)
            out["partition 0"] = s.fetch(topic, 0, committed=True)
            out["producers"] = s.describe_producers({topic: [0, 1]})
        return out

    assert_same(pair.run(scenario), "a confluent-kafka transactional producer")


def test_kafka_python_transactional_producer(pair: Pair) -> None:
    """kafka-python's producer speaks the TV1 requests (AddPartitionsToTxn, EndTxn below v5)."""
    def scenario(t: Target) -> dict:
        with TxnSession(t) as s:
            topic, tid = s.topic("kp", 1), t.unique("kp")
            s.ready(tid)
            p = KafkaProducer(bootstrap_servers=t.bootstrap, transactional_id=tid, acks="all")
            try:
                p.init_transactions()
                s.pid(s.describe_raw([tid])[0].producer_id)
                out = {"initialized": s.describe(tid)}
                for values, commit in (([b"k0", b"k1"], True), ([b"k2"], False), ([b"k3"], True)):
                    p.begin_transaction()
                    for v in values:
                        # a flush per record: whether two sends share a batch is the client's timing,
                        # and "partition 0" below compares batches
                        p.send(topic, v, partition=0)
                        p.flush(30)
                    out[f"open {values}"] = s.describe(tid)
                    p.commit_transaction() if commit else p.abort_transaction()
                    s.wait_state(tid, "CompleteCommit" if commit else "CompleteAbort")
                out["ended"] = s.describe(tid)
                p.begin_transaction()
                p.send(topic, b"open", partition=0)
                p.flush(30)
                end = s.offsets(topic, 1, committed=True)[0]
                c = KafkaConsumer(bootstrap_servers=t.bootstrap, isolation_level="read_committed",
                                  enable_auto_commit=False)
                try:
                    c.assign([KpTP(topic, 0)])
                    c.seek_to_beginning()
                    seen: list = []

                    def caught_up() -> bool:
                        for msgs in c.poll(200).values():
                            seen.extend((m.offset, m.value) for m in msgs)
                        return c.position(KpTP(topic, 0)) >= end
                    wait_until(caught_up, 30, "kafka-python read_committed at the LSO")
                    out["kafka-python read_committed"] = [seen, c.position(KpTP(topic, 0))]
                finally:
                    c.close()
                p.abort_transaction()
                s.wait_state(tid, "CompleteAbort")
                out["partition 0"] = s.fetch(topic, 0, committed=True)
            finally:
                p.close(5)
        return out

    assert_same(pair.run(scenario), "kafka-python's transactional producer")


def test_transactional_id_and_topic_authorization(sasl_pair: Pair) -> None:
    """alice, without ACLs, about admin's open transaction: every transactional request is refused on the
    transactional id, DescribeTransactions answers the refused entry with the message's defaults, ListTransactions
    leaves it out, DescribeProducers refuses the topic with its message. Once she may DESCRIBE the id, she sees it,
    without the topic she may not describe."""
    def scenario(t: Target) -> dict:
        with TxnSession(t) as admin, TxnSession(t, "alice") as alice:
            topic, tid, group = admin.topic("acl"), t.unique("acl"), t.unique("acl-group")
            admin.ready(tid, groups=[group])
            pid, epoch = admin.producer(tid)
            admin.add(tid, pid, epoch, {topic: [0]})
            admin.produce(topic, 0, txn_batch(pid, epoch, 0, [b"x"]), tid)
            alice.pid(pid)
            out = {"init": alice.init(tid), "add": alice.add(tid, pid, epoch, {topic: [0]}),
                   "add offsets": alice.add_offsets(tid, pid, epoch, group),
                   "produce": alice.produce(topic, 0, txn_batch(pid, epoch, 1, [b"y"]), tid),
                   "txn offset commit": alice.txn_offset_commit(3, tid, group, pid, epoch, {topic: [0]}),
                   "end": alice.end(tid, pid, epoch, True),
                   "describe": alice.describe(tid), "list": alice.list(0, [tid]),
                   "describe producers": alice.describe_producers({topic: [0]})}
            grant = AdminClient(t.client_config())
            for f in grant.create_acls([AclBinding(ResourceType.TRANSACTIONAL_ID, tid, ResourcePatternType.LITERAL,
                                                   "User:alice", "*", AclOperation.DESCRIBE,
                                                   AclPermissionType.ALLOW)]).values():
                f.result(30)
            wait_until(lambda: alice.describe_raw([tid])[0].error_code == 0, 30, "alice's DESCRIBE on the id")
            out.update({"describe, granted": alice.describe(tid), "list, granted": alice.list(0, [tid]),
                        "init, granted DESCRIBE only": alice.init(tid)})
            admin.end(tid, pid, epoch, False)
            admin.wait_state(tid, "CompleteAbort")
        return out

    assert_same(sasl_pair.run(scenario), "transactional requests without ACLs")


# ------------------------------------------------------------------------------ hanging transactions, the tool

UNVERIFIED = {"transaction.partition.verification.enable": "false"}


@pytest.fixture
def unverified_pair(kafka_cluster_factory, tmp_path) -> Pair:
    """A Kafka node and a Shoal broker of their own, both without transaction verification (KIP-890 part 1)."""
    cluster = kafka_cluster_factory(1, {**SINGLE_NODE_CONFIG, **UNVERIFIED})
    shoal = start_broker(tmp_path / "shoal", {**REFEREE_CONFIG, **UNVERIFIED})
    try:
        node = cluster.nodes[0]
        yield Pair(Target(KAFKA, "127.0.0.1", node.port, process=node),
                   Target(SHOAL, "127.0.0.1", shoal.port, process=shoal))
    finally:
        shoal.stop()


def tools_on_both(pair: Pair, tool: str, runs: dict[str, Callable[[Target], Sequence[str]]]
                  ) -> dict[str, dict[str, tuple]]:
    """Run a Kafka tool's invocations (independent of each other) against both brokers, all side by side:
    {broker: {run: (exit code, stdout, stderr)}}."""
    running = {(t.name, what): subprocess.Popen(
        kafka_dist.tool_command(tool, ["--bootstrap-server", t.bootstrap, *args(t)]), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL) for what, args in runs.items() for t in pair}
    out: dict[str, dict[str, tuple]] = {t.name: {} for t in pair}
    for (name, what), proc in running.items():
        stdout, stderr = proc.communicate(timeout=180)
        out[name][what] = (proc.returncode, stdout, stderr)
    return out


def table(stdout: str) -> list[list[str]]:
    """Kafka's tool table: tab-terminated, space-padded cells; the header first."""
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in stdout.splitlines() if line.strip()]


# Columns of the tool's tables whose values differ between two brokers by nature: wall-clock times and ages.
VARYING_COLUMNS = {"LastTimestamp", "CurrentTransactionStartTimeMs", "TransactionDurationMs"}


def by_header(rows: list[list[str]], s: TxnSession) -> list[list[str]]:
    """A tool's table with producer ids named, unique names restored and wall-clock columns blanked."""
    if not rows:
        return rows
    header = rows[0]

    def cell(column: str, value: str) -> str:
        if column in VARYING_COLUMNS:
            return "<varies>"
        if column == "ProducerId" and value.lstrip("-").isdigit():
            return str(s.pid(int(value)))
        return s.name(value)
    return [header] + [[cell(c, v) for c, v in zip(header, r, strict=True)] for r in rows[1:]]


def test_find_and_abort_a_hanging_transaction(unverified_pair: Pair) -> None:
    pair = unverified_pair
    twenty_minutes_ago = int(time.time() * 1000) - 20 * 60_000
    sessions = {t.name: TxnSession(t) for t in pair}
    topics, out = {}, {KAFKA: {}, SHOAL: {}}
    for t in pair:
        s = sessions[t.name]
        hang, live = s.topic("hang"), s.topic("live")
        tid, live_tid = t.unique("hanging"), t.unique("live")
        s.ready(tid, live_tid)
        plain = txn_batch(-1, -1, -1, [b"before-0", b"before-1", b"before-2"], transactional=False)
        assert s.produce(hang, 0, plain, None)[0] == 0
        pid, epoch = s.producer(tid)
        o = out[t.name]
        # a transactional batch without AddPartitionsToTxn: without verification it is appended, and the
        # coordinator, which never heard of the partition, will never write its marker
        o["hanging batch"] = s.produce(hang, 0, txn_batch(pid, epoch, 0, [b"hanging"], timestamp=twenty_minutes_ago),
                                       tid)
        o["after"] = s.produce(hang, 0, txn_batch(-1, -1, -1, [b"after-0", b"after-1"], transactional=False), None)
        o["LSO and high watermark"] = (s.offsets(hang, 1, committed=True), s.offsets(hang, 1, committed=False))
        live_pid, live_epoch = s.producer(live_tid)
        o["live"] = (s.add(live_tid, live_pid, live_epoch, {live: [0]}),
                     s.produce(live, 0, txn_batch(live_pid, live_epoch, 0, [b"live"]), live_tid))
        o["producers"] = s.describe_producers({hang: [0]})
        topics[t.name] = (hang, live, tid, live_tid, pid, live_pid, live_epoch)

    def found(stdout: str, t: Target) -> list[list[str]]:
        hang, live, tid, live_tid, pid, live_pid, _ = topics[t.name]
        s = sessions[t.name]
        rows = table(stdout)
        # the producer id by name; the duration in whole minutes may tick over between the two runs
        return rows[:1] + [[s.name(r[0]), r[1], str(s.pid(int(r[2]))), *r[3:7], "20-21" if r[7] in ("20", "21")
                            else r[7]] for r in rows[1:]]

    # each run starts a JVM per broker: few runs, the independent ones side by side
    before = tools_on_both(pair, "kafka-transactions", {
        "find-hanging, broker": lambda t: ["find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"],
        "find-hanging, partition, default bound": lambda t: ["find-hanging", "--topic", topics[t.name][0],
                                                             "--partition", "0"],
        "abort at a wrong offset": lambda t: ["abort", "--topic", topics[t.name][0], "--partition", "0",
                                              "--start-offset", "4"]})
    aborted = tools_on_both(pair, "kafka-transactions", {
        "abort": lambda t: ["abort", "--topic", topics[t.name][0], "--partition", "0", "--start-offset", "3"]})
    for t in pair:
        for what, (code, stdout, stderr) in before[t.name].items():
            out[t.name][what] = (code, found(stdout, t) if what.startswith("find") else stdout, stderr)
        out[t.name].update(aborted[t.name])
    for t in pair:
        s = sessions[t.name]
        hang, live, tid, live_tid, pid, live_pid, live_epoch = topics[t.name]
        o = out[t.name]
        o["LSO and high watermark after"] = (s.offsets(hang, 1, committed=True), s.offsets(hang, 1, committed=False))
        o["read_committed"] = s.fetch(hang, 0, committed=True)
        o["producers after"] = s.describe_producers({hang: [0]})
        o["live commit"] = s.end(live_tid, live_pid, live_epoch, True)
        s.wait_state(live_tid, "CompleteCommit")
    after = tools_on_both(pair, "kafka-transactions", {
        "find-hanging after": lambda t: ["find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"],
        "describe-producers": lambda t: ["describe-producers", "--topic", topics[t.name][0], "--partition", "0"]})
    for t in pair:
        for what, (code, stdout, stderr) in after[t.name].items():
            rows = found(stdout, t) if what == "find-hanging after" else by_header(table(stdout), sessions[t.name])
            out[t.name][what] = (code, rows, stderr)
    for s in sessions.values():
        s.close()
    assert_same({t.name: normalize(out[t.name], t) for t in pair}, "a hanging transaction and kafka-transactions")
