"""shoal_client members consuming in threads while a test breaks the brokers under them, and the tally a test
asserts on: every record produced delivered at least once, how many came again, what acknowledgements failed.

    producer = SteadyProducer(bootstrap, topic, "a")       # unique values, acks=all, idempotent, in a thread
    with MemberLoops(bootstrap, group, [topic], 2) as loops:  # members fetching and ACCEPTing in threads
        ...break something...
        produced = producer.stop()
        loops.wait_for(produced, 120)
    tally = loops.tally(produced)                          # Tally(produced, delivered, redelivered, lost, ...)
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import Producer

from protocol.errors import ErrorCode
from protocol.records import iter_batch_views, iter_records
from shoal_client import ACCEPT, Acquired, ShareGroupMember, acknowledgements
from tests.helpers.waiting import wait_until


def records_in(a: Acquired) -> list[tuple[int, bytes, int]]:
    """(offset, value, delivery count) of the acquired records (records of the batches outside the ranges are
    skipped)."""
    out = []
    for _, _, view in iter_batch_views(a.records):
        for r in iter_records(view):
            count = next((d for first, last, d in a.ranges if first <= r.offset <= last), None)
            if count is not None:
                out.append((r.offset, bytes(r.value), count))
    return out


def code_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)


class SteadyProducer(threading.Thread):
    """Produces unique values ("<prefix>-<n>") in small rounds until stopped, acks=all and idempotent; `stop()`
    returns the values whose delivery the brokers acknowledged. With `partitions`, the values go round the
    topic's partitions (unkeyed, librdkafka's sticky partitioner may put a whole burst into one partition)."""

    def __init__(self, bootstrap: str, topic: str, prefix: str, *, partitions: int | None = None,
                 per_round: int = 20, pause_s: float = 0.05) -> None:
        super().__init__(daemon=True, name=f"producer-{prefix}")
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5})
        self.topic, self.prefix = topic, prefix
        self.per_round, self.pause_s = per_round, pause_s
        self.delivered: set[bytes] = set()
        self.failed: list[str] = []
        self._halt = threading.Event()
        self._extra = itertools.count()  # produce()'s values, apart from the thread's
        self.partitions, self._sent = partitions, itertools.count()

    def _done(self, err, msg) -> None:
        if err is None:
            self.delivered.add(msg.value())
        else:
            self.failed.append(str(err))

    def produce(self, n: int) -> set[bytes]:
        """Produce `n` more values at once (outside the thread) and wait for them."""
        for _ in range(n):
            self._send(f"{self.prefix}-x{next(self._extra)}".encode())
        assert self.producer.flush(120) == 0
        assert not self.failed, self.failed[:3]
        return set(self.delivered)

    def _send(self, value: bytes) -> None:
        where = {} if self.partitions is None else {"partition": next(self._sent) % self.partitions}
        while True:
            try:
                self.producer.produce(self.topic, value=value, on_delivery=self._done, **where)
                return
            except BufferError:
                self.producer.poll(0.05)

    def run(self) -> None:
        i = 0
        while not self._halt.is_set():
            for _ in range(self.per_round):
                self._send(f"{self.prefix}-{i}".encode())
                i += 1
            self.producer.poll(0)
            self._halt.wait(self.pause_s)
        self.producer.flush(180)

    def stop(self) -> set[bytes]:
        self._halt.set()
        if self.is_alive():
            self.join(200)
        assert self.producer.flush(60) == 0, "records still unacknowledged by the brokers"
        assert not self.failed, self.failed[:3]
        return set(self.delivered)


@dataclass
class Tally:
    produced: int
    delivered: int  # distinct records delivered
    deliveries: int  # every delivery, repeats included
    lost: int  # produced and never delivered
    ack_errors: dict[str, int]  # offsets whose acknowledgement failed, by error
    partition_errors: dict[str, int]  # partition errors the brokers answered, by error
    max_delivery_count: int

    @property
    def redelivered(self) -> int:
        return self.deliveries - self.delivered

    def line(self, scenario: str) -> str:
        return (f"{scenario}: produced {self.produced}, delivered {self.delivered}, redelivered {self.redelivered}, "
                f"lost {self.lost}; failed acknowledgements {self.ack_errors or 'none'}; partition errors seen "
                f"{self.partition_errors or 'none'}; highest delivery count {self.max_delivery_count}")


@dataclass
class _Loop:
    member: ShareGroupMember
    thread: threading.Thread | None = None
    failures: list[str] = field(default_factory=list)


class MemberLoops:
    """`count` ShareGroupMembers of `group`, each in a thread fetching up to `max_records` at a time and ACCEPTing
    what it got with its next fetch (piggybacked, to the broker that acquired it), as a Kafka share consumer in
    implicit mode does. Every delivery and every failed acknowledgement is recorded."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], count: int, *, max_records: int = 100,
                 client_id: str = "cluster-test", request_timeout_s: float = 30.0) -> None:
        self.bootstrap, self.group, self.topics = bootstrap, group, topics
        self.max_records = max_records
        self.client_id, self.request_timeout_s = client_id, request_timeout_s
        self._lock = threading.Lock()
        self.deliveries: list[tuple[bytes, int, int, int]] = []  # (value, partition, delivery count, broker)
        self.ack_errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self.loops = [_Loop(self._member(i)) for i in range(count)]

    def _member(self, i: int) -> ShareGroupMember:
        return ShareGroupMember(self.bootstrap, self.group, self.topics, client_id=f"{self.client_id}-{i}",
                                request_timeout_s=self.request_timeout_s)

    def __enter__(self) -> MemberLoops:
        """Join every member, wait until the group has split the partitions between them (no member fetches a
        partition that is about to move to another, which would deliver its records twice), start fetching."""
        for loop in self.loops:
            loop.member.start()

        def split() -> bool:
            assignments = [loop.member.assignment() for loop in self.loops]
            return all(assignments) and sum(map(len, assignments)) == len(frozenset().union(*assignments))

        wait_until(split, 60, "the group to split its partitions between the members")
        for loop in self.loops:
            loop.thread = threading.Thread(target=self._run, args=(loop,), daemon=True, name=loop.member.client_id)
            loop.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, acquired: list[Acquired]) -> None:
        with self._lock:
            for a in acquired:
                self.deliveries += [(value, a.partition, count, a.node) for _, value, count in records_in(a)]

    def _count_errors(self, errors: dict, sent: dict) -> None:
        with self._lock:
            for key, code in errors.items():
                self.ack_errors[code_name(code)] += sum(last - first + 1 for first, last, _ in sent.get(key, ()))

    def _run(self, loop: _Loop) -> None:
        member, pending = loop.member, {}
        while not self._stop.is_set():
            try:
                result = member.fetch(max_records=self.max_records, max_bytes=1 << 20, max_wait_ms=300,
                                      acknowledgements=pending)
            except Exception as err:  # noqa: BLE001 - the test fails on it, after the others stop
                loop.failures.append(repr(err))
                self._stop.wait(0.5)
                continue
            self._count_errors(result.ack_errors, pending)
            self._record(result.acquired)
            pending = acknowledgements(result.acquired, ACCEPT)
        self._count_errors(member.close(pending), pending)

    def delivered(self) -> set[bytes]:
        with self._lock:
            return {value for value, *_ in self.deliveries}

    def wait_for(self, values: set[bytes], timeout: float) -> None:
        """Wait until every one of `values` was delivered; fail naming how many were not."""
        end = time.monotonic() + timeout
        while True:
            missing = values - self.delivered()
            if not missing:
                return
            failures = [f for loop in self.loops for f in loop.failures]
            if time.monotonic() > end:
                raise AssertionError(f"{len(missing)} of {len(values)} records not delivered after {timeout:g} s "
                                     f"(e.g. {sorted(missing)[:3]}); member failures: {failures[:3]}")
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        for loop in self.loops:
            if loop.thread is not None:
                loop.thread.join(60)
            loop.member.close()

    def failures(self) -> list[str]:
        return [f for loop in self.loops for f in loop.failures]

    def tally(self, produced: set[bytes]) -> Tally:
        with self._lock:
            delivered = {value for value, *_ in self.deliveries}
            seen: Counter[int] = Counter()
            for loop in self.loops:
                seen.update(loop.member.errors_seen)
            return Tally(len(produced), len(delivered & produced), len(self.deliveries), len(produced - delivered),
                         dict(self.ack_errors), {code_name(c): n for c, n in seen.items()},
                         max((d for _, _, d, _ in self.deliveries), default=0))


def drain_leftovers(bootstrap: str, group: str, topics: list[str], quiet_s: float = 2.0) -> list[bytes]:
    """What one more member of the group still gets (and ACCEPTs) until `quiet_s` pass without records: the
    records whose last acknowledgement failed, delivered again."""
    got: list[bytes] = []
    with ShareGroupMember(bootstrap, group, topics, client_id="leftovers") as member:
        member.wait_for_assignment(30)
        pending: dict = {}
        quiet_until = time.monotonic() + quiet_s
        while time.monotonic() < quiet_until or pending:
            result = member.fetch(max_records=500, max_bytes=1 << 20, max_wait_ms=300, acknowledgements=pending)
            pending = acknowledgements(result.acquired, ACCEPT)
            if result.acquired:
                got += [value for a in result.acquired for _, value, _ in records_in(a)]
                quiet_until = time.monotonic() + quiet_s
    return got
