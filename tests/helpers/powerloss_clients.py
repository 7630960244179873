"""Clients that keep a broker busy across power losses and remember what it acknowledged (tests/helpers/
powerloss_rig.py runs the broker): an idempotent acks=all producer, explicitly acknowledging share consumers, a
transactional producer, an offset committer and an admin client creating, altering and deleting topics. Each runs
in a thread until stopped and keeps going through the broker's restarts (the port stays the same)."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter

from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.helpers.confluent_clients import admin_client

Key = tuple[int, int]  # (partition, offset)


class AckedProducer(threading.Thread):
    """Idempotent acks=all producer of unique values (b"000000042....") at `rate` records/s; `acked` holds what the
    broker acknowledged, by (partition, offset). Keys are the values' numbers, or with `keys` the number modulo
    `keys` (records of a compacted topic that replace each other)."""

    def __init__(self, bootstrap: str, topic: str, rate: int, value_bytes: int = 100,
                 keys: int | None = None) -> None:
        super().__init__(name=f"producer-{topic}", daemon=True)
        self.topic, self.rate, self.value_bytes, self.keys = topic, rate, value_bytes, keys
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 300_000, "reconnect.backoff.ms": 50,
                                  "reconnect.backoff.max.ms": 500, "error_cb": self._on_error})
        # A fatal error of an idempotent producer: OUT_OF_ORDER_SEQUENCE_NUMBER is the client seeing that the
        # broker lost records it had acknowledged. The producer stops there.
        self.fatal: str | None = None
        self.acked: dict[Key, bytes] = {}
        self.failed: Counter[str] = Counter()
        self.sent = 0
        self._lock = threading.Lock()
        self._halt = threading.Event()

    def _on_delivery(self, err, msg) -> None:
        with self._lock:
            if err is None:
                self.acked[(msg.partition(), msg.offset())] = msg.value()
            else:
                self.failed[err.name()] += 1

    def _on_error(self, err) -> None:
        if err.fatal():
            self.fatal = str(err)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def reached(self, count: int) -> bool:
        """`count` records acknowledged, or a fatal error (no more will be): a condition for wait_until."""
        return self.fatal is not None or self.acked_count() >= count

    def run(self) -> None:
        started = time.monotonic()
        while not self._halt.is_set() and self.fatal is None:
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due and not self._halt.is_set():
                value = f"{self.sent:09d}".encode().ljust(self.value_bytes, b".")
                key = value[:9] if self.keys is None else b"k%d" % (self.sent % self.keys)
                try:
                    self.producer.produce(self.topic, value=value, key=key, on_delivery=self._on_delivery)
                except BufferError:
                    self.producer.poll(0.05)
                    continue
                self.sent += 1
            self.producer.poll(0.01)

    def stop(self, flush_s: float = 120.0) -> int:
        """Stop producing and wait for the records in flight; returns how many stayed undelivered."""
        if self._halt.is_set():
            return 0
        self._halt.set()
        self.join(30)
        left = self.producer.flush(flush_s)
        if left:
            self.producer.purge()
            self.producer.flush(5)
        return left


class ShareLedger:
    """What share consumers saw: deliveries, and ACCEPTs the broker confirmed (with when)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deliveries: Counter[Key] = Counter()
        self.accepted_at: dict[Key, float] = {}  # ACCEPT confirmed by commit_sync, time.monotonic() of that
        self.redelivered_after_accept: list[tuple[Key, float, float]] = []  # (record, accepted at, delivered at)
        self.unconfirmed = 0

    def delivered(self, key: Key) -> None:
        now = time.monotonic()
        with self._lock:
            self.deliveries[key] += 1
            if key in self.accepted_at:
                self.redelivered_after_accept.append((key, self.accepted_at[key], now))

    def confirmed(self, keys: list[Key]) -> None:
        now = time.monotonic()
        with self._lock:
            for key in keys:
                self.accepted_at[key] = now

    def accepted_count(self) -> int:
        with self._lock:
            return len(self.accepted_at)


class AcceptingShareConsumer(threading.Thread):
    """A ShareConsumer with explicit acknowledgement: ACCEPTs every record and commits each poll's
    acknowledgements with commit_sync, whose per-partition result says which the broker confirmed."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ledger: ShareLedger) -> None:
        super().__init__(name=name, daemon=True)
        self.ledger = ledger
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                       "share.acknowledgement.mode": "explicit", "reconnect.backoff.max.ms": 500})
        self.consumer.subscribe([topic])
        self.errors: Counter[str] = Counter()
        self._halt = threading.Event()

    def run(self) -> None:
        c = self.consumer
        while not self._halt.is_set():
            try:
                msgs = c.poll(0.5)
            except KafkaException as err:
                self.errors[f"poll: {err.args[0].name()}"] += 1
                self._halt.wait(0.1)
                continue
            batch: list[Key] = []
            for m in msgs:
                if m.error() is not None:
                    self.errors[f"message: {m.error().name()}"] += 1
                    continue
                key = (m.partition(), m.offset())
                self.ledger.delivered(key)
                try:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                except Exception as err:  # noqa: BLE001 - no longer acquired: it comes back
                    self.errors[f"acknowledge: {type(err).__name__}"] += 1
                    continue
                batch.append(key)
            if not batch:
                continue
            try:
                result = c.commit_sync(10)
            except KafkaException as err:
                self.errors[f"commit: {err.args[0].name()}"] += 1
                self.ledger.unconfirmed += len(batch)
                continue
            ok = {tp.partition for tp, err in (result or {}).items() if err is None}
            self.ledger.confirmed([k for k in batch if k[0] in ok])
            self.ledger.unconfirmed += sum(1 for k in batch if k[0] not in ok)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        # ShareConsumer.close() takes no timeout and may hang (see bounded_close): closed in a daemon thread.
        closer = threading.Thread(target=self.consumer.close, daemon=True)
        closer.start()
        closer.join(30)


class TransactionsWorker(threading.Thread):
    """Transactions of 1-12 records over the topic's partitions, one in four aborted; values are
    b"TXN:I:N". `outcome[txn]` is (N, "committed" | "aborted" once the broker acknowledged the end, else
    "unknown"). After any error the producer is replaced by a new one with the same transactional.id (its
    InitProducerId ends what the old one left open)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, seed: int) -> None:
        super().__init__(name="transactions", daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.rng = random.Random(seed)
        self.outcome: dict[int, tuple[int, str]] = {}
        self.errors: Counter[str] = Counter()
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def _producer(self) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "powerloss-txn",
                         "transaction.timeout.ms": 20_000, "message.timeout.ms": 20_000,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "linger.ms": 2})

    def settled(self) -> int:
        with self._lock:
            return sum(1 for _n, state in self.outcome.values() if state != "unknown")

    def run(self) -> None:
        txn = 0
        while not self._halt.is_set():
            producer = self._producer()
            try:
                producer.init_transactions(15)
            except KafkaException as err:
                self.errors[f"init: {err.args[0].name()}"] += 1
                self._halt.wait(0.2)
                continue
            while not self._halt.is_set():
                txn += 1
                n, abort = self.rng.randint(1, 12), self.rng.random() < 0.25
                with self._lock:
                    self.outcome[txn] = (n, "unknown")
                try:
                    producer.begin_transaction()
                    for i in range(n):
                        producer.produce(self.topic, value=f"{txn}:{i}:{n}".encode(), partition=i % self.partitions)
                    if abort:
                        producer.abort_transaction(15)
                    else:
                        producer.commit_transaction(15)
                except KafkaException as err:
                    self.errors[f"txn: {err.args[0].name()}"] += 1
                    break
                with self._lock:
                    self.outcome[txn] = (n, "aborted" if abort else "committed")
            with contextlib.suppress(Exception):
                producer.purge()
                producer.flush(1)

    def stop(self) -> None:
        self._halt.set()
        self.join(60)


class OffsetCommitter(threading.Thread):
    """Commits growing offsets of a group (no subscription: a simple consumer's OffsetCommit) on each
    partition; `acked[p]` is the last commit the broker acknowledged, `attempted[p]` the highest sent. Commits
    are asynchronous and waited for by polling with a deadline (a synchronous commit can wait forever for a
    coordinator)."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int, seed: int) -> None:
        super().__init__(name="committer", daemon=True)
        self.topic, self.partitions = topic, partitions
        self.rng = random.Random(seed)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "reconnect.backoff.max.ms": 500, "on_commit": self._on_commit})
        self.acked: dict[int, int] = {}
        self.attempted: dict[int, int] = {}
        self.commits = 0
        self.errors: Counter[str] = Counter()
        self._sent = 0
        self._answered = 0
        self._next = dict.fromkeys(range(partitions), 0)
        self._halt = threading.Event()
        self.paused = threading.Event()
        self._idle = threading.Event()

    def _on_commit(self, err, partitions) -> None:  # served by poll() on this thread
        self._answered += 1
        if err is not None:
            self.errors[err.name()] += 1
            return
        for tp in partitions:
            if tp.topic == self.topic and tp.error is None:
                self.acked[tp.partition] = max(self.acked.get(tp.partition, -1), tp.offset)
                self.commits += 1

    def run(self) -> None:
        while not self._halt.is_set():
            if self.paused.is_set():
                self._idle.set()
                self._halt.wait(0.02)
                continue
            self._idle.clear()
            p = self.rng.randrange(self.partitions)
            offset = self._next[p] + self.rng.randint(1, 50)
            self._next[p] = offset
            self.attempted[p] = offset
            try:
                self.consumer.commit(offsets=[TopicPartition(self.topic, p, offset)], asynchronous=True)
            except KafkaException as err:
                self.errors[err.args[0].name()] += 1
                self._halt.wait(0.05)
                continue
            self._sent += 1
            deadline = time.monotonic() + 10
            while self._answered < self._sent and time.monotonic() < deadline and not self._halt.is_set():
                self.consumer.poll(0.05)

    def pause(self) -> None:
        """Stop after the commit in flight (its answer is waited for, up to its deadline)."""
        self._idle.clear()
        self.paused.set()
        self._idle.wait(60)

    def resume(self) -> None:
        self.paused.clear()

    def stop(self) -> None:
        self._halt.set()
        self.join(60)
        closer = threading.Thread(target=self.consumer.close, daemon=True)
        closer.start()
        closer.join(30)


class TopicAdmin(threading.Thread):
    """Creates topics (1-3 partitions; one in three creates reuses the name of a topic whose deletion was
    acknowledged), changes their retention.ms and deletes some, one request at a time; remembers what the
    broker acknowledged and what it was sent without an answer. A created topic gets one record on partition 0
    whose value is its topic id: a re-created topic must never show its predecessor's records."""

    def __init__(self, bootstrap: str, seed: int) -> None:
        super().__init__(name="topic-admin", daemon=True)
        self.admin = admin_client(bootstrap, **{"socket.timeout.ms": 10_000})
        # Its metadata requests must not re-create a deleted topic it wrote to.
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "message.timeout.ms": 10_000, "reconnect.backoff.max.ms": 500,
                                  "allow.auto.create.topics": False})
        self.rng = random.Random(seed)
        # The topic of each name as the broker acknowledged it: created (partitions), its id, its deletion.
        self.created: dict[str, int] = {}
        self.topic_ids: dict[str, str] = {}
        self.deleted: set[str] = set()
        self.delete_sent: set[str] = set()
        self.recreated: set[str] = set()  # names created again after an acknowledged deletion
        self.config_acked: dict[str, str] = {}  # last acknowledged retention.ms
        self.config_sent: dict[str, set[str]] = {}  # values sent since the last acknowledged one
        self.ops = 0
        self.creates = 0  # acknowledged
        self.errors: Counter[str] = Counter()
        self._halt = threading.Event()
        self.paused = threading.Event()
        self._idle = threading.Event()
        self._n = 0

    def _wait(self, future) -> bool:
        try:
            future.result(timeout=15)
            return True
        except Exception as err:  # noqa: BLE001 - KafkaException or a timeout: outcome unknown
            self.errors[type(err).__name__] += 1
            self._halt.wait(0.1)
            return False

    def live(self) -> list[str]:
        """Names whose creation was acknowledged and whose deletion was never sent."""
        return [t for t in self.created if t not in self.delete_sent]

    def _create(self) -> None:
        if self.deleted and self.rng.random() < 0.35:
            name = self.rng.choice(sorted(self.deleted))
            self.recreated.add(name)
        else:
            self._n += 1
            name = f"pl-topic-{self._n}"
        # What was acknowledged of an earlier topic of this name no longer holds, whatever this create gives.
        for table in (self.created, self.topic_ids, self.config_acked, self.config_sent):
            table.pop(name, None)
        self.deleted.discard(name)
        self.delete_sent.discard(name)
        partitions = self.rng.randint(1, 3)
        if not self._wait(self.admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)[name]):
            self.delete_sent.add(name)  # unknown: never checked, never altered
            return
        self.created[name] = partitions
        self.creates += 1
        try:
            described = self.admin.describe_topics(TopicCollection([name]))[name].result(timeout=10)
        except Exception as err:  # noqa: BLE001 - the broker went down: no id, no stamp
            self.errors[type(err).__name__] += 1
            return
        self.topic_ids[name] = str(described.topic_id)
        self.producer.produce(name, value=self.topic_ids[name].encode(), partition=0)
        self.producer.flush(12)

    def _step(self) -> None:
        live = self.live()
        roll = self.rng.random()
        if not live or roll < 0.45:
            self._create()
        elif roll < 0.85:
            name, value = self.rng.choice(live), str(self.rng.randint(60_000, 10**9))
            self.config_sent.setdefault(name, set()).add(value)
            resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
                ConfigEntry("retention.ms", value, incremental_operation=AlterConfigOpType.SET)])
            if self._wait(self.admin.incremental_alter_configs([resource])[resource]):
                self.config_acked[name] = value
                self.config_sent[name] = set()
        else:
            name = self.rng.choice(live)
            self.delete_sent.add(name)
            if self._wait(self.admin.delete_topics([name], operation_timeout=10)[name]):
                self.deleted.add(name)
        self.ops += 1

    def run(self) -> None:
        while not self._halt.is_set():
            if self.paused.is_set():
                self._idle.set()
                self._halt.wait(0.02)
                continue
            self._idle.clear()
            self._step()

    def pause(self) -> None:
        """Stop after the request in flight (its answer is waited for)."""
        self._idle.clear()
        self.paused.set()
        self._idle.wait(60)

    def resume(self) -> None:
        self.paused.clear()

    def stop(self) -> None:
        self._halt.set()
        self.join(60)
