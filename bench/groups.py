"""Consumer group benchmarks: group formation, rebalance on leave, and group consume throughput next to
assigned-partition fetch, for the classic and consumer (KIP-848) protocols, in one run.

`python -m bench.groups` starts a Shoal broker (defaults: group.initial.rebalance.delay.ms=0) and measures with
confluent-kafka (librdkafka) Consumers in threads (librdkafka releases the GIL in poll):
 * formation: 10 members subscribe at once to a 10-partition topic that already holds records; seconds until
   every member has received its first record;
 * rebalance on leave: 5 members consume a steady stream on 10 partitions; one closes (LeaveGroup / leave
   heartbeat); seconds until the remaining members own all partitions, and until each of the leaver's
   partitions has delivered a record to another member;
 * rebalance on join: 4 members consume a steady stream on 10 partitions; a 5th subscribes; seconds until every
   member owns partitions and together they own all, and until the joiner has received a record;
 * throughput: N 1 KiB records on 4 partitions read by one Consumer with assign() (no group), records/s from the
   first record to the last; then by groups of 1 and 4 members of each protocol, formed first (at the end of
   the topic) and then rewound together, records/s from the rewind to the last record.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from bench.clients import create_topic, read, send
from bench.servers import running_servers

RECORD = b"x" * 1024
PROTOCOLS = ("classic", "consumer")


def produce(bootstrap: str, topic: str, partitions: int, records: int, value: bytes = RECORD) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 64_000})
    send(producer, topic, value, records, partitions)
    if producer.flush(120):
        raise RuntimeError("produce did not finish")


class Member(threading.Thread):
    """A group consumer in a thread. With a `gate`, it starts at the end of its partitions and, once the gate
    opens, seeks them to the beginning: a throughput run then starts with the group already formed."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str, batch: int = 1,
                 gate: threading.Event | None = None) -> None:
        super().__init__(daemon=True)
        conf: dict[str, str | int | bool] = {
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest" if gate is None else "latest", "enable.auto.commit": False}
        self.gate, self.rewound = gate, False
        if protocol == "classic":
            conf["heartbeat.interval.ms"] = 1000
        self.consumer = Consumer(conf)
        self.topic, self.batch = topic, batch
        self.count = 0
        self.first_at: float | None = None
        self.assigned: set[int] = set()
        self.assignments = 0  # assign callbacks: 1 when the group formed in one generation
        self.seen_partitions: dict[int, float] = {}  # partition -> first time a record of it arrived
        self.stop_flag = threading.Event()
        self.closed_at: float | None = None

    def _assign(self, consumer, partitions) -> None:
        self.assigned |= {tp.partition for tp in partitions}
        self.assignments += 1

    def _revoke(self, consumer, partitions) -> None:
        self.assigned -= {tp.partition for tp in partitions}

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke,
                                on_lost=self._revoke)
        while not self.stop_flag.is_set():
            if self.gate is not None and self.gate.is_set() and not self.rewound:
                for p in sorted(self.assigned):
                    self.consumer.seek(TopicPartition(self.topic, p, OFFSET_BEGINNING))
                self.rewound = True
            for msg in self.consumer.consume(self.batch, 0.1):
                if msg.error() is not None:
                    continue
                now = time.perf_counter()
                if self.first_at is None:
                    self.first_at = now
                partition = msg.partition()
                if partition is not None:  # a record's
                    self.seen_partitions.setdefault(partition, now)
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


def formation(bootstrap: str, protocol: str, members: int = 10) -> tuple[float, float]:
    """(seconds until every member has a record, assign callbacks per member)."""
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
    return done - start, sum(t.assignments for t in threads) / members


class Stream:
    """A steady trickle on every partition, so that moved partitions have new records to deliver."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 1})
        i = 0
        while not self.stop_flag.is_set():
            producer.produce(self.topic, b"s", partition=i % self.partitions)
            i += 1
            producer.poll(0)
            time.sleep(0.001)
        producer.flush(30)

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(30)


def _stable(threads: list[Member], partitions: int) -> bool:
    return sorted(p for t in threads for p in t.assigned) == list(range(partitions)) and all(t.assigned for t in threads)


def rebalance_on_leave(bootstrap: str, protocol: str, members: int = 5, partitions: int = 10) -> tuple[float, float]:
    topic = f"leave-{protocol}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions)
    group = f"leave-{uuid.uuid4().hex[:6]}"
    stream = Stream(bootstrap, topic, partitions)
    threads = [Member(bootstrap, group, topic, protocol) for _ in range(members)]
    for t in threads:
        t.start()
    try:
        wait(lambda: _stable(threads, partitions), 120, "a stable group")
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
        stream.stop()
        for t in threads:
            t.stop_flag.set()
        for t in threads:
            t.join(30)


def rebalance_on_join(bootstrap: str, protocol: str, members: int = 4, partitions: int = 10) -> tuple[float, float]:
    topic = f"join-{protocol}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions)
    group = f"join-{uuid.uuid4().hex[:6]}"
    stream = Stream(bootstrap, topic, partitions)
    threads = [Member(bootstrap, group, topic, protocol) for _ in range(members)]
    for t in threads:
        t.start()
    joiner = Member(bootstrap, group, topic, protocol)
    try:
        wait(lambda: _stable(threads, partitions), 120, "a stable group")
        start = time.perf_counter()
        joiner.start()
        everyone = [*threads, joiner]
        owned = wait(lambda: _stable(everyone, partitions), 120, "the joiner's partitions assigned")
        flowing = wait(lambda: joiner.first_at is not None, 120, "the joiner's first record")
        return owned - start, flowing - start
    finally:
        stream.stop()
        for t in [*threads, joiner]:
            t.stop_flag.set()
        for t in [*threads, joiner]:
            if t.is_alive():
                t.join(30)


def assigned_fetch(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}", "enable.auto.commit": False})
    try:
        _start, first = read(c, topic, partitions, records)
        return time.perf_counter() - first
    finally:
        c.close()


def group_consume(bootstrap: str, topic: str, protocol: str, members: int, records: int,
                  partitions: int) -> float:
    """Members form the group at the end of the topic; then all rewind at once and read it: the time from
    the rewind to the last record, with no rebalance inside it."""
    group = f"tp-{uuid.uuid4().hex[:6]}"
    gate = threading.Event()
    threads = [Member(bootstrap, group, topic, protocol, batch=10_000, gate=gate) for _ in range(members)]
    for t in threads:
        t.start()
    try:
        wait(lambda: _stable(threads, partitions), 120, "a stable group")
        first = time.perf_counter()
        gate.set()
        end = wait(lambda: sum(t.count for t in threads) >= records, 180, "group consume")
        if sum(t.count for t in threads) != records or not all(t.rewound for t in threads):
            raise RuntimeError("the group read records twice or missed its rewind")
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
    parser.add_argument("--initial-rebalance-delay-ms", type=int, default=None,
                        help="the broker's group.initial.rebalance.delay.ms (default: the broker's default, 0)")
    parser.add_argument("--formation-only", action="store_true", help="measure group formation only")
    parser.add_argument("--repeat", type=int, default=1, help="formation runs per protocol")
    args = parser.parse_args(argv)
    rows: list[dict] = []
    overrides = {} if args.initial_rebalance_delay_ms is None else {
        "group.initial.rebalance.delay.ms": str(args.initial_rebalance_delay_ms)}
    with running_servers(include_peers=False, overrides=overrides) as servers:
        bootstrap = servers["shoal"]
        for protocol in PROTOCOLS:
            for _ in range(args.repeat):
                seconds, assigns = formation(bootstrap, protocol)
                rows.append({"bench": "formation", "protocol": protocol, "members": 10, "seconds": round(seconds, 3),
                             "assignments_per_member": assigns, **overrides})
                print(f"formation       {protocol:8} 10 members: every member has a record after {seconds:.2f} s, "
                      f"{assigns:.1f} assignments per member", flush=True)
        if args.formation_only:
            return _write(rows, args.out)
        for protocol in PROTOCOLS:
            owned, flowing = rebalance_on_leave(bootstrap, protocol)
            rows.append({"bench": "rebalance on leave", "protocol": protocol, "members": 5,
                         "partitions_reassigned_s": round(owned, 3), "records_flowing_s": round(flowing, 3)})
            print(f"leave           {protocol:8} 5 -> 4 members: partitions reassigned after {owned:.2f} s, "
                  f"their records flowing after {flowing:.2f} s", flush=True)
        for protocol in PROTOCOLS:
            owned, flowing = rebalance_on_join(bootstrap, protocol)
            rows.append({"bench": "rebalance on join", "protocol": protocol, "members": 5,
                         "partitions_assigned_s": round(owned, 3), "joiner_first_record_s": round(flowing, 3)})
            print(f"join            {protocol:8} 4 -> 5 members: every member assigned after {owned:.2f} s, "
                  f"the joiner's first record after {flowing:.2f} s", flush=True)
        topic = f"tp-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, 4)
        produce(bootstrap, topic, 4, args.records)
        seconds = assigned_fetch(bootstrap, topic, 4, args.records)
        rows.append({"bench": "throughput", "mode": "assigned fetch", "members": 1, "seconds": seconds})
        for protocol in PROTOCOLS:
            for members in (1, 4):
                seconds = group_consume(bootstrap, topic, protocol, members, args.records, 4)
                rows.append({"bench": "throughput", "mode": f"group ({protocol})", "members": members,
                             "seconds": seconds})
    for row in rows:
        if row["bench"] == "throughput":
            row["records"] = args.records
            row["records_s"] = round(args.records / row["seconds"])
            row["mib_s"] = round(args.records * len(RECORD) / row["seconds"] / 2**20, 1)
            print(f"throughput      {row['mode']:18} members={row['members']} {row['records_s']:>8} rec/s "
                  f"{row['mib_s']:7.1f} MiB/s")
    return _write(rows, args.out)


def _write(rows: list[dict], out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"groups-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(rows, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
