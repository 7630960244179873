"""The state the differential tool tests set up on each broker before running a tool against it (tests/differential/
test_kafka_tools*.py): topics whose partitions all have a leader that answers, records written in batches of our
own codecs (the same bytes on both brokers), files the tools read."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from protocol import records as rec
from tests.helpers.differential import Target
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import wait_until

CREATE_TOPICS, LIST_OFFSETS, PRODUCE, FIND_COORDINATOR = 19, 2, 0, 10
# Recent, whole seconds and the same on both brokers: records older than retention.ms (7 days) would have their
# segment deleted by Kafka's retention, moving the log start offset.
BASE_TIMESTAMP = (int(time.time()) - 3600) * 1000


def create_topic(target: Target, client: RawClient, base: str, partitions: int = 1,
                 configs: Mapping[str, str] | None = None) -> str:
    """A new topic named from `base` (target.unique), once each partition answers ListOffsets."""
    name = target.unique(base)
    resp = client.call(CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}], "timeout_ms": 30_000,
        "validate_only": False})
    assert resp.topics[0].error_code == 0, resp.topics[0]

    def led() -> bool:
        r = client.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": p, "timestamp": -1} for p in range(partitions)]}]})
        return all(p.error_code == 0 for t in r.topics for p in t.partitions)
    wait_until(led, 30, f"leaders for {name}")
    return name


def produce(client: RawClient, topic: str, partition: int, values: Sequence[bytes], *,
            timestamp: int = BASE_TIMESTAMP, step_ms: int = 1000, per_batch: int = 1) -> int:
    """Write `values` to one partition, `per_batch` records to a batch, record i at `timestamp + i * step_ms`;
    returns the base offset of the first batch."""
    first = None
    for start in range(0, len(values), per_batch):
        chunk = values[start:start + per_batch]
        at = timestamp + start * step_ms
        batch = rec.build_batch([rec.Record(None, v, timestamp=at + i * step_ms) for i, v in enumerate(chunk)],
                                timestamp=at)
        resp = client.call(PRODUCE, 9, {"acks": -1, "timeout_ms": 10_000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        answer = resp.responses[0].partition_responses[0]
        assert answer.error_code == 0, answer
        first = answer.base_offset if first is None else first
    return first if first is not None else -1


def offsets_topic(client: RawClient) -> None:
    """Make sure __consumer_offsets exists (Kafka creates it at the first FindCoordinator of a group)."""
    def found() -> bool:
        r = client.call(FIND_COORDINATOR, 4, {"key": "", "key_type": 0, "coordinator_keys": ["tool-state"]})
        return r.coordinators[0].error_code == 0
    wait_until(found, 120, "the group coordinator")


def json_file(directory: Path, name: str, content: object) -> str:
    path = Path(directory) / name
    path.write_text(json.dumps(content))
    return str(path)
