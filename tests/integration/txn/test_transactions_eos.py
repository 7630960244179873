"""Exactly-once consume-transform-produce across a broker kill -9 (issue 17): a confluent-kafka loop in its own
process (tests/helpers/eos_loop.py: read_committed consumer in a group, transactional producer, offsets sent to
the transaction, abort and rewind on abortable errors, a new producer when fenced) copies an input topic to an
output topic while the broker is killed with SIGKILL in the middle of one of its transactions and restarted on
the same port and data directory. Afterwards a read_committed reader of the output sees every input record exactly
once, the group's committed offsets are the input's end offsets, nothing is left open (ListTransactions,
DescribeProducers) and every output partition's LSO is its high watermark.

Where the kill lands: after the transaction's records are produced (AddPartitionsToTxn and Produce done), or after
its offsets are sent too (AddOffsetsToTxn and TxnOffsetCommit done, EndTxn not sent); and once with the
transaction left to time out while the broker is down, so the restarted coordinator aborts it and fences the
producer, which the loop replaces; and once without holding anything, the kill landing wherever the running loop is.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.helpers.broker_process import REPO, free_port, venv_python
from tests.helpers.confluent_clients import committed_offsets, create_topic
from tests.helpers.raw_client import RawClient
from tests.helpers.txn_clients import (
    describe_txn,
    offsets,
    open_producer_transactions,
    open_transactions,
    read_to_end,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

INPUT, OUTPUT, PARTS, RECORDS = "eos-in", "eos-out", 4, 2000
GROUP, TID = "eos-group", "eos-loop"


def fill_input(bootstrap: str) -> dict[tuple[int, int], bytes]:
    """RECORDS keyed records from a plain idempotent producer, spread by key: their value by (partition, offset)."""
    delivered: dict[tuple[int, int], bytes] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})

    def on_delivery(err, msg) -> None:
        assert err is None, err
        delivered[(msg.partition(), msg.offset())] = msg.value()

    for i in range(RECORDS):
        producer.produce(INPUT, key=f"key-{i}".encode(), value=f"value-{i:04d}".encode(), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(delivered) == RECORDS
    return delivered


def events(progress: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in progress.read_text().splitlines() if line.endswith("}")]
    except FileNotFoundError:
        return []


def holding(progress: Path) -> bool:
    return any(e["event"] == "holding" for e in events(progress))


def committed_txns(progress: Path) -> int:
    return max((e["txns"] for e in events(progress) if e["event"] == "committed"), default=0)


@pytest.mark.parametrize("kill_at", ["produced", "offsets", "timed-out", "running"])
def test_consume_transform_produce_exactly_once_across_kill9(broker_factory, tmp_path, kill_at):
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}",
                             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    create_topic(broker.bootstrap, INPUT, PARTS)
    create_topic(broker.bootstrap, OUTPUT, PARTS)
    input_records = fill_input(broker.bootstrap)
    expected = {coords: value.upper() for coords, value in input_records.items()}
    ends = {p: sum(1 for q, _ in input_records if q == p) for p in range(PARTS)}
    assert sorted(input_records) == [(p, o) for p in range(PARTS) for o in range(ends[p])]  # no control batches

    progress, release = tmp_path / "eos.progress", tmp_path / "eos.release"
    cfg = {"bootstrap": broker.bootstrap, "input": INPUT, "output": OUTPUT, "group": GROUP, "tid": TID,
           "ends": ends, "progress": str(progress), "release": str(release), "hold_after": 3,
           "hold_at": {"timed-out": "offsets", "running": None}.get(kill_at, kill_at),
           "timeout_ms": 3000 if kill_at == "timed-out" else 20_000, "batch": 100,
           "debug": os.environ.get("EOS_LOOP_DEBUG", "")}
    with open(tmp_path / "eos-loop.log", "wb") as log:
        loop = subprocess.Popen([venv_python(), "-m", "tests.helpers.eos_loop", json.dumps(cfg)], cwd=REPO,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        if kill_at == "running":  # no hold: the kill lands wherever the loop is (polling, producing, committing)
            wait_until(lambda: committed_txns(progress) >= 3, 60, "the loop committing 3 transactions")
        else:
            wait_until(lambda: holding(progress), 60, "the loop holding a transaction open after 3 commits")
        broker.kill9()
        broker.start()
        assert broker.port == port
        if kill_at == "timed-out":
            with RawClient(broker.port) as c:
                wait_until(lambda: describe_txn(c, TID).transaction_state == "CompleteAbort", 30,
                           "the restarted coordinator aborting the held transaction at its timeout")
        release.touch()
        wait_until(lambda: loop.poll() is not None, 90, "the loop consuming the whole input")
        trace = "\n".join(json.dumps(e) for e in events(progress)[-30:])
        assert loop.returncode == 0, f"loop exited {loop.returncode}:\n{(tmp_path / 'eos-loop.log').read_text()}"
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait(10)

    seen = read_to_end(broker.bootstrap, OUTPUT, PARTS, committed=True)
    coords = Counter()
    for v in seen:
        p, o, value = v.split(b":", 2)
        coords[(int(p), int(o))] += 1
        assert expected.get((int(p), int(o))) == value, v
    duplicates = {k: n for k, n in coords.items() if n > 1}
    missing = set(expected) - set(coords)
    assert not duplicates and not missing, (
        f"{len(duplicates)} duplicated (e.g. {sorted(duplicates)[:5]}), {len(missing)} missing "
        f"(e.g. {sorted(missing)[:5]}); loop events:\n{trace}")
    assert len(seen) == RECORDS

    assert committed_offsets(broker, GROUP, INPUT) == ends
    with RawClient(broker.port) as c:
        assert not open_transactions(c)
        assert not any(open_producer_transactions(c, OUTPUT, PARTS).values())
        assert offsets(c, OUTPUT, PARTS, committed=True) == offsets(c, OUTPUT, PARTS, committed=False)
    if kill_at == "timed-out":  # the held transaction was fenced: the loop carried on with a new producer
        assert sum(e["event"] == "producer" for e in events(progress)) >= 2, trace
