"""Raw transaction requests for the differential suite (tests/differential/test_transactions*.py): one `TxnSession`
per broker wraps a RawClient with the steps a scenario takes (InitProducerId, AddPartitionsToTxn, EndTxn, ...),
waits for the coordinators a scenario needs to be ready, and names producer ids by their order of appearance
(`pid(n)`), since the two brokers hand out different ids.

Only what a client observes is returned (error codes, the fields of the answer), as plain data the differential
normaliser can compare."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protocol import records as rec
from protocol.control_records import read_end_txn_marker
from protocol.errors import ErrorCode
from tests.helpers.differential import Target
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import create_topic, fetch_body, topic_id
from tests.helpers.waiting import wait_until

PRODUCE, FETCH, LIST_OFFSETS, FIND_COORDINATOR, OFFSET_FETCH = 0, 1, 2, 10, 9
INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, WRITE_MARKERS, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 27, 28
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66
NOT_READY = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}
# One batch timestamp for the whole run, so records compare equal on both brokers. Recent: a batch older than the
# topic's retention (7 days) would make Kafka roll and delete its segment, moving the log start offset.
BATCH_TIMESTAMP = int(time.time()) * 1000


def txn_batch(pid: int, epoch: int, seq: int, values: Sequence[bytes], *, transactional: bool = True,
              timestamp: int = BATCH_TIMESTAMP) -> bytes:
    return rec.build_batch([rec.Record(None, v) for v in values], producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, transactional=transactional, timestamp=timestamp)


def batches(records: bytes | None) -> list[tuple]:
    """What a fetch returned, batch by batch: (base offset, records, transactional, control, epoch, base
    sequence, marker (commit/abort, coordinator epoch) or None)."""
    out: list[tuple] = []
    for pos, h in rec.iter_batches(records or b""):
        marker = read_end_txn_marker(bytes(records[pos:pos + h.size])) if h.is_control else None
        out.append((h.base_offset, h.records_count, h.is_transactional, h.is_control, h.producer_epoch,
                    h.base_sequence, None if marker is None else ("commit" if marker.commit else "abort",
                                                                  marker.coordinator_epoch)))
    return out


class TxnSession:
    """One broker's side of a transaction scenario: raw requests and the producer ids seen so far."""

    def __init__(self, target: Target, user: str | None = None) -> None:
        self.target = target
        self.c: RawClient = target.raw(user)  # on a SASL target, as `user` (admin by default)
        self._pids: dict[int, str] = {}

    def __enter__(self) -> TxnSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.c.close()

    def close(self) -> None:
        self.c.close()

    # --- naming -----------------------------------------------------------------------------------------------
    def pid(self, producer_id: int) -> int | str:
        """A producer id as `pid:N` (N: its order of appearance in this scenario); -1 stays -1."""
        if producer_id < 0:
            return producer_id
        return self._pids.setdefault(producer_id, f"pid:{len(self._pids)}")

    def name(self, value: str) -> str:
        return self.target.names().get(value, value)

    # --- readiness --------------------------------------------------------------------------------------------
    def topic(self, base: str, partitions: int = 1) -> str:
        """A new topic, once every partition has a leader that answers (Kafka's takes a moment after
        CreateTopics)."""
        name = self.target.unique(base)
        create_topic(self.c, name, partitions)

        def led() -> bool:
            r = self.c.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": name, "partitions": [{"partition_index": p, "timestamp": -1} for p in range(partitions)]}]})
            return all(p.error_code == 0 for t in r.topics for p in t.partitions)
        wait_until(led, 30, f"leaders for {name}", interval=0.05)
        return name

    def ready(self, *transactional_ids: str, groups: Iterable[str] = ()) -> None:
        """Wait until the coordinators of these ids and groups answer (Kafka creates and loads its internal topics
        on first use, and fetches a block of producer ids from its controller)."""
        def idempotent_ok() -> bool:
            r = self.c.call(INIT_PID, 4, {"transactional_id": None, "transaction_timeout_ms": 60_000,
                                          "producer_id": -1, "producer_epoch": -1})
            return r.error_code == 0
        wait_until(idempotent_ok, 60, "a producer id from the broker", interval=0.1)
        for tid in transactional_ids:
            def txn_ok(tid: str = tid) -> bool:
                r = self.c.call(FIND_COORDINATOR, 4, {"key": "", "key_type": 1, "coordinator_keys": [tid]})
                if r.coordinators[0].error_code != 0:
                    return False
                return self.describe_raw([tid])[0].error_code not in NOT_READY
            wait_until(txn_ok, 60, f"the transaction coordinator of {tid}", interval=0.1)
        for group in groups:
            def group_ok(group: str = group) -> bool:
                r = self.c.call(FIND_COORDINATOR, 4, {"key": "", "key_type": 0, "coordinator_keys": [group]})
                if r.coordinators[0].error_code != 0:
                    return False
                r = self.c.call(OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                                  "require_stable": False})
                return r.groups[0].error_code not in NOT_READY
            wait_until(group_ok, 60, f"the group coordinator of {group}", interval=0.1)

    # --- requests ---------------------------------------------------------------------------------------------
    def init_raw(self, tid: str | None, *, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1,
                 version: int = 4):
        return self.c.call(INIT_PID, version, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms,
                                               "producer_id": pid, "producer_epoch": epoch})

    def init(self, tid: str | None, **kwargs: Any) -> tuple[int, int | str, int]:
        """InitProducerId: (error, producer id named, epoch)."""
        r = self.init_raw(tid, **kwargs)
        return r.error_code, self.pid(r.producer_id), r.producer_epoch

    def producer(self, tid: str, timeout_ms: int = 60_000) -> tuple[int, int]:
        """InitProducerId that must succeed: the real producer id and epoch (named in order)."""
        r = self.init_raw(tid, timeout_ms=timeout_ms)
        assert r.error_code == 0, r
        self.pid(r.producer_id)
        return r.producer_id, r.producer_epoch

    def add(self, tid: str, pid: int, epoch: int, topics: Mapping[str, Sequence[int]], version: int = 3
            ) -> list[tuple[str, int, int]]:
        r = self.c.call(ADD_PARTITIONS, version, {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": list(ps)} for t, ps in topics.items()]})
        return sorted((t.name, p.partition_index, p.partition_error_code) for t in r.results_by_topic_v3_and_below
                      for p in t.results_by_partition)

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
        return self.c.call(ADD_OFFSETS, version, {"transactional_id": tid, "producer_id": pid,
                                                  "producer_epoch": epoch, "group_id": group}).error_code

    def end(self, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> tuple:
        """EndTxn: the error, and from v5 the producer id (named) and epoch to use next."""
        r = self.c.call(END_TXN, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                           "committed": commit})
        if version < 5:
            return (r.error_code,)
        return r.error_code, self.pid(r.producer_id), r.producer_epoch

    def produce(self, topic: str, partition: int, records: bytes, tid: str | None, version: int = 11) -> tuple:
        r = self.c.call(PRODUCE, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
        p = r.responses[0].partition_responses[0]
        return p.error_code, p.base_offset, p.get("error_message")

    def markers(self, pid: int, epoch: int, commit: bool, topics: Mapping[str, Sequence[int]], *,
                coordinator_epoch: int = 0, version: int = 1, transaction_version: int = 0) -> list[tuple]:
        """WriteTxnMarkers from a client (what `kafka-transactions abort` sends)."""
        r = self.c.call(WRITE_MARKERS, version, {"markers": [{
            "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
            "topics": [{"name": t, "partition_indexes": list(ps)} for t, ps in topics.items()],
            "coordinator_epoch": coordinator_epoch, "transaction_version": transaction_version}]})
        return [(self.pid(m.producer_id), sorted((self.name(t.name), p.partition_index, p.error_code)
                                                 for t in m.topics for p in t.partitions)) for m in r.markers]

    def describe_raw(self, tids: Sequence[str]):
        return self.c.call(DESCRIBE_TXNS, 0, {"transactional_ids": list(tids)}).transaction_states

    def describe(self, *tids: str) -> list[tuple]:
        """DescribeTransactions: per id (error, state, producer id, epoch, timeout, start time set?, partitions);
        an entry with an error keeps its raw fields."""
        out = []
        for d in self.describe_raw(tids):
            found = d.error_code == 0
            start = d.transaction_start_time_ms
            out.append((self.name(d.transactional_id), d.error_code, d.transaction_state,
                        self.pid(d.producer_id) if found else d.producer_id, d.producer_epoch,
                        d.transaction_timeout_ms, (start > 0) if found and start != -1 else start,
                        sorted((self.name(t.topic), _partitions(t.topic, t.partitions)) for t in d.topics)))
        return out

    def state(self, tid: str) -> str:
        return self.describe_raw([tid])[0].transaction_state

    def wait_state(self, tid: str, *states: str, timeout: float = 30.0) -> None:
        wait_until(lambda: self.state(tid) in states, timeout, f"{tid} in {states}", interval=0.02)

    def list(self, version: int, mine: Iterable[str], **filters: Any) -> tuple:
        """ListTransactions at `version` restricted to the ids in `mine` (the broker is shared): (error,
        unknown state filters, sorted (id, producer id, state))."""
        ids = set(mine)
        r = self.c.call(LIST_TXNS, version, {"state_filters": [], "producer_id_filters": [], **filters})
        return (r.error_code, sorted(r.unknown_state_filters),
                sorted((self.name(t.transactional_id), str(self.pid(t.producer_id)), t.transaction_state)
                       for t in r.transaction_states if t.transactional_id in ids))

    def describe_producers(self, topics: Mapping[str, Sequence[int]]) -> list[tuple]:
        r = self.c.call(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": t, "partition_indexes": list(ps)}
                                                           for t, ps in topics.items()]})
        return [(self.name(t.name), p.partition_index, p.error_code, p.error_message,
                 sorted((str(self.pid(a.producer_id)), a.producer_epoch, a.last_sequence, _when(a.last_timestamp),
                         a.coordinator_epoch, a.current_txn_start_offset) for a in p.active_producers))
                for t in r.topics for p in t.partitions]

    def fetch(self, topic: str, partition: int = 0, offset: int = 0, *, committed: bool, version: int = 12
              ) -> tuple:
        """A consumer's Fetch: (error, high watermark, LSO, log start, aborted transactions, batches)."""
        r = self.c.call(FETCH, version, {**fetch_body(topic, offset, partitions=(partition,)), "replica_id": -1,
                                         "isolation_level": 1 if committed else 0, "session_id": 0,
                                         "session_epoch": -1})
        p = r.responses[0].partitions[0]
        aborted = None if p.aborted_transactions is None else [
            (self.pid(a.producer_id), a.first_offset) for a in p.aborted_transactions]
        return (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset, aborted,
                batches(p.records))

    def offsets(self, topic: str, partitions: int, *, committed: bool) -> list[int]:
        """ListOffsets latest: the LSO under read_committed, the high watermark otherwise."""
        r = self.c.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1 if committed else 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "timestamp": -1} for p in range(partitions)]}]})
        return [p.offset for p in sorted(r.topics[0].partitions, key=lambda p: p.partition_index)]

    def topic_id(self, topic: str) -> uuid.UUID:
        return topic_id(self.c, topic)

    def txn_offset_commit(self, version: int, tid: str, group: str, pid: int, epoch: int,
                          topics: Mapping[str | uuid.UUID, Sequence[int]], *, offset: int = 5,
                          generation: int = -1, member: str = "", instance: str | None = None) -> list[tuple]:
        """TxnOffsetCommit; from v6 topics go by id (a name given is looked up, a UUID sent as it is) and the
        answer's ids are named back: (topic, partition, error)."""
        ids = {t: (t if isinstance(t, uuid.UUID) else self.topic_id(t)) for t in topics} if version >= 6 else {}
        names = {v: (k if isinstance(k, str) else "<unknown id>") for k, v in ids.items()}
        r = self.c.call(TXN_OFFSET_COMMIT, version, {
            "transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id_or_member_epoch": generation, "member_id": member, "group_instance_id": instance,
            "topics": [{"name": t if version < 6 else None, "topic_id": ids.get(t), "partitions": [
                {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1,
                 "committed_metadata": "m"} for p in ps]} for t, ps in topics.items()]})
        return sorted((self.name(t.name if version < 6 else names.get(t.topic_id, str(t.topic_id))),
                       p.partition_index, p.error_code) for t in r.topics for p in t.partitions)

    def offset_fetch(self, group: str, topic: str, partitions: Sequence[int], *, stable: bool) -> tuple:
        r = self.c.call(OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": list(partitions)}]}], "require_stable": stable})
        g = r.groups[0]
        return g.error_code, sorted((p.partition_index, p.committed_offset, p.error_code)
                                    for t in g.topics for p in t.partitions)


def _partitions(topic: str, partitions: Sequence[int]) -> list[int] | str:
    """A transaction's partitions of a topic; a group's __consumer_offsets partition depends on the topic's
    partition count (50 on Kafka, 4 on Shoal by default), so only its presence compares."""
    if topic == "__consumer_offsets":
        return f"{len(partitions)} offsets partition(s)"
    return sorted(partitions)


def _when(timestamp: int) -> int | str:
    """A batch's timestamp as it compares on both brokers: the fixed one of `txn_batch`, or "recent" for one the
    broker stamped (a marker's wall-clock time)."""
    if timestamp in (BATCH_TIMESTAMP, -1):
        return timestamp
    return "recent" if abs(time.time() * 1000 - timestamp) < 600_000 else timestamp
