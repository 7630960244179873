"""TopicManager.load: what happens to directories and journal entries the journal does not account for."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from broker.cluster.journal import MetadataJournal
from broker.cluster.manager import TopicManager
from broker.cluster.topics import PARTITION_RECORD, TOPIC_RECORD
from broker.config import BrokerConfig
from broker.log import LogManager, PartitionLog
from broker.log.log_manager import METADATA_LOG_DIR
from protocol import records as rec


def _open(data: Path) -> tuple[TopicManager, LogManager, PartitionLog]:
    config = BrokerConfig({"log.dirs": str(data)})
    logs = LogManager(data, config.log_config({}))
    logs.start()
    journal_log = PartitionLog(data / METADATA_LOG_DIR, strict_recovery=True)
    topics = TopicManager(config, logs, MetadataJournal(journal_log), 1)
    topics.load()
    return topics, logs, journal_log


def _close(logs: LogManager, journal_log: PartitionLog) -> None:
    logs.close()
    journal_log.close()


def test_orphans_with_data_are_moved_aside_and_removed_topics_are_deleted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topics, logs, journal_log = _open(data)
    asyncio.run(topics.create_topic("gone", num_partitions=1, replication_factor=1, assignments=[], configs={},
                                    validate_only=False))
    asyncio.run(topics.delete_topic(name="gone", topic_id=None))
    _close(logs, journal_log)
    # a crash between the journal's RemoveTopicRecord and the delete leaves the directory (with data) behind
    leftover = PartitionLog(data / "gone-0")
    leftover.append(rec.build_batch([rec.Record(None, b"old")]))
    leftover.close()
    # a directory holding data the journal never heard of
    unknown = PartitionLog(data / "unknown-0")
    unknown.append(rec.build_batch([rec.Record(None, b"precious")]))
    unknown.close()
    PartitionLog(data / "empty-0").close()

    topics, logs, journal_log = _open(data)
    assert logs.partitions() == []
    assert not (data / "gone-0").exists() and not (data / "empty-0").exists()
    moved = [p for p in data.iterdir() if p.name.startswith("unknown-0.") and p.name.endswith("-stray")]
    assert len(moved) == 1 and (moved[0] / "00000000000000000000.log").stat().st_size > 0
    _close(logs, journal_log)


def test_a_journaled_cluster_metadata_topic_is_dropped_without_touching_the_journal(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topics, logs, journal_log = _open(data)
    # what older versions allowed: a client topic named __cluster_metadata (its partition 0 is the journal)
    tid = uuid.uuid4()
    asyncio.run(topics.commit_records([(TOPIC_RECORD, {"name": "__cluster_metadata", "topic_id": tid}),
                                       (PARTITION_RECORD, {"partition_id": 0, "topic_id": tid})]))
    end = journal_log.log_end_offset
    _close(logs, journal_log)

    topics, logs, journal_log = _open(data)
    assert topics.registry.get("__cluster_metadata") is None
    assert journal_log.log_end_offset == end + 1  # the RemoveTopicRecord, nothing truncated
    assert ("__cluster_metadata", 0) not in logs.partitions()
    _close(logs, journal_log)
    topics, logs, journal_log = _open(data)  # and it stays gone
    assert topics.registry.get("__cluster_metadata") is None and journal_log.log_end_offset == end + 1
    _close(logs, journal_log)
