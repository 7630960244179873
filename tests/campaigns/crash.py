"""Crash campaign: kill -9 a real broker again and again under acks=all idempotent produce and share consumers.

    python -m tests.campaigns.crash [--cycles 50] [--rate 2000] [--consumers 2] [--seed 1] [--keep]

A broker process (`python -m broker`, one fixed loopback port so clients reconnect across restarts), a confluent
idempotent Producer (acks=all) in a thread writing unique values at `rate` records/s, and confluent ShareConsumers
(explicit acknowledgement) in threads accepting records and rejecting one in `reject_every` (rejected records
are archived into the group's dead-letter topic, KIP-1191). Each cycle waits until new records were acknowledged
to the producer and to the consumers, runs a random extra while, then SIGKILLs the broker and starts it again.

Afterwards the producer stops, the consumers drain until the share-partition start offset (ReadShareGroupState-
Summary) reaches the end of every partition, and the broker is killed and restarted once more. Then:
- lost: records whose delivery callback succeeded that are not in the log at their offset with their value;
- unreadable: every partition is read from its start to its end (any gap, error or missing record counts);
- share accounting: every record of the log is terminal (start offset = end offset, also after the restart);
  archived = distinct records in the dead-letter topic, accepted = produced - archived; a record whose ACCEPT
  the broker confirmed is never archived nor delivered again, a confirmed REJECT is in the dead-letter topic.
The broker's log must hold no error and no plain-text line (a traceback). `report["ok"]` says whether every check
holds.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.campaigns import run_and_report
from tests.fuzz.harness import scan_log
from tests.helpers.broker_process import BrokerProcess, free_port
from tests.helpers.confluent_clients import admin_client
from tests.helpers.proc_stats import open_fds, rss_mib
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

TOPIC, GROUP, DLQ = "crash", "crash-share", "dlq.crash"
READ_SHARE_GROUP_STATE_SUMMARY, METADATA = 87, 3
Key = tuple[int, int]  # (partition, offset)


class ProducerThread(threading.Thread):
    """acks=all idempotent producer of unique values ("000000042"); remembers what the broker acknowledged."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        super().__init__(name="crash-producer", daemon=True)
        self.rate = rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 300_000, "reconnect.backoff.ms": 50,
                                  "reconnect.backoff.max.ms": 500, "client.id": "crash-producer"})
        self.acked: dict[Key, bytes] = {}
        self.failed: Counter[str] = Counter()
        self.sent = 0
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def _on_delivery(self, err, msg) -> None:
        with self._lock:
            if err is None:
                self.acked[(msg.partition(), msg.offset())] = msg.value()
            else:
                self.failed[err.name() if hasattr(err, "name") else str(err)] += 1

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def run(self) -> None:
        p = self.producer
        started = time.monotonic()
        while not self._halt.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due and not self._halt.is_set():
                value = f"{self.sent:09d}".encode()
                try:
                    p.produce(TOPIC, value=value, key=value, on_delivery=self._on_delivery)
                except BufferError:
                    p.poll(0.05)
                    continue
                self.sent += 1
            p.poll(0.01)

    def stop(self, flush_s: float = 120.0) -> int:
        """Stop producing, wait for the outstanding records; returns how many stayed undelivered."""
        self._halt.set()
        self.join(30)
        left = self.producer.flush(flush_s)
        if left:
            self.producer.purge()
            self.producer.flush(5)
        return left


class ShareConsumerThread(threading.Thread):
    """Explicit acknowledgement: ACCEPT, or REJECT when the value is a multiple of `reject_every`; each poll's
    acknowledgements are committed with commit_sync, whose per-partition result says which the broker confirmed."""

    def __init__(self, name: str, bootstrap: str, ledger: ShareLedger, reject_every: int) -> None:
        super().__init__(name=name, daemon=True)
        self.ledger = ledger
        self.reject_every = reject_every
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": name,
                                       "share.acknowledgement.mode": "explicit",
                                       "reconnect.backoff.max.ms": 500})
        self.consumer.subscribe([TOPIC])
        self.errors: Counter[str] = Counter()
        self._halt = threading.Event()

    def run(self) -> None:
        c = self.consumer
        while not self._halt.is_set():
            try:
                msgs = c.poll(0.5)
            except KafkaException as err:
                self.errors[f"poll: {err.args[0].name()}"] += 1
                time.sleep(0.1)
                continue
            batch: list[tuple[Key, int]] = []
            for m in msgs:
                if m.error() is not None:
                    self.errors[f"message: {m.error().name()}"] += 1
                    continue
                key = (m.partition(), m.offset())
                kind = AcknowledgeType.REJECT if int(m.value()) % self.reject_every == 0 else AcknowledgeType.ACCEPT
                self.ledger.delivered(key, m.delivery_count())
                try:
                    c.acknowledge(m, kind)
                except Exception as err:  # noqa: BLE001 - the record is no longer acquired: it comes back
                    self.errors[f"acknowledge: {type(err).__name__}"] += 1
                    continue
                batch.append((key, kind))
            if not batch:
                continue
            try:
                result = c.commit_sync(10)
            except KafkaException as err:
                self.errors[f"commit: {err.args[0].name()}"] += 1
                self.ledger.unconfirmed(batch)
                continue
            confirmed = {tp.partition for tp, err in (result or {}).items() if err is None}
            for err in (result or {}).values():
                if err is not None:
                    self.errors[f"commit partition: {err}"[:80]] += 1
            self.ledger.confirmed([b for b in batch if b[0][0] in confirmed])
            self.ledger.unconfirmed([b for b in batch if b[0][0] not in confirmed])

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        with contextlib.suppress(Exception):
            self.consumer.close()


class ShareLedger:
    """What the share consumers saw: deliveries, and acknowledgements the broker confirmed or did not."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deliveries: Counter[Key] = Counter()
        self.accepted: set[Key] = set()  # ACCEPT confirmed
        self.rejected: set[Key] = set()  # REJECT confirmed
        self.unconfirmed_acks = 0
        self.redelivered_after_accept: list[Key] = []  # delivered again after a confirmed ACCEPT
        self.redelivered_after_reject: list[Key] = []
        self.max_delivery_count = 0

    def delivered(self, key: Key, delivery_count: int) -> None:
        with self._lock:
            self.deliveries[key] += 1
            self.max_delivery_count = max(self.max_delivery_count, delivery_count)
            if key in self.accepted:
                self.redelivered_after_accept.append(key)
            if key in self.rejected:
                self.redelivered_after_reject.append(key)

    def confirmed(self, batch: list[tuple[Key, int]]) -> None:
        with self._lock:
            for key, kind in batch:
                (self.accepted if kind == AcknowledgeType.ACCEPT else self.rejected).add(key)

    def unconfirmed(self, batch: list[tuple[Key, int]]) -> None:
        with self._lock:
            self.unconfirmed_acks += len(batch)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.accepted) + len(self.rejected)


class CrashCampaign:
    def __init__(self, tmp: Path, *, cycles: int, rate: int = 2000, consumers: int = 2, partitions: int = 3,
                 reject_every: int = 20, seed: int = 1, python: str | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.tmp = tmp
        self.cycles = cycles
        self.rate = rate
        self.n_consumers = consumers
        self.partitions = partitions
        self.reject_every = reject_every
        self.rng = random.Random(seed)
        self.progress = progress or (lambda _line: None)
        port = free_port()
        self.broker = BrokerProcess(tmp / "data", tmp / "broker.log", python=python, overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "errors.deadletterqueue.auto.create.topics.enable": "true"})
        self.bootstrap = f"127.0.0.1:{port}"
        self.samples: list[tuple[float, int]] = []  # (RSS MiB, fds) after each restart

    def close(self, keep: bool = False) -> None:
        self.broker.stop()
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # --- running -----------------------------------------------------------------------------------------------
    def _start_broker(self) -> float:
        t0 = time.monotonic()
        for attempt in range(20):  # the fixed port may be held for a moment by the killed process's sockets
            try:
                self.broker.start()
                break
            except RuntimeError:
                if attempt == 19:
                    raise
                time.sleep(0.5)
        return time.monotonic() - t0

    def _set_up(self) -> None:
        admin = admin_client(self.bootstrap)
        admin.create_topics([NewTopic(TOPIC, self.partitions, 1)])[TOPIC].result(30)
        for name, value in (("share.auto.offset.reset", "earliest"), ("errors.deadletterqueue.topic.name", DLQ)):
            resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([resource])[resource].result(30)

    def run(self) -> dict[str, Any]:
        self._start_broker()
        self._set_up()
        ledger = ShareLedger()
        producer = ProducerThread(self.bootstrap, self.rate)
        consumers = [ShareConsumerThread(f"crash-share-{i}", self.bootstrap, ledger, self.reject_every)
                     for i in range(self.n_consumers)]
        producer.start()
        for c in consumers:
            c.start()
        restarts: list[float] = []
        t0 = time.monotonic()
        try:
            for cycle in range(1, self.cycles + 1):
                acked, shared = producer.acked_count(), ledger.acked_count()
                # Traffic flows again after the last restart: new records acknowledged to both kinds of client.
                wait_until(lambda a=acked, s=shared: producer.acked_count() > a + 50 and ledger.acked_count() > s,
                         120, f"traffic in cycle {cycle}")
                time.sleep(self.rng.uniform(0.2, 2.0))
                self.broker.kill9()
                restarts.append(self._start_broker())
                self.samples.append((rss_mib(self.broker.pid), open_fds(self.broker.pid)))
                self.progress(f"  cycle {cycle}/{self.cycles}: {producer.acked_count()} records acknowledged, "
                              f"{ledger.acked_count()} share acknowledgements confirmed, restart "
                              f"{restarts[-1]:.1f} s")
            undelivered = producer.stop()
            ends = self._wait_for_share_state(self._end_offsets(), 300)
        finally:
            producer._halt.set()
            for c in consumers:
                c.stop()
        seconds = time.monotonic() - t0
        # A last kill -9: the state read below is what a restart recovers.
        self.broker.kill9()
        self._start_broker()
        return self._report(producer, undelivered, consumers, ledger, ends, restarts, seconds)

    def _end_offsets(self) -> dict[int, int]:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "crash-reader"})
        try:
            return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                    for p in range(self.partitions)}
        finally:
            c.close()

    def _topic_id(self) -> uuid.UUID:
        with RawClient(self.broker.port) as raw:
            meta = raw.call(METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": TOPIC}],
                                           "allow_auto_topic_creation": False})
        return meta.topics[0].topic_id

    def share_start_offsets(self) -> dict[int, int]:
        """The share-partition start offsets the share coordinator holds (ReadShareGroupStateSummary)."""
        with RawClient(self.broker.port) as raw:
            resp = raw.call(READ_SHARE_GROUP_STATE_SUMMARY, 1, {"group_id": GROUP, "topics": [
                {"topic_id": self._topic_id(),
                 "partitions": [{"partition": p, "leader_epoch": 0} for p in range(self.partitions)]}]})
        out = {}
        for result in resp.results:
            for p in result.partitions:
                out[p.partition] = p.start_offset if p.error_code == 0 else -1
        return out

    def _wait_for_share_state(self, ends: dict[int, int], timeout: float) -> dict[int, int]:
        """Until every record is acknowledged or archived (the start offset reached the end of each partition)."""
        last: dict[int, int] = {}

        def complete() -> bool:
            nonlocal last
            with contextlib.suppress(Exception):
                last = self.share_start_offsets()
            return all(last.get(p, -1) >= end for p, end in ends.items())

        try:
            wait_until(complete, timeout, "the share consumers to finish", interval=1.0)
        except AssertionError:  # wait_until's timeout
            self.progress(f"  share state incomplete: start offsets {last}, ends {ends}")
        return ends

    # --- checking ----------------------------------------------------------------------------------------------
    def read_topic(self, topic: str, ends: dict[int, int], timeout: float = 300) -> tuple[dict[Key, Any], int]:
        """Every record from offset 0 to the end of each partition: ({(partition, offset): message}, errors)."""
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "enable.partition.eof": False})
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        out: dict[Key, Any] = {}
        errors = 0
        want = sum(ends.values())
        end = time.monotonic() + timeout
        try:
            while len(out) < want and time.monotonic() < end:
                for m in c.consume(10_000, 0.5):
                    if m.error() is not None:
                        errors += 1
                    else:
                        out[(m.partition(), m.offset())] = (m.value(), m.headers())
        finally:
            c.close()
        return out, errors

    def _report(self, producer: ProducerThread, undelivered: int, consumers: list[ShareConsumerThread],
                ledger: ShareLedger, ends: dict[int, int], restarts: list[float], seconds: float) -> dict[str, Any]:
        ends_after = self._end_offsets()
        log, read_errors = self.read_topic(TOPIC, ends_after)
        values = {key: value for key, (value, _) in log.items()}
        lost = [k for k, v in producer.acked.items() if values.get(k) != v]
        gaps = sum(ends_after.values()) - len(log)
        duplicates = sum(n - 1 for n in Counter(values.values()).values() if n > 1)
        starts = self.share_start_offsets()
        dlq_ends = {}
        with contextlib.suppress(Exception):
            dlq_meta = admin_client(self.bootstrap).list_topics(DLQ, timeout=30)
            dlq_partitions = list(dlq_meta.topics[DLQ].partitions) if DLQ in dlq_meta.topics else []
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "crash-reader"})
            dlq_ends = {p: c.get_watermark_offsets(TopicPartition(DLQ, p), timeout=30)[1] for p in dlq_partitions}
            c.close()
        dlq, dlq_errors = self.read_topic(DLQ, dlq_ends) if dlq_ends else ({}, 0)
        archived: set[Key] = set()
        dlq_copies = 0  # DLQ records of TOPIC: at least one per archived offset, more after a crash (at-least-once)
        for _, headers in dlq.values():
            h = {k: v.decode() for k, v in headers or ()}
            if h.get("__dlq.errors.topic") == TOPIC:
                archived.add((int(h["__dlq.errors.partition"]), int(h["__dlq.errors.offset"])))
                dlq_copies += 1
        produced = len(log)
        accepted = produced - len(archived & set(log))
        never_delivered = [k for k in log if k not in ledger.deliveries]
        incomplete = {p: (starts.get(p), end) for p, end in ends_after.items() if starts.get(p, -1) < end}
        accepted_then_archived = sorted(ledger.accepted & archived)
        rejected_not_archived = sorted(ledger.rejected - archived)
        share = {
            "produced": produced, "accepted": accepted, "archived": len(archived),
            "archived_outside_log": len(archived - set(log)), "dlq_records": len(dlq),
            "dlq_duplicates": dlq_copies - len(archived),
            "accepted_confirmed": len(ledger.accepted), "rejected_confirmed": len(ledger.rejected),
            "accepted_unconfirmed_never_redelivered": accepted - len(ledger.accepted - archived),
            "unconfirmed_acknowledgements": ledger.unconfirmed_acks,
            "deliveries": sum(ledger.deliveries.values()), "records_delivered": len(ledger.deliveries),
            "never_delivered": len(never_delivered), "max_delivery_count": ledger.max_delivery_count,
            "incomplete_partitions": incomplete,
            "redelivered_after_confirmed_accept": len(ledger.redelivered_after_accept),
            "redelivered_after_confirmed_reject": len(ledger.redelivered_after_reject),
            "confirmed_accept_archived": len(accepted_then_archived),
            "confirmed_reject_not_archived": len(rejected_not_archived),
        }
        report = {
            "cycles": len(restarts), "seconds": round(seconds), "restart_s_max": round(max(restarts, default=0), 1),
            "records": {"sent": producer.sent, "acked": len(producer.acked), "lost": len(lost),
                        "undelivered_at_stop": undelivered, "delivery_errors": dict(producer.failed),
                        "in_log": produced, "duplicate_values_in_log": duplicates},
            "log": {"partitions": ends_after, "read_errors": read_errors, "missing_offsets": gaps,
                    "end_offsets_before_last_restart": ends},
            "share": share,
            "consumer_errors": dict(sum((c.errors for c in consumers), Counter())),
            "broker": {"rss_mib_max": round(max((s[0] for s in self.samples), default=0)),
                       "fds_max": max((s[1] for s in self.samples), default=0),
                       "exit_codes": Counter(self.broker.returncodes)},
            "examples": {"lost": lost[:5], "accepted_then_archived": accepted_then_archived[:5],
                         "redelivered_after_accept": ledger.redelivered_after_accept[:5],
                         "rejected_not_archived": rejected_not_archived[:5]},
        }
        report["log_problems"], report["log_warnings"] = scan_log(self.broker.log_path)
        report["ok"] = (not report["log_problems"] and not lost and not read_errors and gaps == 0 and not incomplete and not never_delivered
                        and accepted + len(archived & set(log)) == produced and not share["archived_outside_log"]
                        and not accepted_then_archived and not rejected_not_archived
                        and not ledger.redelivered_after_accept and not ledger.redelivered_after_reject)
        return report


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import tempfile

    ap = argparse.ArgumentParser(prog="python -m tests.campaigns.crash", description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=50)
    ap.add_argument("--rate", type=int, default=2000, help="records per second produced")
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the broker's data directory and log")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="shoal-crash-"))
    campaign = CrashCampaign(tmp, cycles=args.cycles, rate=args.rate, consumers=args.consumers,
                             partitions=args.partitions, seed=args.seed, python=sys.executable,
                             progress=lambda line: print(line, flush=True))
    print(f"crash campaign: {args.cycles} kill -9 cycles, {args.rate} records/s, {args.consumers} share consumers; "
          f"broker log {campaign.broker.log_path}", flush=True)
    return run_and_report(campaign, tmp, keep=args.keep)


if __name__ == "__main__":
    raise SystemExit(main())
