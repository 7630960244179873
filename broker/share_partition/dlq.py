"""Dead-letter queue for share groups (KIP-1191, Kafka 4.4).

A share group with the group config `errors.deadletterqueue.topic.name` gets one DLQ record per record archived
because a consumer rejected it or because it reached the delivery count limit. The record carries context
headers (`__dlq.errors.topic`, `.partition`, `.offset`, `.group`, `.delivery.count`, `.message`, as Kafka names
them); key and value are null unless `errors.deadletterqueue.copy.record.enable` asks for a copy of the original
record. It goes to DLQ partition `source partition % DLQ partitions`.

Which topics may be a DLQ, as Kafka's cluster and topic configs decide: an existing topic only when its topic
config `errors.deadletterqueue.group.enable` is true; a missing one is created (with that config set) only when
the broker config `errors.deadletterqueue.auto.create.topics.enable` is true and its name starts with
`errors.deadletterqueue.topic.name.prefix` ("dlq." by default). Internal topics never.

Unlike Kafka (which writes the DLQ asynchronously through an ARCHIVING state), the share-partition leader calls
`write` before it persists the archived state, and only answers the acknowledgement once both are durable. A
DLQ that cannot be used (not configured for it, missing without auto-creation) is logged and counted, and the
records are archived without a DLQ copy; a failed write to a usable DLQ fails the state change instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from broker.config.components import ComponentConfig, ConfigSource, setting
from broker.config.group_config import GroupConfig
from broker.share_partition.inflight import DEAD_REJECTED, DeadLetter
from protocol.errors import ErrorCode
from protocol.primitives import BytesParts
from protocol.records import Record, build_batch, iter_batch_views, iter_records

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager
    from broker.cluster.topics import TopicInfo
    from broker.replica_manager import ReplicaManager

log = structlog.get_logger(__name__)

GROUP_ENABLE = "errors.deadletterqueue.group.enable"  # topic config
AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"  # broker configs
PREFIX = "errors.deadletterqueue.topic.name.prefix"

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"
MESSAGES = {DEAD_REJECTED: "Offset rejected by client.",
            "delivery limit": "Offset delivery count exceeded the threshold."}
WARN_EVERY_S = 60.0  # an unusable DLQ is reported at most this often per group


@dataclass(frozen=True)
class DeadLetterQueueConfig(ComponentConfig):
    """The cluster's DLQ settings (KIP-1191) and the partitions of a DLQ topic it creates."""

    auto_create_topics_enable: bool = setting(AUTO_CREATE)
    topic_name_prefix: str = setting(PREFIX)
    num_partitions: int = setting("num.partitions")


class _Offsets(NamedTuple):
    first_offset: int
    last_offset: int


class DlqWriteError(Exception):
    """The DLQ records could not be made durable: the state change must not be answered as done."""


class DeadLetterQueue:
    def __init__(self, *, config: ConfigSource, topics: TopicManager, replicas: ReplicaManager,
                 group_configs: Callable[[str], GroupConfig]) -> None:
        self._config = config
        self._topics = topics
        self._replicas = replicas
        self._group_configs = group_configs
        self._create_lock = asyncio.Lock()
        self._warned: dict[tuple[str, str], float] = {}
        self.written: dict[str, int] = {}  # group -> DLQ records written (metrics)
        self.skipped: dict[str, int] = {}  # group -> archived records with no DLQ copy (DLQ unusable)

    def configured(self, group: str) -> bool:
        return bool(self._group_configs(group).errors_deadletterqueue_topic_name)

    async def write(self, group: str, topic: str, partition: int, letters: Sequence[DeadLetter],
                    source: TopicInfo | None) -> None:
        """Write one DLQ record per offset of `letters` (of `topic`'s `partition`; `source` is that topic while
        its records can be read, else None) and wait until they are durable. Raises DlqWriteError if a usable DLQ
        could not be written."""
        if not letters:
            return
        cfg = self._group_configs(group)
        name = cfg.errors_deadletterqueue_topic_name
        if not name:
            return
        count = sum(d.last_offset - d.first_offset + 1 for d in letters)
        info = await self._dlq_topic(group, name)
        if info is None:
            self.skipped[group] = self.skipped.get(group, 0) + count
            return
        copying = cfg.errors_deadletterqueue_copy_record_enable
        copies = self._source_records(source, partition, letters) if copying else {}
        now = int(time.time() * 1000)
        records = []
        for d in letters:
            headers_common = [(HEADER_TOPIC, topic.encode()), (HEADER_PARTITION, str(partition).encode())]
            for offset in range(d.first_offset, d.last_offset + 1):
                original = copies.get(offset)
                records.append(Record(
                    key=original.key if original is not None else None,
                    value=original.value if original is not None else None,
                    headers=[*headers_common, (HEADER_OFFSET, str(offset).encode()), (HEADER_GROUP, group.encode()),
                             (HEADER_DELIVERY_COUNT, str(d.delivery_count).encode()),
                             (HEADER_MESSAGE, MESSAGES.get(d.reason, d.reason).encode())],
                    timestamp=now))
        dlq_partition = partition % info.num_partitions
        max_bytes = self._topics.int_config(info, "max.message.bytes")
        replicas = self._replicas
        logs = []
        for batch in _batches(records, max_bytes):
            result, plog = replicas.append(info, dlq_partition, batch, allow_internal=False)
            if result.error != ErrorCode.NONE:
                self._warn(group, name, "DLQ write refused; records archived without a DLQ copy",
                           error=result.error.name, error_message=result.error_message)
                self.skipped[group] = self.skipped.get(group, 0) + count
                return
            logs.append(plog)
        try:
            await replicas.make_durable(logs)
        except Exception as err:  # noqa: BLE001 - the caller answers an error and does not archive
            raise DlqWriteError(f"DLQ {name}-{dlq_partition} not durable: {err!r}") from err
        self.written[group] = self.written.get(group, 0) + count

    async def _dlq_topic(self, group: str, name: str) -> Any:
        topics = self._topics
        info = topics.registry.get(name)
        if info is not None:
            if info.internal:
                self._warn(group, name, "an internal topic cannot be a DLQ")
                return None
            if topics.str_config(info, GROUP_ENABLE).lower() != "true":
                self._warn(group, name, f"DLQ topic does not allow it ({GROUP_ENABLE}=false)")
                return None
            return info
        settings = DeadLetterQueueConfig.from_config(self._config)  # at each use: both are dynamic
        prefix = settings.topic_name_prefix
        if not settings.auto_create_topics_enable or not name.startswith(prefix):
            self._warn(group, name, f"DLQ topic does not exist and is not auto-created ({AUTO_CREATE}, "
                                    f"prefix {prefix!r})")
            return None
        async with self._create_lock:
            info = topics.registry.get(name)
            if info is None:
                from broker.cluster.manager import TopicPlan

                try:
                    topics.registry.check_new_topic(name)
                    info = await topics.create_planned(TopicPlan(
                        name, settings.num_partitions, {GROUP_ENABLE: "true"}))
                except Exception as err:  # noqa: BLE001 - an invalid name etc.: reported, records still archived
                    self._warn(group, name, "DLQ topic could not be created", error=repr(err))
                    return None
                log.info("share group DLQ topic created", group=group, topic=name, partitions=info.num_partitions)
        return info

    def _source_records(self, source: TopicInfo | None, partition: int, letters: Sequence[DeadLetter]
                        ) -> dict[int, Record]:
        """offset -> original record for the offsets of `letters` still in the log (copy mode), read through the
        replica manager as the share-partition leader reads them (the whole batches holding them)."""
        out: dict[int, Record] = {}
        if source is None:
            return out
        wanted = {o for d in letters for o in range(d.first_offset, d.last_offset + 1)}
        log_start = self._replicas.log_offsets(source.name, partition)[0]
        ranges = [_Offsets(max(d.first_offset, log_start), d.last_offset) for d in letters if d.last_offset >= log_start]
        data = self._replicas.read_batches(source.name, partition, ranges)
        for part in data.parts if isinstance(data, BytesParts) else (data,):
            for _pos, header, view in iter_batch_views(part):
                if not header.is_control:
                    for record in iter_records(view):
                        if record.offset in wanted:
                            out[record.offset] = record
        return out

    def _warn(self, group: str, name: str, message: str, **fields: Any) -> None:
        now = time.monotonic()
        if now - self._warned.get((group, name), -WARN_EVERY_S) >= WARN_EVERY_S:
            self._warned[(group, name)] = now
            log.warning(message, group=group, dlq_topic=name, **fields)


def _batches(records: list[Record], max_bytes: int) -> list[bytes]:
    """Records in batches under the DLQ topic's max.message.bytes (a single too-big record goes alone and is
    refused by the log, as Kafka's broker would refuse it)."""
    out: list[bytes] = []
    current: list[Record] = []
    size = 61
    for r in records:
        est = 32 + len(r.key or b"") + len(r.value or b"") + sum(len(k) + len(v or b"") + 4 for k, v in r.headers)
        if current and size + est > max_bytes:
            out.append(build_batch(current))
            current, size = [], 61
        current.append(r)
        size += est
    if current:
        out.append(build_batch(current))
    return out
