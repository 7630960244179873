"""Broker CPU per megabyte served: ShareFetch next to plain Fetch, for the same records, in one run.

    .venv/bin/python -m bench.share_fetch_cpu [--records-1k N] [--records-100 N] [--rounds R] [--request-mib M]
                                              [--base SOURCE_TREE]

Starts one Shoal broker, produces N records of 1 KiB and N of 100 B (confluent Producer, ~64 KB batches) into two
topics once, then reads each topic completely with plain Fetch (raw requests, 1 MiB per request) and with ShareFetch
(shoal_client's ShareGroupMember acquiring whole batches, acquire_mode batch_optimized: 1 MiB / 10 000 records per
request, every acquisition ACCEPTed piggy-backed on the next ShareFetch, as a consumer with implicit acknowledgement
does). Both read on connections that carried data already: a fresh connection's TCP send buffer starts small and
grows with use, and until it has, the broker answers in several writes at more CPU per MiB whatever the API (rounds
on fresh connections spread by 0.27-0.38 ms/MiB for the same Fetch reads). The Fetch client keeps one connection for
the whole run; the share member, new in every round (a new group), has its connection, share session, the
share-partition's load and its first WARMUP_FETCHES reads before its measurement (their CPU is printed apart).
SHOAL_BENCH_WARMUP_FETCHES and SHOAL_BENCH_IDLE_S (idle seconds before each measured read) change those settings.
Each read is measured as the broker process's CPU time, which the machine's load barely affects, unlike wall time:
the run time of all its threads in nanoseconds (/proc/<pid>/task/*/schedstat; the broker's worker threads live as
long as it does), else utime + stime from /proc/<pid>/stat (10 ms ticks: keep reads well above 1 s). A new share
group reads each round from the earliest offset, its state written to the same `__share_group_state` partition as
the other rounds' (see share_groups); a first round warms up and is not counted. Prints CPU milliseconds
per MiB served and the ShareFetch/Fetch ratio: of the medians, and the median of each round's own ratio (its
ShareFetch read over the Fetch read just before it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from bench.clients import create_topic, send
from bench.servers import free_port, start_shoal, stop, wait_for_port
from broker.share_coordinator.keys import SharePartitionKey, partition_for_coordinator_key
from shoal_client.connection import BrokerConnection
from shoal_client.member import ACCEPT, ShareGroupMember, acknowledgements

FETCH = 1
METADATA = 3
SHARE_STATE_TOPIC = "__share_group_state"
MAX_BYTES = 1 << 20
MAX_RECORDS = 10_000
# The in-flight limit caps what one ShareFetch may acquire: raised to its maximum so both paths serve about
# 1 MiB per request and the comparison is per byte, not per request.
OVERRIDES = {"group.share.partition.max.record.locks": "10000",
             "group.share.max.partition.max.record.locks": "10000"}
_TICK = os.sysconf("SC_CLK_TCK")
# Reads before each share read is measured: a fresh connection's send buffer is small and grows with the data
# sent (TCP autotuning), and until it has the broker answers in several writes, at more CPU per MiB, whatever the API.
WARMUP_FETCHES = int(os.environ.get("SHOAL_BENCH_WARMUP_FETCHES", "2"))
SETUP_CPU: list[float] = []  # broker CPU seconds of each share read's set-up (printed apart)
# Seconds of idleness before each measured read (0: reads follow one another, as a streaming consumer's do). On the
# 2-vCPU VM a read after 0.5 s of idleness costs ~0.075 ms/MiB less CPU, whichever API (the CPU's clock, most likely).
IDLE_S = float(os.environ.get("SHOAL_BENCH_IDLE_S", "0"))


def cpu_seconds(pid: int) -> float:
    try:
        return _run_ns(pid) / 1e9
    except OSError:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15)


def _run_ns(pid: int) -> int:
    """Nanoseconds the process's threads have run on a CPU (the first field of each thread's schedstat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # the thread ended while we listed them
            continue
    return total


def produce(bootstrap: str, topic: str, size: int, records: int) -> None:
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 64_000})
    send(producer, topic, b"x" * size, records)
    if producer.flush(120):
        raise RuntimeError("produce did not finish")


def plain_fetch(pid: int, conn: BrokerConnection, topic: str, records: int, max_bytes: int = MAX_BYTES
                ) -> tuple[float, int]:
    """Read every record with Fetch v12 from offset 0 on `conn` (kept from read to read: see WARMUP_FETCHES);
    (broker CPU s, bytes served)."""
    served, offset = 0, 0
    time.sleep(IDLE_S)
    before = cpu_seconds(pid)
    while offset < records:
        resp = conn.call(FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": []}, views=True)
        p = resp.responses[0].partitions[0]
        if p.error_code:
            raise RuntimeError(f"fetch error {p.error_code}")
        data = p.records or b""  # a view of the response, as the share member keeps its records
        served += len(data)
        offset = _next_offset(data, offset)
    cpu = cpu_seconds(pid) - before
    return cpu, served


def _next_offset(data: bytes, offset: int) -> int:
    """The offset after the last whole batch in `data` (batch headers only: baseOffset + lastOffsetDelta)."""
    at = 0
    while at + 61 <= len(data):
        length = int.from_bytes(data[at + 8:at + 12], "big")
        if at + 12 + length > len(data):
            break
        offset = int.from_bytes(data[at:at + 8], "big") + int.from_bytes(data[at + 23:at + 27], "big") + 1
        at += 12 + length
    return offset


def share_groups(conn: BrokerConnection, topic: str) -> Iterator[str]:
    """New share group ids whose state for `topic`'s partition 0 is written to one and the same `__share_group_state`
    partition, as one long-lived group's is. A state partition's first index entries create its `.index` and
    `.timeindex` files (each file creation takes ~0.4 ms of broker CPU on the 2-vCPU VM's ext4): once per
    partition and segment, which a new group per round on a fresh state partition would count again in every
    round, at ~8 us per request of a 100-request round."""
    resp = conn.call(METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic},
                                               {"topic_id": uuid.UUID(int=0), "name": SHARE_STATE_TOPIC}],
                                    "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    by_name = {t.name: t for t in resp.topics}
    topic_id, partitions = by_name[topic].topic_id, len(by_name[SHARE_STATE_TOPIC].partitions)
    target = None
    while True:
        group = f"bench-share-{uuid.uuid4()}"
        at = partition_for_coordinator_key(SharePartitionKey(group, topic_id, 0).coordinator_key(), partitions)
        if target is None:
            target = at
        if at == target:
            yield group


def share_fetch(pid: int, bootstrap: str, topic: str, records: int, max_bytes: int = MAX_BYTES, *,
                group: str) -> tuple[float, int]:
    """Read every record through the new share group `group` with piggy-backed ACCEPTs; (broker CPU s, bytes
    served). The group's set-up (config, join, assignment) is not counted: only the fetches and
    acknowledgements."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    member = ShareGroupMember(bootstrap, group, [topic], acquire_mode="batch_optimized").start()
    served = acquired = 0
    acks: dict = {}
    try:
        if not member.wait_for_assignment(30):
            raise RuntimeError("no assignment")
        # Set-up, not counted: the member's connection and share session, the share-partition's load, and the first
        # WARMUP_FETCHES reads, which grow the new connection's TCP send buffer (as the Fetch client's connection,
        # kept from round to round, has); the last of them is acknowledged by the first fetch measured.
        setup_start = cpu_seconds(pid)
        for _ in range(WARMUP_FETCHES):
            first = member.fetch(max_records=MAX_RECORDS, max_bytes=max_bytes, max_wait_ms=500, acknowledgements=acks)
            acquired += first.count
            acks = acknowledgements(first.acquired, ACCEPT)
        time.sleep(IDLE_S)
        before = cpu_seconds(pid)
        SETUP_CPU.append(before - setup_start)
        deadline = time.monotonic() + 300
        while acquired < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"share fetch stalled at {acquired}/{records}")
            result = member.fetch(max_records=MAX_RECORDS, max_bytes=max_bytes, max_wait_ms=500,
                                  acknowledgements=acks)
            if result.ack_errors:
                raise RuntimeError(f"acknowledgement errors {result.ack_errors}")
            served += result.bytes
            acquired += result.count
            acks = acknowledgements(result.acquired, ACCEPT)
        member.close(acks, leave=False)  # the final ShareFetch carries the last acknowledgements
        cpu = cpu_seconds(pid) - before
    finally:
        member.close()
    return cpu, served


def start_tree(tree: Path, data_dir: Path) -> tuple[subprocess.Popen, int]:
    """A broker run from another source tree (--base: the code before a change), configured as start_shoal's."""
    port = free_port()
    extra = [arg for key, value in OVERRIDES.items() for arg in ("--override", f"{key}={value}")]
    log = open(data_dir / "shoal.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={data_dir / 'data'}", "--log-level", "warning", *extra],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stdout=log, stderr=subprocess.STDOUT)
    wait_for_port(port, proc)
    return proc, port


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records-1k", type=int, default=100_000)
    ap.add_argument("--records-100", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--request-mib", type=float, default=MAX_BYTES / (1 << 20),
                    help="MaxBytes of every Fetch and ShareFetch (ShareFetch also stops at 10 000 records)")
    ap.add_argument("--base", type=Path, default=None,
                    help="also run a broker from this source tree (e.g. a `git worktree` of main), reading the "
                         "same records with rounds alternated: before and after a change in one run")
    args = ap.parse_args()
    max_bytes = int(args.request_mib * (1 << 20))
    with contextlib.ExitStack() as stack:
        brokers: dict[str, tuple[subprocess.Popen, int]] = {}
        fetch_conns: dict[str, BrokerConnection] = {}
        trees = {"": None} if args.base is None else {"base": args.base.resolve(), "this": None}
        for label, tree in trees.items():
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="shoal-bench-")))
            proc, port = start_shoal(tmp, OVERRIDES) if tree is None else start_tree(tree, tmp)
            stack.callback(stop, proc)
            brokers[label] = (proc, port)
            # one Fetch connection per broker for the whole run (warmed by the first round, which is not counted)
            fetch_conns[label] = stack.enter_context(BrokerConnection("127.0.0.1", port, client_id="bench-fetch"))
        print(f"load: {os.getloadavg()}")
        print(f"{'size':>5} {'path':>16} {'MiB':>7} {'cpu ms/MiB (median of rounds)':>30}")
        for size, records in ((1024, args.records_1k), (100, args.records_100)):
            topic = f"cpu-{size}"
            for _proc, port in brokers.values():
                produce(f"127.0.0.1:{port}", topic, size, records)
            per: dict[str, list[float]] = {}
            mib: dict[str, float] = {}
            groups = {label: share_groups(fetch_conns[label], topic) for label in brokers}
            for round_no in range(args.rounds + 1):  # round 0 warms up (codecs compiled, caches filled)
                for label, (proc, port) in brokers.items():
                    bootstrap = f"127.0.0.1:{port}"
                    for name in ("Fetch", "ShareFetch"):
                        cpu, served = plain_fetch(proc.pid, fetch_conns[label], topic, records, max_bytes) \
                            if name == "Fetch" \
                            else share_fetch(proc.pid, bootstrap, topic, records, max_bytes,
                                             group=next(groups[label]))
                        if round_no == 0:
                            continue
                        key = f"{label} {name}".strip()
                        mib[key] = served / (1 << 20)
                        per.setdefault(key, []).append(cpu / mib[key])
            for key, xs in per.items():
                print(f"{size:>5} {key:>16} {mib[key]:>7.1f} {statistics.median(xs) * 1000:>14.3f}  "
                      f"({' '.join(f'{x * 1000:.3f}' for x in xs)})")
            if SETUP_CPU:
                print(f"{size:>5} share set-up (connection, session, first load; not in the figures above): "
                      f"{statistics.median(SETUP_CPU) * 1000:.2f} ms of broker CPU per group")
                SETUP_CPU.clear()
            for label in brokers:
                shares, fetches = per[f"{label} ShareFetch".strip()], per[f"{label} Fetch".strip()]
                ratio = statistics.median(shares) / statistics.median(fetches)
                # each round's ShareFetch over the Fetch read just before it: drifts of the machine's speed
                # during the run (a shared VM) cancel out of these
                paired = statistics.median(s / f for s, f in zip(shares, fetches, strict=True))
                print(f"{size:>5} {label + ' ' if label else ''}ShareFetch/Fetch CPU per MiB: {ratio:.2f}x "
                      f"(median of the rounds' own ratios {paired:.2f}x)")
        print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
