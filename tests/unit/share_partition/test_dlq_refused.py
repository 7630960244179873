"""A DLQ whose append is refused (an offline log directory, a full disk): the records are archived without a DLQ
copy, logged and counted, as for any DLQ that cannot be used; the state change goes on."""

from __future__ import annotations

import asyncio
import uuid

from broker.cluster.topics import TopicInfo
from broker.log import GroupCommitFlusher
from broker.replica_manager import ReplicaManager, storage_error
from broker.share_partition.dlq import DeadLetterQueue
from broker.share_partition.inflight import DEAD_REJECTED, DeadLetter
from tests.unit.share_partition.share_fakes import broker_config, group_configs

DLQ = TopicInfo("dlq.g", uuid.uuid4(), 1)


class DlqTopic:
    """The topic manager's lookups for an existing DLQ topic that allows being one."""

    def __init__(self) -> None:
        self.registry = self

    def get(self, name: str) -> TopicInfo | None:
        return DLQ if name == DLQ.name else None

    def str_config(self, info: TopicInfo, name: str) -> str:
        assert name == "errors.deadletterqueue.group.enable"
        return "true"

    def int_config(self, info: TopicInfo, name: str) -> int:
        assert name == "max.message.bytes"
        return 1 << 20


class RefusingReplicas(ReplicaManager):
    def append(self, info, partition, records, **kwargs):
        return storage_error(), None


def test_a_refused_dlq_append_archives_without_a_copy():
    async def run():
        config = broker_config({})
        topics = DlqTopic()
        dlq = DeadLetterQueue(config=config, topics=topics, replicas=RefusingReplicas(topics, GroupCommitFlusher()),
                              group_configs=group_configs(config, {"errors.deadletterqueue.topic.name": DLQ.name}))
        await dlq.write("g", "t", 0, [DeadLetter(3, 4, 1, DEAD_REJECTED)], None)  # raised TypeError before
        assert dlq.skipped == {"g": 2} and dlq.written == {}

    asyncio.run(run())
