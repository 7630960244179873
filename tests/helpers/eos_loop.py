"""An exactly-once consume-transform-produce loop with confluent-kafka, run as its own process so a test can kill
or restart the broker under it:

    python -m tests.helpers.eos_loop '{"bootstrap": ..., "input": ..., "output": ..., "group": ..., "tid": ...,
                                       "ends": {"0": 500, ...}, "progress": PATH, "hold_after": 3,
                                       "hold_at": "produced", "release": PATH, "timeout_ms": 10000}'

Each round polls a batch from `input` (read_committed, no auto commit), begins a transaction, produces every
record to the same partition of `output` as b"PARTITION:OFFSET:" + value.upper(), sends the consumer's
positions to the transaction and commits. On an abortable error it aborts and rewinds the consumer to the group's
committed offsets; on a fatal one (fenced) it makes a new producer with the same transactional id and rewinds;
on a retriable commit error it retries the commit. It exits 0 once a committed transaction carried the group to
`ends` on every partition.

Once `hold_after` transactions have committed, the next one stops once at `hold_at` ("produced": records
produced and flushed; "offsets": offsets sent too), writes {"event": "holding"} to the progress file and waits for
the `release` file to exist: the test kills the broker while that transaction is open. Every event is a JSON line
in the progress file (the test's way to synchronise with this process).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

# librdkafka >= 2.10 re-bootstraps as soon as its only broker is down (KIP-1102) and decommissions the broker it
# knew; a decommissioned broker left in the group coordinator cache makes send_offsets_to_transaction hang past
# its timeout (confluentinc/librdkafka#5511, fix in #5512, not released). A client bug, with Kafka too: the loop
# keeps its brokers instead.
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}


class Loop:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.ends = {int(p): int(o) for p, o in cfg["ends"].items()}
        self.progress = open(cfg["progress"], "a", buffering=1)  # noqa: SIM115 - lives as long as the loop
        self.committed: dict[int, int] = {}
        self.txns = 0
        self.held = False
        self.consumer = Consumer({
            "bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"], "isolation.level": "read_committed",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False,
            **NO_REBOOTSTRAP})
        self.consumer.subscribe([cfg["input"]])
        self.producer = self.new_producer()

    def report(self, event: str, **fields: object) -> None:
        self.progress.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")

    def new_producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.cfg["bootstrap"], "transactional.id": self.cfg["tid"],
                      "transaction.timeout.ms": self.cfg.get("timeout_ms", 10_000), "linger.ms": 5,
                      **NO_REBOOTSTRAP,
                      **({"debug": self.cfg["debug"]} if self.cfg.get("debug") else {})})
        p.init_transactions(60)
        self.report("producer", txns=self.txns)
        return p

    def hold(self, at: str) -> None:
        if self.held or self.txns < self.cfg.get("hold_after", -1) or self.cfg.get("hold_at") != at:
            return
        self.held = True
        self.report("holding", at=at, txns=self.txns)
        release = Path(self.cfg["release"])
        while not release.exists():  # the test creates it once the broker is back
            time.sleep(0.02)
        self.report("released", at=at)

    def rewind(self) -> None:
        """Back to the group's committed offsets: what the aborted transaction consumed is consumed again."""
        assignment = self.consumer.assignment()
        if not assignment:
            return
        to = {}
        for tp in self.consumer.committed(assignment, timeout=60):
            to[tp.partition] = offset = tp.offset if tp.offset >= 0 else 0
            try:
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as e:  # no longer assigned: a new assignment starts at the committed offset
                self.report("seek-failed", partition=tp.partition, error=str(e))
        self.report("rewound", to=to)

    def produce(self, msgs: list) -> None:
        for m in msgs:
            value = f"{m.partition()}:{m.offset()}:".encode() + m.value().upper()
            while True:
                try:
                    self.producer.produce(self.cfg["output"], key=m.key(), value=value, partition=m.partition())
                    break
                except BufferError:
                    self.producer.poll(0.05)
        self.producer.flush(60)

    def commit(self) -> None:
        while True:
            try:
                self.producer.commit_transaction(60)
                return
            except KafkaException as e:
                err: KafkaError = e.args[0]
                if err.retriable() and not err.txn_requires_abort() and not err.fatal():
                    self.report("commit-retry", error=str(err))
                    continue
                raise

    def round(self, msgs: list) -> None:
        positions = {}
        for m in msgs:
            positions[m.partition()] = m.offset() + 1
        self.producer.begin_transaction()
        self.produce(msgs)
        self.hold("produced")
        offsets = [TopicPartition(self.cfg["input"], p, o) for p, o in sorted(positions.items())]
        self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 60)
        self.hold("offsets")
        self.commit()
        self.txns += 1
        self.committed.update(positions)
        self.report("committed", txns=self.txns, records=len(msgs), committed=self.committed)

    def run(self) -> int:
        while self.committed != self.ends:
            msgs = [m for m in self.consumer.consume(self.cfg.get("batch", 100), 0.5) if m.error() is None]
            if not msgs:
                continue
            try:
                self.round(msgs)
            except KafkaException as e:
                err: KafkaError = e.args[0]
                self.report("error", error=str(err), fatal=err.fatal(), abortable=err.txn_requires_abort())
                if err.fatal():
                    self.producer = self.new_producer()
                else:
                    self.abort()
                self.rewind()
        self.report("done", txns=self.txns)
        self.producer.flush(30)
        self.consumer.close()
        return 0

    def abort(self) -> None:
        while True:
            try:
                self.producer.abort_transaction(60)
                self.report("aborted")
                return
            except KafkaException as e:
                err: KafkaError = e.args[0]
                self.report("abort-error", error=str(err), fatal=err.fatal())
                if err.fatal():
                    self.producer = self.new_producer()
                    return
                if not err.retriable():
                    raise


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(Loop(json.loads(sys.argv[1])).run())
