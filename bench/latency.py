"""End-to-end latency (and drain throughput) with the producer and the consumers in separate processes.

A producer process sends records at a fixed rate (acks=all; Shoal fsyncs before it answers) and writes into each
value the CLOCK_MONOTONIC time of its produce() call (one clock for every process on the host) and whether the
record is measured (records of the first `warmup` seconds are not). A consumer process runs `members` consumers
(threads: librdkafka and our socket reads release the GIL) of one kind and takes `now - sent` for every measured
record it receives. The same consumer process, started on a topic filled beforehand, measures drain throughput:
records received from the first to the last, group join outside it.

Consumer kinds:
- "assign": a confluent Consumer assigned every partition from offset 0 (no group).
- "group": confluent Consumers in one classic consumer group (subscribe, auto.offset.reset=earliest).
- "share": confluent ShareConsumers in one share group, implicit acknowledgement.
- "shoal-share": shoal_client ShareGroupMembers, ACCEPT riding on the next ShareFetch; its ShareFetch MaxWaitMs is
  `max_wait_ms` (the long-poll figure uses a large one: a record must wake the waiting ShareFetch).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event as EventType

HEADER = struct.Struct("<qB")  # sent-at CLOCK_MONOTONIC ns, measured flag
SPAWN = mp.get_context("spawn")
KINDS = ("assign", "group", "share", "shoal-share")
# the kinds the members part (python -m bench) sets side by side, as its tables and charts label them
MEMBER_KINDS = {"group": "classic group", "share": "share (ShareConsumer)", "shoal-share": "share (shoal_client)"}
SHARE_KINDS = ("share", "shoal-share")  # the kinds that read as members of a share group


def make_value(size: int, measured: bool, pad: bytes) -> bytes:
    return HEADER.pack(time.monotonic_ns(), measured) + pad


def percentiles(samples_us: list[float]) -> dict[str, float]:
    """p50/p99/p99.9/max in milliseconds (nearest rank)."""
    if not samples_us:
        return {"p50_ms": float("nan"), "p99_ms": float("nan"), "p999_ms": float("nan"), "max_ms": float("nan")}
    s = sorted(samples_us)

    def rank(q: float) -> float:
        return s[min(len(s) - 1, max(0, int(q * len(s) + 0.5) - 1))] / 1000

    return {"p50_ms": round(rank(0.50), 3), "p99_ms": round(rank(0.99), 3), "p999_ms": round(rank(0.999), 3),
            "max_ms": round(s[-1] / 1000, 3)}


# ---- producer process -------------------------------------------------------------------------------------------

def produce_at_rate(bootstrap: str, topic: str, partitions: int, rate: float, seconds: float, warmup: float,
                    size: int, out: mp.Queue) -> None:
    """Send rate*(warmup+seconds) records on a fixed schedule, round-robin over the partitions; puts a summary."""
    from confluent_kafka import Producer

    from bench.clients import produce_with_room

    # At most 5 requests in flight (the Java producer's default; librdkafka's is 1 000 000): with unbounded
    # pipelining of 1 ms batches, every tiny request waits for its own turn and fsync and the queue grows.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1, "log_level": 3,
                         "max.in.flight": 5, "queue.buffering.max.kbytes": 1_048_576})
    errors: list = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))

    pad = b"x" * max(0, size - HEADER.size)
    total, warm = int(rate * (warmup + seconds)), int(rate * warmup)
    start = time.monotonic()
    for i in range(total):
        due = start + i / rate
        while (wait := due - time.monotonic()) > 0.0002:
            producer.poll(wait)  # serves delivery callbacks while it waits; returns early after one
        produce_with_room(producer, topic, make_value(size, i >= warm, pad), backoff_s=0.001,
                          partition=i % partitions, on_delivery=on_delivery)
    sent_s = time.monotonic() - start
    remaining = producer.flush(60)
    out.put({"sent": total, "measured": total - warm, "achieved_rate": round(total / sent_s),
             "undelivered": remaining, "errors": errors[:3]})


def fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    """Produce `records` measured records as fast as the client goes (for drain throughput)."""
    from confluent_kafka import Producer

    from bench.clients import send

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576})
    send(producer, topic, make_value(size, True, b"x" * max(0, size - HEADER.size)), records, partitions)
    if producer.flush(120):
        raise RuntimeError("fill did not finish")


# ---- consumer process -------------------------------------------------------------------------------------------

@dataclass
class _Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies_us: list[float] = field(default_factory=list)
    received: int = 0
    first: float | None = None
    first_batch: int = 0  # records of the first batch: they arrived before `first`, outside the drain window
    last: float = 0.0

    def add(self, values: list[bytes]) -> int:
        now = time.monotonic_ns()
        lats = [(now - sent) / 1000 for sent, measured in (HEADER.unpack_from(v) for v in values) if measured]
        t = time.perf_counter()
        with self.lock:
            self.latencies_us.extend(lats)
            self.received += len(lats)
            if self.first is None:
                self.first, self.first_batch = t, len(lats)
            self.last = t
            return self.received


def _confluent_loop(kind: str, bootstrap: str, topic: str, partitions: int, group: str, ready: Callable[[], None],
                    stop: threading.Event, tally: _Tally, expected: int) -> None:
    from confluent_kafka import Consumer, Message, ShareConsumer, TopicPartition

    common = {"bootstrap.servers": bootstrap, "fetch.wait.max.ms": 500, "log_level": 3}
    c: ShareConsumer | Consumer
    poll: Callable[[float], Iterable[Message]]
    if kind == "share":
        # Up to 10 000 records per poll, as the classic loop's consume(10_000, 0) below.
        share = c = ShareConsumer({**common, "group.id": group, "share.acknowledgement.mode": "implicit",
                                   "max.poll.records": 10_000})
        share.subscribe([topic])
        poll = share.poll
    else:
        # fetch.queue.backoff.ms: once a partition's local queue holds queued.min.messages (100 000), librdkafka
        # waits this long (default 1 000 ms) before it fetches that partition again. A fast server fills the queue
        # of a 100 B cell before Python drains it, and that stall made up most of the cell's time (177 k records/s
        # against 1.2 M without it); a short backoff still bounds the queue. (ShareConsumer refuses the setting.)
        classic = c = Consumer({**common, "group.id": group, "enable.auto.commit": False,
                                "auto.offset.reset": "earliest", "fetch.max.bytes": 52_428_800,
                                "fetch.queue.backoff.ms": 10})
        if kind == "assign":
            classic.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        else:
            classic.subscribe([topic])

        def poll_classic(timeout: float) -> list[Message]:
            # consume(n, t) waits for n records or t: wait for one, then take what is already queued.
            first = classic.poll(timeout)
            return [] if first is None else [first, *classic.consume(10_000, 0)]

        poll = poll_classic
    try:
        signalled = False
        while not stop.is_set():
            msgs = poll(0.2)
            # A group member is ready once it has partitions; a share member once its first poll returned.
            if not signalled and (kind != "group" or isinstance(c, Consumer) and c.assignment()):
                ready()
                signalled = True
            values = [v for m in msgs if m.error() is None and (v := m.value()) is not None]
            if values and tally.add(values) >= expected:
                stop.set()
    finally:
        c.close()


# Acquisitions of at least this many records are decoded column-wise, smaller ones record by record: the
# column-wise decoder costs ~150 us a call and ~0.2 us a 1 KiB record, the Python one ~2 us a record.
COLUMNAR_FROM = 100


def _values(a) -> list[bytes]:
    """The values of the records `a` (a shoal_client Acquired) holds, records outside its ranges left out."""
    from protocol.records import iter_batch_views, iter_records
    from shoal_spark.decode import decode

    if a.count >= COLUMNAR_FROM:
        return decode(a.topic, a.partition, a.records, a.ranges).column("value").to_pylist()

    wanted = [(first, last) for first, last, _ in a.ranges]
    return [r.value for _pos, _header, view in iter_batch_views(a.records) for r in iter_records(view)
            if r.value is not None and any(f <= r.offset <= la for f, la in wanted)]


def _shoal_loop(bootstrap: str, topic: str, group: str, max_wait_ms: int, ready: Callable[[], None],
                stop: threading.Event, tally: _Tally, expected: int) -> None:
    from shoal_client import ACCEPT, ShareGroupMember, acknowledgements

    # whole batches, as a Kafka share consumer acquires by default (share.acquire.mode=batch_optimized)
    with ShareGroupMember(bootstrap, group, [topic], acquire_mode="batch_optimized") as member:
        member.wait_for_assignment(30)
        ready()
        acks: dict = {}
        while not stop.is_set():
            result = member.fetch(max_records=10_000, max_bytes=8 << 20, max_wait_ms=max_wait_ms,
                                  acknowledgements=acks)
            values = []
            for a in result.acquired:
                values += _values(a)
            acks = acknowledgements(result.acquired, ACCEPT)
            if values and tally.add(values) >= expected:
                stop.set()
        member.acknowledge(acks)


def consume(kind: str, bootstrap: str, topic: str, partitions: int, group: str, members: int, expected: int,
            timeout: float, max_wait_ms: int, ready: EventType, out: mp.Queue) -> None:
    """Consumer process: `members` consumers of `kind` until `expected` measured records arrived (or timeout)."""
    tally, stop = _Tally(), threading.Event()
    ready_count = [0]
    ready_lock = threading.Lock()

    def one_ready() -> None:
        with ready_lock:
            ready_count[0] += 1
            if ready_count[0] == members:
                ready.set()

    def run() -> None:
        try:
            if kind == "shoal-share":
                _shoal_loop(bootstrap, topic, group, max_wait_ms, one_ready, stop, tally, expected)
            else:
                _confluent_loop(kind, bootstrap, topic, partitions, group, one_ready, stop, tally, expected)
        except Exception as exc:  # reported, not swallowed: the parent raises it
            out.put({"error": f"{type(exc).__name__}: {exc}"})
            stop.set()

    threads = [threading.Thread(target=run, daemon=True) for _ in range(members)]
    started, cpu0 = time.perf_counter(), time.process_time()
    for t in threads:
        t.start()
    stop.wait(timeout)
    stop.set()
    for t in threads:
        t.join(30)
    # Drain rate: records after the first batch over the time from it to the last one (joining is outside it);
    # when all came in one batch, everything over the time since the consumers started.
    if tally.first is not None and tally.last > tally.first and tally.received > tally.first_batch:
        drained, drain_s = tally.received - tally.first_batch, tally.last - tally.first
    else:
        drained, drain_s = tally.received, max(tally.last - started, 1e-3)
    out.put({"received": tally.received, "drained": drained, "drain_s": drain_s, "cpu_s": time.process_time() - cpu0,
             **percentiles(tally.latencies_us)})


# ---- orchestration (parent process) -----------------------------------------------------------------------------

def new_share_group(bootstrap: str, prefix: str) -> str:
    """A fresh share group that starts at the earliest offset (records produced before the join count)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    group = f"{prefix}-{uuid.uuid4().hex[:8]}"
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    return group


def _group_for(kind: str, bootstrap: str) -> str:
    if kind in SHARE_KINDS:
        return new_share_group(bootstrap, f"lat-{kind}")
    return f"lat-{kind}-{uuid.uuid4().hex[:8]}"


def _start_consumer(kind: str, bootstrap: str, topic: str, partitions: int, members: int, expected: int,
                    timeout: float, max_wait_ms: int, group: str | None = None) -> tuple[BaseProcess, mp.Queue]:
    ready, out = SPAWN.Event(), SPAWN.Queue()
    group = group or _group_for(kind, bootstrap)
    proc = SPAWN.Process(target=consume, args=(kind, bootstrap, topic, partitions, group,
                                               members, expected, timeout, max_wait_ms, ready, out), daemon=True)
    proc.start()
    if not ready.wait(60):
        err = None
        with contextlib.suppress(queue.Empty):
            err = out.get(timeout=1)
        proc.kill()
        raise RuntimeError(f"{kind} consumers not ready within 60 s" + (f": {err['error']}" if err else ""))
    return proc, out


def wait_settled(bootstrap: str, kind: str, group: str, members: int, partitions: int, timeout: float = 60) -> None:
    """Until `members` members of `group` hold `partitions` partitions between them, each partition once.

    A member is ready when it has partitions (classic) or its first poll returned (share), which can be before the
    group settles: a share member learns of a new assignment at its next heartbeat (5 s apart by default), so
    early members keep every partition for a while and the members would contend for records during a drain; a
    classic group may still be rebalancing. Drains start once the group has settled, for both kinds alike."""
    deadline = time.monotonic() + timeout
    while True:
        owned = _owned_partitions(bootstrap, kind, group)
        if len(owned) == members and sorted(p for ps in owned for p in ps) == list(range(partitions)):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{kind} group {group} did not settle on {members} members within {timeout} s: "
                               f"{owned}")
        time.sleep(0.1)


def _owned_partitions(bootstrap: str, kind: str, group: str) -> list[list[int]]:
    """Each member's partitions (of every topic) as the group coordinator describes them."""
    if kind in SHARE_KINDS:
        from shoal_client.admin import ShareGroupAdmin

        with contextlib.closing(ShareGroupAdmin(bootstrap, timeout_s=10)) as admin:
            desc = admin.describe_share_group(group)
        return [[p for ps in m.assignment.values() for p in ps] for m in desc.members]
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    described = client.describe_consumer_groups([group])[group].result(timeout=10)
    if described.state.name != "STABLE":
        return []
    return [[tp.partition for tp in m.assignment.topic_partitions] for m in described.members]


def _result(proc: BaseProcess, out: mp.Queue, timeout: float) -> dict:
    res = out.get(timeout=timeout)
    proc.join(30)
    if "error" in res:
        raise RuntimeError(res["error"])
    return res


def latency(bootstrap: str, kind: str, *, partitions: int, rate: float, seconds: float, warmup: float = 1.0,
            size: int = 100, members: int = 1, max_wait_ms: int = 500) -> dict:
    """End-to-end latency of `rate` records/s for `seconds` (after `warmup`) into a fresh topic."""
    from bench.clients import create_topic

    topic = f"lat-{uuid.uuid4().hex[:8]}"
    with contextlib.suppress(Exception):  # a peer without CreateTopics auto-creates on first produce
        create_topic(bootstrap, topic, partitions)
    measured = int(rate * (warmup + seconds)) - int(rate * warmup)
    group = _group_for(kind, bootstrap)
    proc, out = _start_consumer(kind, bootstrap, topic, partitions, members, measured, warmup + seconds + 60,
                                max_wait_ms, group)
    if kind != "assign":
        # A share member is ready once its first poll returned, which can be before the coordinator assigned it
        # partitions (at a heartbeat, seconds apart): records sent before then would wait for the assignment and
        # be measured as latency. The producer starts once the group holds every partition.
        wait_settled(bootstrap, kind, group, members, partitions)
    pout = SPAWN.Queue()
    producer = SPAWN.Process(target=produce_at_rate,
                             args=(bootstrap, topic, partitions, rate, seconds, warmup, size, pout), daemon=True)
    producer.start()
    sent = pout.get(timeout=warmup + seconds + 120)
    producer.join(30)
    res = _result(proc, out, 90)
    if res["received"] < measured:
        raise RuntimeError(f"{kind}: received {res['received']} of {measured} measured records")
    return {"kind": kind, "partitions": partitions, "rate": rate, "seconds": seconds, "record_bytes": size,
            "members": members, "max_wait_ms": max_wait_ms, "achieved_rate": sent["achieved_rate"],
            **{k: res[k] for k in ("received", "p50_ms", "p99_ms", "p999_ms", "max_ms")}}


def drain(bootstrap: str, kind: str, *, partitions: int, records: int, size: int, members: int,
          topic: str | None = None, on_ready: Callable[[], None] | None = None) -> dict:
    """Records/s with which `members` consumers of `kind` drain `records` records: of `topic`, filled beforehand;
    without one, of a fresh topic filled (as fast as a producer goes) once every member is in its group, so that a
    classic group's rebalances as members join are outside the figure. `on_ready` is called once every member's
    first poll returned (and its group settled), before the rest is drained."""
    from bench.clients import create_topic

    prefilled = topic is not None
    if topic is None:
        topic = f"drain-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions)
    group = _group_for(kind, bootstrap)
    proc, out = _start_consumer(kind, bootstrap, topic, partitions, members, records, 300, 500, group)
    if not prefilled:
        wait_settled(bootstrap, kind, group, members, partitions)
    if on_ready is not None:
        on_ready()
    if not prefilled:
        fill(bootstrap, topic, partitions, records, size)
    res = _result(proc, out, 330)
    if res["received"] < records:
        raise RuntimeError(f"{kind}: drained {res['received']} of {records}")
    rate = res["drained"] / res["drain_s"]
    return {"kind": kind, "partitions": partitions, "members": members, "records": records, "record_bytes": size,
            "seconds": records / rate, "records_s": round(rate), "consumer_cpu_s": round(res["cpu_s"], 3)}
