"""Consumer-group and share-group state for the differential tool tests (tests/differential/test_kafka_tools_groups.py),
made the same way on both brokers: offsets committed by raw OffsetCommit, share-group members and their
acknowledgements by raw ShareGroupHeartbeat / ShareFetch / ShareAcknowledge (member ids of our choosing), and a
KIP-848 consumer kept in its group by a thread while the tools look at it."""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Mapping, Sequence

from confluent_kafka import Consumer

from tests.helpers import share_raw
from tests.helpers.differential import Target
from tests.helpers.raw_client import RawClient
from tests.helpers.raw_requests import topic_id
from tests.helpers.waiting import wait_until

OFFSET_COMMIT, INCREMENTAL_ALTER_CONFIGS, GROUP_RESOURCE = 8, 44, 32
ACCEPT = share_raw.ACCEPT
NOT_READY = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def commit(client: RawClient, group: str, topic: str, offsets: Mapping[int, int]) -> None:
    """Offsets committed outside any generation (a group with no members: Empty, classic)."""
    def done() -> bool:
        r = client.call(OFFSET_COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                           "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                               {"partition_index": p, "committed_offset": o,
                                                "committed_leader_epoch": -1, "committed_metadata": ""}
                                               for p, o in offsets.items()]}]})
        codes = {p.error_code for t in r.topics for p in t.partitions}
        assert codes <= {0, 14, 15, 16}, r  # 14-16: the coordinator is loading or elsewhere, try again
        return codes == {0}
    wait_until(done, 60, f"offsets committed for {group}")


def group_config(client: RawClient, group: str, configs: Mapping[str, str]) -> None:
    r = client.call(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": GROUP_RESOURCE, "resource_name": group, "configs": [
            {"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}], "validate_only": False})
    assert r.responses[0].error_code == 0, r


def member_id() -> str:
    """A member id as a Kafka client makes one (Uuid.randomUuid().toString())."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ShareMember:
    """One member of a share group, driven by raw requests: joins, is assigned every partition of `topic`,
    acquires and accepts records, heartbeats (in a thread while `alive`), leaves."""

    def __init__(self, target: Target, group: str, topic: str, partitions: int) -> None:
        self.client = target.raw()
        self.group, self.topic, self.partitions = group, topic, partitions
        self.member = member_id()
        self.tid = topic_id(self.client, topic)
        # the group coordinator may still be loading (a new __consumer_offsets on Kafka): retried until it answers
        wait_until(lambda: share_raw.heartbeat(self.client, group, self.member, 0, [topic]).error_code
                   not in NOT_READY, 120, f"the coordinator of {group}", interval=0.1)
        self.epoch, _ = share_raw.join_until_assigned(self.client, group, self.member, topic, partitions)
        self.session = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _fetch(self, partitions: Sequence[int]):
        r = share_raw.fetch(self.client, self.group, self.member, self.session, self.tid, tuple(partitions),
                            join=False, max_records=1)
        assert r.error_code == 0, r
        self.session += 1
        return r

    def _ack(self, acks: dict[int, list]) -> None:
        if acks:
            a = share_raw.acknowledge(self.client, self.group, self.member, self.session, self.tid, acks)
            assert a.error_code == 0, a
            self.session += 1

    def _forget(self, p: int) -> None:
        """Take partition p out of the share session, so that later fetches acquire nothing more of it."""
        r = share_raw.fetch(self.client, self.group, self.member, self.session, self.tid, (), forget=(p,),
                            join=False)
        assert r.error_code == 0, r
        self.session += 1

    def accept(self, want: Mapping[int, int]) -> None:
        """Acquire records until partition p has given `want[p]` of them, and accept each at once; one partition at
        a time, one record to a fetch, so that nothing else is acquired."""
        for p, n in want.items():
            got = 0

            def more(p: int = p, n: int = n) -> bool:
                nonlocal got
                acks = []
                for first, last, _ in share_raw.acquired(self._fetch([p]), p):
                    acks.append((first, last, ACCEPT))
                    got += last - first + 1
                self._ack({p: acks} if acks else {})
                return got >= n
            wait_until(more, 60, f"records of {self.topic}-{p} accepted", interval=0.02)
            self._forget(p)

    def release_next(self, partitions: Sequence[int]) -> None:
        """Acquire the next record of each partition and release it. Kafka persists a share partition's state
        (what DescribeShareGroupOffsets reads) as of before an acknowledgement moves its start offset: the next
        write, this one, carries the start offset the accepted records moved."""
        for p in partitions:
            def released(p: int = p) -> bool:
                got = share_raw.acquired(self._fetch([p]), p)
                self._ack({p: [(first, last, share_raw.RELEASE) for first, last, _ in got]} if got else {})
                return bool(got)
            wait_until(released, 60, f"a record of {self.topic}-{p} released", interval=0.02)
            self._forget(p)

    def keep_alive(self, interval_s: float = 1.0) -> None:
        """Heartbeat in a thread until leave() (no other request of this member meanwhile: one connection)."""
        def run() -> None:
            while not self._stop.wait(interval_s):
                r = share_raw.heartbeat(self.client, self.group, self.member, self.epoch)
                if r.error_code == 0:
                    self.epoch = r.member_epoch
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def leave(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self.session:
            share_raw.fetch(self.client, self.group, self.member, -1, self.tid, (), join=False)  # close the session
        r = share_raw.heartbeat(self.client, self.group, self.member, -1)
        assert r.error_code == 0, r
        self.client.close()


class LiveConsumer:
    """A KIP-848 consumer (confluent-kafka, group.protocol=consumer) of `topics` in `group`, polled in a thread so
    that it stays a member while the tools run; `ready()` once it has consumed `wanted` records and committed."""

    def __init__(self, target: Target, group: str, topics: Sequence[str], wanted: int, client_id: str) -> None:
        self.consumer = Consumer({**target.client_config(), "group.id": group, "group.protocol": "consumer",
                                  "client.id": client_id, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
        self.consumer.subscribe(list(topics))
        self.wanted, self.seen = wanted, 0
        self.committed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self.consumer.poll(0.1)
            if m is not None and m.error() is None:
                self.seen += 1
                if self.seen == self.wanted:
                    self.consumer.commit(asynchronous=False)
                    self.committed.set()

    def ready(self, timeout: float = 60) -> None:
        assert self.committed.wait(timeout), f"the consumer saw {self.seen} of {self.wanted} records"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()
