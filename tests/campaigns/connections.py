"""Connection campaign: many concurrent connections and a share group of many members on one broker process.

    python -m tests.campaigns.connections [--connections 1000] [--members 100] [--confluent 10] [--records 20000]

Opens `connections` raw client connections (each does ApiVersions and Metadata, then stays open), then `members`
share-group members of one group on one topic, `confluent` of them confluent ShareConsumers (explicit ACCEPT,
commit_sync) and the rest shoal_client ShareGroupMembers (lighter: no librdkafka threads), waits until
ShareGroupDescribe lists every member, produces `records` records and lets the members accept them. Checks that
every record was delivered and accepted exactly once (no record's ACCEPT confirmed twice), that the broker kept
every connection and member, and reports its RSS and descriptors; after everyone closed, the broker's sockets
must be back to where they started.
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from shoal_client import ACCEPT, ShareGroupMember
from shoal_client.connection import ConnectionLost
from tests.campaigns import run_and_report
from tests.fuzz.harness import scan_log
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.confluent_clients import admin_client, create_topic, produce_all
from tests.helpers.proc_stats import open_fds, open_sockets, peak_rss_mib, rss_mib
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

TOPIC, GROUP = "conn-share", "conn-share-group"
API_VERSIONS, METADATA, SHARE_GROUP_DESCRIBE = 18, 3, 77
Key = tuple[int, int]


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE towards `wanted` (up to the hard limit); returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


class Accounting:
    """Deliveries and confirmed ACCEPTs of every member, by (partition, offset)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deliveries: Counter[Key] = Counter()
        self.accepts: Counter[Key] = Counter()  # confirmed ACCEPTs per record: exactly 1 each at the end
        self.per_member: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()

    def delivered(self, keys: list[Key]) -> None:
        with self._lock:
            self.deliveries.update(keys)

    def accepted(self, member: str, keys: list[Key]) -> None:
        with self._lock:
            self.accepts.update(keys)
            self.per_member[member] += len(keys)

    def error(self, what: str) -> None:
        with self._lock:
            self.errors[what] += 1

    def accepted_count(self) -> int:
        with self._lock:
            return len(self.accepts)


class ConfluentMember(threading.Thread):
    def __init__(self, name: str, bootstrap: str, books: Accounting, done: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.books, self.done = books, done
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": name,
                                       "share.acknowledgement.mode": "explicit"})
        self.consumer.subscribe([TOPIC])

    def run(self) -> None:
        c = self.consumer
        while not self.done.is_set():
            try:
                msgs = [m for m in c.poll(0.5) if m.error() is None]
            except KafkaException as err:
                self.books.error(f"confluent poll: {err.args[0].name()}")
                continue
            if not msgs:
                continue
            keys = [(m.partition(), m.offset()) for m in msgs]
            self.books.delivered(keys)
            for m in msgs:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            try:
                result = c.commit_sync(30)
            except KafkaException as err:
                self.books.error(f"confluent commit: {err.args[0].name()}")
                continue
            ok = {tp.partition for tp, err in (result or {}).items() if err is None}
            self.books.accepted(self.name, [k for k in keys if k[0] in ok])
            if len(ok) < len({k[0] for k in keys}):
                self.books.error("confluent commit: a partition's acknowledgement failed")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.consumer.close()


class ShoalMember(threading.Thread):
    def __init__(self, name: str, bootstrap: str, books: Accounting, done: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.books, self.done = books, done
        self.member = ShareGroupMember(bootstrap, GROUP, [TOPIC], client_id=name)

    def run(self) -> None:
        m = self.member
        try:
            m.start()
        except Exception as err:  # noqa: BLE001 - counted; the campaign then misses a member
            self.books.error(f"shoal join: {err!r}"[:100])
            return
        while not self.done.is_set():
            try:
                result = m.fetch(max_records=500, max_bytes=1 << 20, max_wait_ms=500)
            except (ConnectionLost, OSError) as err:
                self.books.error(f"shoal fetch: {type(err).__name__}")
                time.sleep(0.2)
                continue
            if not result.acquired:
                continue
            keys = {a.key: [(a.partition, o) for first, last, _ in a.ranges for o in range(first, last + 1)]
                    for a in result.acquired}
            self.books.delivered([k for ks in keys.values() for k in ks])
            errors = m.acknowledge({a.key: [(first, last, ACCEPT) for first, last, _ in a.ranges]
                                    for a in result.acquired})
            self.books.accepted(self.name, [k for tp, ks in keys.items() if tp not in errors for k in ks])
            if errors:
                self.books.error("shoal acknowledge: " + ",".join(sorted({str(e) for e in errors.values()})))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.member.close()


class ConnectionCampaign:
    def __init__(self, tmp: Path, *, connections: int = 1000, members: int = 100, confluent: int = 10,
                 records: int = 20_000, partitions: int = 10, python: str | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.tmp = tmp
        self.n_connections = connections
        self.n_members = members
        self.n_confluent = min(confluent, members)
        self.n_records = records
        self.partitions = partitions
        self.progress = progress or (lambda _line: None)
        # Descriptors: this process holds the raw connections and the members' sockets, the broker their peers
        # plus its files; the soft limits (often 1024) would not do.
        need = connections + 4 * members + 512
        self.fd_limit = raise_fd_limit(need)
        if self.fd_limit < need:
            raise RuntimeError(f"RLIMIT_NOFILE hard limit {self.fd_limit} < {need} descriptors needed")
        self.broker = BrokerProcess(tmp / "data", tmp / "broker.log", python=python, max_open_files=self.fd_limit,
                                    overrides={"group.share.max.size": str(max(200, members))})
        self.samples: list[tuple[float, int, int]] = []  # (RSS MiB, fds, sockets)

    def close(self, keep: bool = False) -> None:
        self.broker.stop()
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _sample(self) -> tuple[float, int, int]:
        pid = self.broker.pid
        sample = (rss_mib(pid), open_fds(pid), open_sockets(pid))
        self.samples.append(sample)
        return sample

    def _describe_members(self) -> int:
        with RawClient(self.broker.port, "conn-campaign") as raw:
            resp = raw.call(SHARE_GROUP_DESCRIBE, 1, {"group_ids": [GROUP], "include_authorized_operations": False})
        group = resp.groups[0]
        return len(group.members) if group.error_code == 0 else -1

    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> bool:
        """wait_until that samples the broker's resources between checks and reports a timeout as False."""
        def sampled() -> bool:
            if condition():
                return True
            self._sample()
            return False

        try:
            return wait_until(sampled, timeout, what, interval=0.5)
        except AssertionError:
            self.progress(f"  timed out waiting for {what}")
            return False

    def run(self) -> dict[str, Any]:
        broker = self.broker
        broker.start()
        bootstrap = broker.bootstrap
        create_topic(bootstrap, TOPIC, self.partitions)
        admin = admin_client(bootstrap)
        resource_ = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource_])[resource_].result(30)
        start_rss, start_fds, start_sockets = self._sample()
        t0 = time.monotonic()

        # 1. The raw connections: each asks ApiVersions and Metadata, and all stay open together.
        raws: list[RawClient] = []
        raw_failures: Counter[str] = Counter()
        for i in range(self.n_connections):
            try:
                raw = RawClient(broker.port, f"conn-{i}")
                raws.append(raw)
                raw.call(API_VERSIONS, 3, {"client_software_name": "conn-campaign",
                                           "client_software_version": "1"})
                meta = raw.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
                if not any(t.name == TOPIC for t in meta.topics):
                    raw_failures["metadata without the topic"] += 1
            except (OSError, ConnectionError, AssertionError) as err:
                raw_failures[type(err).__name__] += 1
        connect_s = time.monotonic() - t0
        _, _, sockets_with_raws = self._sample()
        self.progress(f"  {len(raws)} raw connections open ({sum(raw_failures.values())} failed) in "
                      f"{connect_s:.1f} s; broker sockets {sockets_with_raws}")

        # 2. The share group: every member joins, then the records come.
        books = Accounting()
        done = threading.Event()
        members: list[ConfluentMember | ShoalMember] = [
            ConfluentMember(f"confluent-{i}", bootstrap, books, done) for i in range(self.n_confluent)]
        members += [ShoalMember(f"shoal-{i}", bootstrap, books, done)
                    for i in range(self.n_members - self.n_confluent)]
        for m in members:
            m.start()
        peak_members = 0

        def all_joined() -> bool:
            nonlocal peak_members
            with contextlib.suppress(Exception):
                peak_members = max(peak_members, self._describe_members())
            return peak_members >= self.n_members

        joined = self._wait(all_joined, 300, f"{self.n_members} members in the group")
        self.progress(f"  group describe lists {peak_members} members; producing {self.n_records} records")
        produced = set(produce_all(bootstrap, TOPIC, [f"r{i}".encode() for i in range(self.n_records)],
                                   partition=None, **{"batch.size": 4000}))
        t_produced = time.monotonic()
        self._wait(lambda: books.accepted_count() >= len(produced), 600, "every record accepted")
        consume_s = time.monotonic() - t_produced
        with contextlib.suppress(Exception):
            peak_members = max(peak_members, self._describe_members())
        # Every raw connection is still served after all that (one more Metadata each).
        still_served = 0
        for raw in raws:
            with contextlib.suppress(OSError, ConnectionError, AssertionError):
                raw.call(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
                still_served += 1
        peak = self._sample()
        done.set()
        for m in members:
            m.join(30)
        for m in members:
            m.close()
        for raw in raws:
            raw.close()
        # Everyone is gone: the broker's sockets return to what they were before the campaign.
        settled = self._wait(lambda: open_sockets(broker.pid) <= start_sockets, 60, "the sockets to close")
        end_rss, end_fds, end_sockets = self._sample()
        accepted_twice = sum(1 for n in books.accepts.values() if n > 1)
        problems, warnings = scan_log(broker.log_path)
        report = {
            "connections": {"opened": len(raws), "failed": dict(raw_failures), "still_served": still_served,
                            "open_seconds": round(connect_s, 1)},
            "members": {"started": len(members), "confluent": self.n_confluent,
                        "shoal_client": len(members) - self.n_confluent, "described_max": peak_members,
                        "all_joined": joined, "with_accepts": len(books.per_member)},
            "records": {"produced": len(produced), "delivered": len(books.deliveries),
                        "deliveries": sum(books.deliveries.values()), "accepted": len(books.accepts),
                        "accepted_twice": accepted_twice,
                        "not_delivered": len(produced - set(books.deliveries)),
                        "accepted_outside_produced": len(set(books.accepts) - produced),
                        "consume_seconds": round(consume_s, 1)},
            "broker": {"rss_mib": {"start": round(start_rss), "max_sampled": round(max(s[0] for s in self.samples)),
                                   "peak_hwm": round(peak_rss_mib(broker.pid)), "end": round(end_rss)},
                       "fds": {"start": start_fds, "max": max(s[1] for s in self.samples), "end": end_fds,
                               "limit": self.fd_limit},
                       "sockets": {"start": start_sockets, "with_raw_connections": sockets_with_raws,
                                   "max": max(s[2] for s in self.samples), "at_peak": peak[2], "end": end_sockets,
                                   "settled": settled}},
            "member_errors": dict(books.errors.most_common(10)),
            "log_problems": problems, "log_warnings": warnings,
        }
        report["ok"] = (len(raws) == self.n_connections and not raw_failures and still_served == len(raws)
                        and joined and peak_members >= self.n_members
                        and len(produced) == self.n_records and not report["records"]["not_delivered"]
                        and set(books.accepts) == produced and accepted_twice == 0 and settled
                        and broker.alive() and not problems)
        return report


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import tempfile

    ap = argparse.ArgumentParser(prog="python -m tests.campaigns.connections", description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--confluent", type=int, default=10, help="members that are confluent ShareConsumers")
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--keep", action="store_true", help="keep the broker's data directory and log")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="shoal-conn-"))
    campaign = ConnectionCampaign(tmp, connections=args.connections, members=args.members, confluent=args.confluent,
                                  records=args.records, partitions=args.partitions, python=sys.executable,
                                  progress=lambda line: print(line, flush=True))
    print(f"connection campaign: {args.connections} connections, {args.members} share-group members "
          f"({args.confluent} confluent), {args.records} records; broker log {campaign.broker.log_path}", flush=True)
    return run_and_report(campaign, tmp, keep=args.keep)


if __name__ == "__main__":
    raise SystemExit(main())

