"""Helpers for the Spark tests: brokers, producing numbered records with headers, reading sink output."""

from __future__ import annotations

import functools
import os
import socket
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Producer

from tests.helpers import waiting
from tests.helpers.broker_process import REPO, BrokerProcess, venv_python
from tests.helpers.confluent_clients import create_topic

__all__ = ["create_topic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(tmp: Path, overrides: dict[str, str] | None = None, *, fixed_port: bool = False) -> BrokerProcess:
    props = dict(overrides or {})
    if fixed_port:  # restarts come back on the same port, where the clients look for it
        props["listeners"] = f"PLAINTEXT://127.0.0.1:{free_port()}"
    return BrokerProcess(tmp / "data", tmp / "broker.log", overrides=props, python=venv_python()).start()


def group_members(bootstrap: str, group: str) -> list[str]:
    """Member ids of a share group (ShareGroupDescribe)."""
    from shoal_client import BrokerConnection

    host, port = bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port), client_id="spark-tests") as conn:
        resp = conn.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})
    return [m.member_id for m in resp.groups[0].members]


def assigned_partitions(bootstrap: str, group: str) -> dict[str, int]:
    """Each member of a share group with the number of partitions assigned to it (ShareGroupDescribe)."""
    from shoal_client import BrokerConnection

    host, port = bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port), client_id="spark-tests") as conn:
        resp = conn.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})
    return {m.member_id: sum(len(t.partitions) for t in m.assignment.topic_partitions) for m in resp.groups[0].members}


def value_of(i: int, size: int = 0) -> bytes:
    text = f"record-{i:08d}".encode()
    return text + b"." * max(0, size - len(text))


def produce(bootstrap: str, topic: str, start: int, count: int, *, size: int = 0, partitions: int = 1) -> None:
    """Records start..start+count-1: key "k<i>", value value_of(i), headers n=<i> and a null-valued one."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, key=f"k{i}".encode(), value=value_of(i, size), partition=i % partitions,
                                 headers=[("n", str(i).encode()), ("empty", None)])
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def check_row(row: dict) -> int:
    """Assert one sink row is an intact record of `produce`; return its number."""
    i = int(row["value"][7:15])
    assert row["value"].rstrip(b".") == f"record-{i:08d}".encode(), row
    assert row["key"] == f"k{i}".encode(), row
    assert row["headers"] == [{"key": "n", "value": str(i).encode()}, {"key": "empty", "value": None}], row
    assert row["timestampType"] == 0 and row["deliveryCount"] >= 1 and row["offset"] >= 0, row
    return i


def read_rows(path: Path) -> list[dict]:
    """Rows of every finished batch directory (one with _SUCCESS) under `path`."""
    rows = []
    for done in sorted(path.glob("batch=*/_SUCCESS")):
        for f in sorted(done.parent.glob("*.parquet")):
            rows += pq.read_table(f).to_pylist()
    return rows


def numbers(rows: list[dict]) -> Counter:
    return Counter(check_row(r) for r in rows)


def written(path: Path) -> Counter:
    """numbers(read_rows(path)) while a query may be rewriting a batch directory (then: nothing, try again)."""
    try:
        return numbers(read_rows(path))
    except (OSError, pa.ArrowInvalid):
        return Counter()


# Spark conditions read sink files or a query's progress: five checks a second are plenty.
wait_until = functools.partial(waiting.wait_until, interval=0.2)


def stream_driver(bootstrap: str, topic: str, group: str, out: Path, checkpoint: Path, expect: int,
                  per_trigger: int, log, master: str = "local[2]") -> subprocess.Popen:
    """tests/spark/stream_driver.py in a process of its own, writing to `log`. A session of its own: the
    driver, its JVM and the Python processes it starts form one process group to kill."""
    from tests.helpers.spark_session import spark_env

    cmd = [venv_python(), "-m", "tests.spark.stream_driver", bootstrap, topic, group, str(out), str(checkpoint),
           str(expect), str(per_trigger), master]
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, **spark_env()}, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
