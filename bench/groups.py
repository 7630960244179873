"""Consumer group benchmarks: group formation, rebalance on leave, and group consume throughput next to
assigned-partition fetch, for the classic and consumer (KIP-848) protocols, in one run.

`python -m bench.groups` starts a Shoal broker (defaults: group.initial.rebalance.delay.ms=0) and measures with
confluent-kafka (librdkafka) Consumers in threads (librdkafka releases the GIL in poll):
 * formation: 10 members subscribe at once to a 10-partition topic that already holds records; seconds until
   every member has received its first record;
 * rebalance on leave: 5 members consume a steady stream on 10 partitions; one closes (LeaveGroup / leave
   heartbeat); seconds until the remaining members own all partitions, and until each of the leaver's
   partitions has delivered a record to another member;
 * throughput: N 1 KiB records on 4 partitions read by one Consumer with assign() (no group), then by groups of
   1 and 4 members of each protocol; records/s from the first record to the last.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.servers import running_servers

RECORD = b"x" * 1024
PROTOCOLS = ("classic", "consumer")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=30)


def produce(bootstrap: str, topic: str, partitions: int, records: int, value: bytes = RECORD) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 64_000})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("produce did not finish")


class Member(threading.Thread):
    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str, batch: int = 1) -> None:
        super().__init__(daemon=True)
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if protocol == "classic":
            conf["heartbeat.interval.ms"] = 1000
        self.consumer = Consumer(conf)
        self.topic, self.batch = topic, batch
        self.count = 0
        self.first_at: float | None = None
        self.assigned: set[int] = set()
        self.seen_partitions: dict[int, float] = {}  # partition -> first time a record of it arrived
        self.stop_flag = threading.Event()
        self.closed_at: float | None = None

    def _assign(self, consumer, partitions) -> None:
        self.assigned |= {tp.partition for tp in partitions}

    def _revoke(self, consumer, partitions) -> None:
        self.assigned -= {tp.partition for tp in partitions}

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke,
                                on_lost=self._revoke)
        while not self.stop_flag.is_set():
            for msg in self.consumer.consume(self.batch, 0.1):
                if msg.error() is not None:
                    continue
                now = time.perf_counter()
                if self.first_at is None:
                    self.first_at = now
                self.seen_partitions.setdefault(msg.partition(), now)
                self.count += 1
        self.consumer.close()
        self.closed_at = time.perf_counter()


def wait(condition, timeout: float, what: str) -> float:
    end = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > end:
            raise RuntimeError(f"timed out: {what}")
        time.sleep(0.005)
    return time.perf_counter()


def formation(bootstrap: str, protocol: str, members: int = 10) -> float:
    topic = f"form-{protocol}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, members)
    produce(bootstrap, topic, members, members * 20, b"f")
    group = f"form-{uuid.uuid4().hex[:6]}"
    threads = [Member(bootstrap, group, topic, protocol) for _ in range(members)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    try:
        done = wait(lambda: all(t.first_at is not None for t in threads), 120, "every member's first record")
    finally:
        for t in threads:
            t.stop_flag.set()
        for t in threads:
            t.join(30)
    return done - start


def rebalance_on_leave(bootstrap: str, protocol: str, members: int = 5, partitions: int = 10) -> tuple[float, float]:
    topic = f"leave-{protocol}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions)
    group = f"leave-{uuid.uuid4().hex[:6]}"
    stop = threading.Event()

    def stream() -> None:  # a steady trickle so that every partition has new records after the leave
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        i = 0
        while not stop.is_set():
            producer.produce(topic, b"s", partition=i % partitions)
            i += 1
            producer.poll(0)
            time.sleep(0.001)
        producer.flush(30)

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    threads = [Member(bootstrap, group, topic, protocol) for _ in range(members)]
    for t in threads:
        t.start()
    try:
        wait(lambda: sorted(p for t in threads for p in t.assigned) == list(range(partitions))
             and all(t.assigned for t in threads), 120, "a stable group")
        leaver, rest = threads[0], threads[1:]
        moved = set(leaver.assigned)
        for t in rest:
            t.seen_partitions.clear()
        start = time.perf_counter()
        leaver.stop_flag.set()
        owned = wait(lambda: sorted(p for t in rest for p in t.assigned) == list(range(partitions)), 120,
                     "the leaver's partitions reassigned")
        flowing = wait(lambda: moved <= {p for t in rest for p, at in list(t.seen_partitions.items())
                                         if at > start}, 120, "records of the leaver's partitions consumed again")
        return owned - start, flowing - start
    finally:
        stop.set()
        for t in threads:
            t.stop_flag.set()
        for t in threads:
            t.join(30)
        streamer.join(30)


def assigned_fetch(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, first = 0, None
    deadline = time.perf_counter() + 180
    try:
        while seen < records:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"assigned fetch stalled at {seen}/{records}")
            got = sum(1 for m in c.consume(10_000, 0.5) if m.error() is None)
            if got and first is None:
                first = time.perf_counter()
            seen += got
    finally:
        c.close()
    return time.perf_counter() - first


def group_consume(bootstrap: str, topic: str, protocol: str, members: int, records: int) -> float:
    group = f"tp-{uuid.uuid4().hex[:6]}"
    threads = [Member(bootstrap, group, topic, protocol, batch=10_000) for _ in range(members)]
    for t in threads:
        t.start()
    try:
        end = wait(lambda: sum(t.count for t in threads) >= records, 180, "group consume")
        first = min(t.first_at for t in threads if t.first_at is not None)
    finally:
        for t in threads:
            t.stop_flag.set()
        for t in threads:
            t.join(30)
    return end - first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.groups")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    rows: list[dict] = []
    with running_servers(include_peers=False) as servers:
        bootstrap = servers["shoal"]
        for protocol in PROTOCOLS:
            seconds = formation(bootstrap, protocol)
            rows.append({"bench": "formation", "protocol": protocol, "members": 10, "seconds": round(seconds, 3)})
            print(f"formation       {protocol:8} 10 members: every member has a record after {seconds:.2f} s",
                  flush=True)
        for protocol in PROTOCOLS:
            owned, flowing = rebalance_on_leave(bootstrap, protocol)
            rows.append({"bench": "rebalance on leave", "protocol": protocol, "members": 5,
                         "partitions_reassigned_s": round(owned, 3), "records_flowing_s": round(flowing, 3)})
            print(f"leave           {protocol:8} 5 -> 4 members: partitions reassigned after {owned:.2f} s, "
                  f"their records flowing after {flowing:.2f} s", flush=True)
        topic = f"tp-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, 4)
        produce(bootstrap, topic, 4, args.records)
        seconds = assigned_fetch(bootstrap, topic, 4, args.records)
        rows.append({"bench": "throughput", "mode": "assigned fetch", "members": 1, "seconds": seconds})
        for protocol in PROTOCOLS:
            for members in (1, 4):
                seconds = group_consume(bootstrap, topic, protocol, members, args.records)
                rows.append({"bench": "throughput", "mode": f"group ({protocol})", "members": members,
                             "seconds": seconds})
    for row in rows:
        if row["bench"] == "throughput":
            row["records"] = args.records
            row["records_s"] = round(args.records / row["seconds"])
            row["mib_s"] = round(args.records * len(RECORD) / row["seconds"] / 2**20, 1)
            print(f"throughput      {row['mode']:18} members={row['members']} {row['records_s']:>8} rec/s "
                  f"{row['mib_s']:7.1f} MiB/s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"groups-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(rows, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
