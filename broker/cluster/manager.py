"""TopicManager: the component behind topic admin APIs, auto-creation and partition-log lookup.

A creation is validated, its partition logs are created (in worker threads: this is where the resources are
checked, before anything is journaled), then it is written to the metadata journal (fsynced) and applied to the
registry. A crash before the journal write leaves empty directories that the next start removes; a failure to
create the logs answers KAFKA_STORAGE_ERROR and journals nothing. A deletion is journaled first and its directories
are removed afterwards (in a worker thread). Topic changes run one at a time (an asyncio lock), so two requests
cannot create the same topic while the first one waits for its logs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog

from broker.cluster.journal import MetadataJournal
from broker.cluster.topics import (
    CLUSTER_METADATA_TOPIC,
    CONFIG_RECORD,
    PARTITION_RECORD,
    PRODUCER_IDS_RECORD,
    REMOVE_TOPIC_RECORD,
    TOPIC_RECORD,
    TOPIC_RESOURCE,
    TopicError,
    TopicInfo,
    TopicRegistry,
)
from broker.config.components import ComponentConfig, setting
from broker.log.dir_failure import KafkaStorageError
from broker.log.log_manager import delete_logs
from broker.log.partition_log import PartitionLog
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

# Kafka's controller refuses one user operation (a CreateTopics, a CreatePartitions, a Metadata request's
# auto-creations) that would write more than this many metadata records: POLICY_VIOLATION "Unable to perform
# excessively large batch operation." (QuorumController.MAX_RECORDS_PER_USER_OP).
MAX_RECORDS_PER_USER_OP = 10_000

# As Kafka: group metadata is compacted by key; share state is a snapshot+update stream that compaction would
# corrupt (it keeps only the newest ShareUpdate per key), so it is never trimmed by time or size and the share
# coordinator prunes it explicitly.
INTERNAL_TOPIC_CONFIGS = {
    "__consumer_offsets": {"cleanup.policy": "compact"},
    "__transaction_state": {"cleanup.policy": "compact"},
    "__share_group_state": {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"},
}


POLICY_VIOLATION_MESSAGE = "Unable to perform excessively large batch operation."


@dataclass(frozen=True)
class TopicManagerConfig(ComponentConfig):
    """The topic settings of the broker: defaults of new topics, and the internal topics' partitions and
    segments (as Kafka creates them)."""

    num_partitions: int = setting("num.partitions")
    default_replication_factor: int = setting("default.replication.factor")
    auto_create_topics_enable: bool = setting("auto.create.topics.enable")
    delete_topic_enable: bool = setting("delete.topic.enable")
    offsets_topic_num_partitions: int = setting("offsets.topic.num.partitions")
    offsets_topic_segment_bytes: int = setting("offsets.topic.segment.bytes")
    transaction_state_log_num_partitions: int = setting("transaction.state.log.num.partitions")
    transaction_state_log_segment_bytes: int = setting("transaction.state.log.segment.bytes")
    share_state_topic_num_partitions: int = setting("share.coordinator.state.topic.num.partitions")

    def internal_topics(self) -> dict[str, TopicPlan]:
        """The internal topics as Kafka creates them: __consumer_offsets and __transaction_state with segments
        of their own size."""
        configs = {name: dict(c) for name, c in INTERNAL_TOPIC_CONFIGS.items()}
        configs["__consumer_offsets"]["segment.bytes"] = str(self.offsets_topic_segment_bytes)
        configs["__transaction_state"]["segment.bytes"] = str(self.transaction_state_log_segment_bytes)
        counts = {"__consumer_offsets": self.offsets_topic_num_partitions,
                  "__share_group_state": self.share_state_topic_num_partitions,
                  "__transaction_state": self.transaction_state_log_num_partitions}
        return {name: TopicPlan(name, count, configs[name]) for name, count in counts.items()}


@dataclass(frozen=True)
class TopicPlan:
    """A validated topic creation: what `create_planned` will journal and create."""

    name: str
    num_partitions: int
    configs: dict[str, str]

    @property
    def records(self) -> int:
        """Metadata records the creation writes (TopicRecord, PartitionRecords, ConfigRecords)."""
        return 1 + self.num_partitions + len(self.configs)


def check_records_per_operation(records: int) -> None:
    if records > MAX_RECORDS_PER_USER_OP:
        raise TopicError(ErrorCode.POLICY_VIOLATION, POLICY_VIOLATION_MESSAGE)


class TopicManager:
    def __init__(self, config, log_manager, journal: MetadataJournal, node_id: int) -> None:
        self._config = config
        self._logs = log_manager
        self._journal = journal
        self._node_id = node_id
        self.registry = TopicRegistry()
        self._on_delete: list = []
        self._changes = asyncio.Lock()  # one topic change at a time (creations wait for their logs)

    # --- start-up --------------------------------------------------------------------------------------------
    def load(self) -> None:
        """Replay the journal and open every partition log (several threads at once). Blocking: at start-up,
        call it from a worker thread."""
        for record_type, value in self._journal.replay():
            self.registry.apply(record_type, value)
        self._drop_reserved_topic()
        missing = []
        for info in self.registry.all():
            config = self.log_config(info)
            for p in range(info.num_partitions):
                plog = self._logs.find(info.name, p)
                if plog is None:
                    missing.append(((info.name, p), config))
                else:
                    plog.reconfigure(config)
        self._logs.register(self._logs.open_many(missing))
        self._handle_orphans()

    def _drop_reserved_topic(self) -> None:
        """Older versions let a client create `__cluster_metadata`, whose partition 0 directory is the journal's.
        Such a topic is removed from the journal; its directory (the journal itself) is left alone."""
        info = self.registry.get(CLUSTER_METADATA_TOPIC)
        if info is not None:
            log.error("removing client topic with the reserved name of the metadata log", topic=info.name,
                      topic_id=str(info.topic_id))
            self._commit_now([(REMOVE_TOPIC_RECORD, {"topic_id": info.topic_id})])

    def _handle_orphans(self) -> None:
        """Partition directories the journal does not account for. Those of topics the journal removed (a crash
        between the journal write and the delete) and empty ones are deleted; any other holds data this broker
        cannot explain, so it is moved aside (`-stray`, as Kafka does with stray logs), never deleted."""
        live = {(i.name, p) for i in self.registry.all() for p in range(i.num_partitions)}
        for name, partition in list(self._logs.partitions()):
            if (name, partition) in live:
                continue
            plog = self._logs.get(name, partition)
            if name in self.registry.removed_names or plog.log_end_offset == 0:
                log.info("removing orphan partition", topic=name, partition=partition)
                self._logs.delete(name, partition)
            else:
                moved = self._logs.move_aside(name, partition)
                log.error("partition directory unknown to the metadata journal moved aside", topic=name,
                          partition=partition, log_end_offset=plog.log_end_offset, moved_to=str(moved))

    async def ensure_internal_topics(self) -> None:
        """Create the internal topics that do not exist (an existing one keeps its partition count)."""
        for name, plan in self.settings.internal_topics().items():
            if name not in self.registry:
                async with self._changes:
                    await self._create(plan)

    def on_delete(self, callback) -> None:
        """Register `callback(info)` to run after a topic is deleted (caches keyed by topic)."""
        self._on_delete.append(callback)

    # --- lookups ---------------------------------------------------------------------------------------------
    @property
    def settings(self) -> TopicManagerConfig:
        return TopicManagerConfig.from_config(self._config)

    @property
    def auto_create_enabled(self) -> bool:
        return self.settings.auto_create_topics_enable

    def log(self, topic: str, partition: int):
        return self._logs.get(topic, partition)

    def find_log(self, topic: str, partition: int):
        """The partition's log, or None (never created, or deleted)."""
        return self._logs.find(topic, partition)

    def log_config(self, info: TopicInfo):
        return self._config.log_config(info.configs)

    def topic_config(self, info: TopicInfo, name: str):
        return self._config.topic_value(name, info.configs)

    def int_config(self, info: TopicInfo, name: str) -> int:
        return int(self.topic_config(info, name))

    def str_config(self, info: TopicInfo, name: str) -> str:
        return str(self.topic_config(info, name))

    def topic_config_entries(self, info: TopicInfo, keys=None, *, raw: bool = False):
        return self._config.describe_topic(info.configs, keys, raw=raw)

    # --- changes ---------------------------------------------------------------------------------------------
    def auto_create_records(self, topics: int) -> int:
        """Metadata records that auto-creating `topics` topics writes (a TopicRecord and PartitionRecords each)."""
        return topics * (1 + self.settings.num_partitions)

    async def auto_create(self, name: str) -> TopicInfo:
        if name == CLUSTER_METADATA_TOPIC:
            # Kafka forwards auto-creation to its controller, which refuses this name; Metadata keeps answering
            # UNKNOWN_TOPIC_OR_PARTITION for it.
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self.registry.check_new_topic(name)
        return await self.create_planned(TopicPlan(name, self.settings.num_partitions, {}))

    def plan_topic(self, name: str, *, num_partitions: int, replication_factor: int,
                   assignments: list[tuple[int, list[int]]],
                   configs: Mapping[str, str | None] | list[tuple[str, str | None]]) -> TopicPlan:
        """Validate a CreateTopics entry (no state change), in the order of Kafka's ReplicationControlManager: the
        name, the configs, then the partitions (`assignments`: (partition index, broker ids) as requested).
        Raises TopicError with Kafka's error and message."""
        self.registry.check_new_topic(name)
        clean = self._validate_topic_configs(configs)
        if assignments:
            if replication_factor != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                 "replication factor was not set to -1.")
            if num_partitions != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                 "numPartitions was not set to -1.")
            indexes: set[int] = set()
            factor: int | None = None
            for index, replicas in assignments:
                if index in indexes:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Found multiple manual partition assignments for partition {index}")
                self._check_assignment(replicas, factor)
                factor = len(replicas)
                indexes.add(index)
            if any(i not in indexes for i in range(len(indexes))):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "partitions should be a consecutive 0-based integer sequence")
            return TopicPlan(name, len(indexes), clean)
        if replication_factor < -1 or replication_factor == 0:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default value.")
        if num_partitions < -1 or num_partitions == 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions was set to an invalid non-positive value.")
        if num_partitions == -1:
            num_partitions = self.settings.num_partitions
        if replication_factor == -1:
            replication_factor = self.settings.default_replication_factor
        if replication_factor > 1:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target replication factor "
                f"of {replication_factor} cannot be reached because only 1 broker(s) are registered or some "
                "brokers have all their log directories cordoned.",
            )
        return TopicPlan(name, num_partitions, clean)

    def _check_assignment(self, replicas: list[int], factor: int | None) -> None:
        """Kafka's validateManualPartitionAssignment: one partition's replicas name registered brokers (only
        this one here), each once, as many as the other partitions have."""
        if not replicas:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes an empty replica list.")
        previous = None
        for broker in sorted(replicas):
            if broker != self._node_id:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                 f"broker {broker}, but no such broker is registered.")
            if broker == previous:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                 f"the broker {broker} more than once.")
            previous = broker
        if factor is not None and len(replicas) != factor:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes a "
                             f"partition with {len(replicas)} replica(s), but this is not consistent with previous "
                             f"partitions, which have {factor} replica(s).")

    async def create_topic(self, name: str, *, num_partitions: int, replication_factor: int,
                           assignments: list[tuple[int, list[int]]],
                           configs: Mapping[str, str | None] | list[tuple[str, str | None]],
                           validate_only: bool) -> TopicInfo:
        """One topic on its own (CreateTopics requests go through plan_topic/create_planned to bound the whole
        request as Kafka does)."""
        plan = self.plan_topic(name, num_partitions=num_partitions, replication_factor=replication_factor,
                               assignments=assignments, configs=configs)
        check_records_per_operation(plan.records)
        if validate_only:
            return TopicInfo(name, uuid.UUID(int=0), plan.num_partitions, plan.configs)
        return await self.create_planned(plan)

    async def create_planned(self, plan: TopicPlan) -> TopicInfo:
        async with self._changes:
            self.registry.check_new_topic(plan.name)  # again: another change may have run while we waited
            return await self._create(plan)

    def _validate_topic_configs(self, configs: Mapping[str, str | None] | list[tuple[str, str | None]]
                                ) -> dict[str, str]:
        """A new topic's configs as given (the last value of a key given twice wins, as Kafka's map of them)."""
        configs = list(configs.items()) if isinstance(configs, Mapping) else configs
        nulls = [key for key, value in configs if value is None]
        if nulls:
            raise TopicError(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls))
        clean: dict[str, str] = {}
        for key, value in configs:
            try:
                clean[key] = self._config.validate_topic_value(key, value)
            except ValueError as err:
                raise TopicError(ErrorCode.INVALID_CONFIG, str(err)) from None
        try:
            self._config.validate_topic_values(clean)
        except ValueError as err:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(err)) from None
        return clean

    async def _create(self, plan: TopicPlan) -> TopicInfo:
        name = plan.name
        topic_id = uuid.uuid4()
        entries: list[tuple[int, dict]] = [(TOPIC_RECORD, {"name": name, "topic_id": topic_id})]
        entries += [(PARTITION_RECORD, {"partition_id": p, "topic_id": topic_id}) for p in range(plan.num_partitions)]
        entries += [
            (CONFIG_RECORD, {"resource_type": TOPIC_RESOURCE, "resource_name": name, "name": k, "value": v})
            for k, v in plan.configs.items()
        ]
        config = self._config.log_config(plan.configs)
        await self._with_new_logs([((name, p), config) for p in range(plan.num_partitions)], entries)
        log.info("topic created", topic=name, topic_id=str(topic_id), partitions=plan.num_partitions)
        info = self.registry.get(name)
        assert info is not None  # applied by the commit above
        return info

    async def _with_new_logs(self, logs: list[tuple[tuple[str, int], object]], entries: list[tuple[int, dict]]) -> None:
        """Create the partition logs (worker threads), then journal `entries`; undo the logs if either fails."""
        try:
            opened = await asyncio.to_thread(self._logs.open_many, logs)
        except OSError as err:
            log.error("cannot create partition logs", partitions=len(logs), error=str(err))
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot create the partition logs: {err}") from None
        try:
            batch = await asyncio.to_thread(self._journal.encode, entries)  # thousands of records for big changes
        except BaseException:
            await asyncio.to_thread(self._logs.discard, opened)
            raise
        try:
            # the logs become visible with the records, in the same loop step: never a topic without its logs
            await self.commit_records(entries, batch=batch, then=lambda: self._logs.register(opened))
        except Exception:  # not a cancellation: a cancelled caller's commit still completes (and registers)
            await asyncio.to_thread(self._logs.discard, opened)
            raise

    async def delete_topic(self, *, name: str | None, topic_id: uuid.UUID | None) -> TopicInfo:
        async with self._changes:
            info = self.registry.get(name) if name is not None else \
                self.registry.by_id(topic_id) if topic_id is not None else None
            if info is None:
                if name is not None:
                    raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     "This server does not host this topic-partition.")
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
            if info.internal:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Topic {info.name} is internal and cannot be deleted.")
            if not self.settings.delete_topic_enable:
                raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            detached: list[PartitionLog] = []

            def forget() -> None:  # in the loop step that applies the removal
                detached.extend(plog for p in range(info.num_partitions)
                                if (plog := self._logs.detach(info.name, p)) is not None)
                for callback in self._on_delete:
                    callback(info)

            await self.commit_records([(REMOVE_TOPIC_RECORD, {"topic_id": info.topic_id})], then=forget)
            await asyncio.to_thread(delete_logs, detached)  # directory removal (fsynced) off the event loop
            log.info("topic deleted", topic=info.name, topic_id=str(info.topic_id))
            return info

    def plan_partitions(self, name: str, count: int, assignments=None) -> tuple[TopicInfo, int]:
        """Validate a CreatePartitions entry (no state change): (topic, partitions to add). Kafka's checks and
        messages (ReplicationControlManager.createPartitions); `assignments` are lists of broker ids."""
        info = self.registry.get(name)
        if info is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        if info.internal:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Cannot add partitions to internal topic {name}.")
        if count == info.num_partitions:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {count} partition(s).")
        if count < info.num_partitions:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"The topic {name} currently has {info.num_partitions} "
                             f"partition(s); {count} would not be an increase.")
        added = count - info.num_partitions
        if assignments is not None:
            if len(assignments) != added:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {added} additional "
                                 f"partition(s), but only {len(assignments)} assignment(s) were specified.")
            for replicas in assignments:
                self._check_assignment(list(replicas), 1)
        return info, added

    async def create_partitions(self, name: str, count: int, *, validate_only: bool, assignments=None) -> None:
        """One topic on its own (CreatePartitions requests bound the whole request through plan_partitions)."""
        _info, added = self.plan_partitions(name, count, assignments)
        check_records_per_operation(added)
        if not validate_only:
            await self.add_partitions(name, count)

    async def add_partitions(self, name: str, count: int) -> None:
        async with self._changes:
            info, _added = self.plan_partitions(name, count)  # again: another change may have run meanwhile
            old = info.num_partitions
            config = self.log_config(info)
            await self._with_new_logs(
                [((name, p), config) for p in range(old, count)],
                [(PARTITION_RECORD, {"partition_id": p, "topic_id": info.topic_id}) for p in range(old, count)])
            log.info("partitions added", topic=name, partitions=count, added=count - old)

    async def set_topic_configs(self, info: TopicInfo, changes: dict[str, str | None]) -> None:
        """Apply already-validated overrides (None removes one) and reconfigure the partition logs."""
        await self.commit_records([
            (CONFIG_RECORD, {"resource_type": TOPIC_RESOURCE, "resource_name": info.name, "name": k, "value": v})
            for k, v in changes.items()
        ], then=lambda: self._reconfigure(info))

    def reconfigure_all(self) -> None:
        """Broker-level defaults changed: every partition log picks up its new effective settings."""
        for info in self.registry.all():
            self._reconfigure(info)

    def _reconfigure(self, info: TopicInfo) -> None:
        current = self.registry.get(info.name)
        if current is None or current.topic_id != info.topic_id:
            return  # deleted (and maybe recreated) while its config change waited for the journal
        info = current
        config = self.log_config(info)  # resolved once per topic, not per partition
        for p in range(info.num_partitions):
            self._logs.get(info.name, p).reconfigure(config)

    def validate_topic_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        return self._validate_topic_configs(configs)

    async def reserve_producer_ids(self, next_unreserved: int) -> None:
        await self.commit_records([(PRODUCER_IDS_RECORD, {"broker_id": self._node_id, "broker_epoch": 0,
                                                   "next_producer_id": next_unreserved})])

    async def commit_records(self, entries: list[tuple[int, dict]], *, batch: bytes | None = None,
                             then: Callable[[], object] | None = None) -> None:
        """Journal `entries` (`batch` is their encoding if already made), fsynced in a worker thread, then apply
        them and call `then()` in the same loop step (see MetadataJournal.commit: in call order, each after its
        fsync). Raises TopicError(KAFKA_STORAGE_ERROR), nothing applied, if the journal cannot be written (a
        failed write is undone; a failed fsync takes the log directory offline)."""
        def apply() -> None:
            self._apply(entries)
            if then is not None:
                then()

        try:
            await self._journal.commit(entries, apply, batch=batch)
        except (OSError, KafkaStorageError) as err:
            log.error("metadata journal write failed; change not applied", records=len(entries), error=repr(err))
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"The metadata change could not be written: {err}") \
                from None

    def _commit_now(self, entries: list[tuple[int, dict]]) -> None:
        """As commit_records, blocking: only for start-up work that runs in a worker thread before serving."""
        self._journal.append_batch(self._journal.encode(entries))
        self._apply(entries)

    def _apply(self, entries: list[tuple[int, dict]]) -> None:
        for record_type, value in entries:
            self.registry.apply(record_type, value)
