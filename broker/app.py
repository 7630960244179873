"""The Broker: the composition root. It loads config, builds the components in order (each given its collaborators),
registers the handlers, runs the server and background tasks, and stops it all.

Components are typed attributes of the Broker. The handlers are methods of API objects (one class per module of
broker/handlers/, Kafka's KafkaApis split by family), each built by `_build_apis` with exactly the components its
handlers use. `start()` starts the components with work to run in creation order; `stop()` closes the closable
ones in reverse creation order.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import socket
import time
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import structlog

from broker import handlers
from broker.cluster.config_service import ConfigService
from broker.cluster.journal import MetadataJournal
from broker.cluster.manager import TopicManager
from broker.config import BrokerConfig, Listener, ensure_meta_properties
from broker.config.broker_loggers import BrokerLoggers
from broker.config.components import ComponentConfig, setting
from broker.connection_quotas import ConnectionQuotaConfig, ConnectionQuotas
from broker.console.service import Console
from broker.coordinator.coordinator_log import CoordinatorLog
from broker.coordinator.periodic import PeriodicTask
from broker.features import FeatureConfig, FeatureControl, Features
from broker.groups.coordinator import GroupCoordinatorConfig
from broker.groups.runtime import TOPIC as OFFSETS_TOPIC
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers.acls import AclApis
from broker.handlers.alter_configs import AlterConfigApis
from broker.handlers.api_versions import ApiVersionsApis
from broker.handlers.apis import Apis
from broker.handlers.client_quotas import ClientQuotaApis
from broker.handlers.cluster import ClusterApis
from broker.handlers.configs import ConfigApis
from broker.handlers.consumer_groups import ConsumerGroupApis
from broker.handlers.delegation_tokens import DelegationTokenApis
from broker.handlers.delete_records import DeleteRecordsApis
from broker.handlers.describe_producers import DescribeProducersApis
from broker.handlers.describe_topic_partitions import DescribeTopicPartitionsApis
from broker.handlers.elections import ElectionApis
from broker.handlers.fetch import FetchApis
from broker.handlers.groups import GroupApis
from broker.handlers.leader_epochs import LeaderEpochApis
from broker.handlers.list_offsets import ListOffsetsApis
from broker.handlers.log_dirs import LogDirApis
from broker.handlers.metadata import MetadataApis
from broker.handlers.offsets import OffsetApis
from broker.handlers.produce import ProduceApis
from broker.handlers.producer_ids import ProducerIdApis
from broker.handlers.quorum import QuorumApis
from broker.handlers.sasl import SaslApis
from broker.handlers.scram_admin import ScramAdminApis
from broker.handlers.share_fetch import ShareFetchApis
from broker.handlers.share_groups import ShareGroupApis
from broker.handlers.share_state import ShareStateApis
from broker.handlers.streams_groups import StreamsGroupApis
from broker.handlers.telemetry import TelemetryApis
from broker.handlers.topic_admin import TopicAdminApis
from broker.handlers.transactions import TransactionApis
from broker.handlers.txn_markers import TxnMarkerApis
from broker.handlers.txn_offsets import TxnOffsetApis
from broker.handlers.update_features import UpdateFeaturesApis
from broker.heap import freeze_startup_heap
from broker.linear_regex import RegexWorker
from broker.log import GroupCommitFlusher, LogManager, PartitionLog
from broker.log.cleaner import CleanerConfig, LogCleaner
from broker.log.config import LogManagerConfig
from broker.log.dir_failure import LogDirFailureChannel
from broker.log.log_manager import METADATA_LOG_DIR, existing_logs
from broker.log.producer_state import ProducerStateManagerConfig
from broker.metrics.service import MetricsService
from broker.node import Endpoints, Node
from broker.producer_ids import ProducerIdAllocator, ProducerIdManager
from broker.quotas.service import QuotaService
from broker.replica_manager import LEADER_EPOCH, ReplicaManager
from broker.router import LARGE_RESPONSE_APIS, Router
from broker.security.manager import SecurityManager
from broker.server import Server, SocketServerConfig
from broker.share_coordinator.config import ShareCoordinatorConfig
from broker.share_coordinator.runtime import TOPIC as SHARE_STATE_TOPIC
from broker.share_coordinator.runtime import ShareCoordinatorRuntime
from broker.share_partition.dlq import DeadLetterQueue
from broker.share_partition.manager import SharePartitionManager
from broker.share_partition.manager import follow_events as follow_share_events
from broker.telemetry.manager import ClientMetricsManager, ClientTelemetryConfig
from broker.telemetry.resources import ClientMetricsResources
from broker.telemetry.runtime import ClientTelemetry
from broker.telemetry.store import ClientMetricsStore
from broker.txn.markers import RoutedMarkerWriter
from broker.txn.runtime import TOPIC as TRANSACTION_STATE_TOPIC
from broker.txn.runtime import TransactionCoordinatorRuntime
from broker.txn.runtime import build as build_transaction_coordinator

log = structlog.get_logger(__name__)



@dataclass(frozen=True)
class NodeConfig(ComponentConfig):
    """This broker's identity settings and the API versions it serves."""

    cluster_id: str | None = setting("cluster.id")  # None: generated on first start (meta.properties)
    rack: str | None = setting("broker.rack")
    unstable_api_versions_enable: bool = setting("unstable.api.versions.enable")


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def advertised_host(host: str) -> str:
    """Kafka advertises the canonical host name for a wildcard or empty listener host."""
    if host in ("", "0.0.0.0", "::"):
        return socket.getfqdn()
    return host


class Closable(Protocol):
    """A component stop() closes: `close()` may be sync or async."""

    def close(self) -> Awaitable[None] | None: ...


class Startable(Protocol):
    """A component with work to start once every component is built (replay, timers, an endpoint)."""

    async def start(self) -> None: ...


C = TypeVar("C", bound=Closable)


class Broker:
    # The components, in creation order; they exist once start() has built them.
    log_dir_failures: LogDirFailureChannel
    logs: LogManager
    metadata_log: PartitionLog
    flusher: GroupCommitFlusher
    topics: TopicManager
    security: SecurityManager
    configs: ConfigService
    quotas: QuotaService  # client quotas (Kafka's QuotaManagers), journaled; the router throttles with them
    replicas: ReplicaManager
    log_cleaner: LogCleaner
    producer_ids: ProducerIdManager
    regex_worker: RegexWorker  # compiles and matches clients' regular expressions, in a child process
    share_coordinator: ShareCoordinatorRuntime
    group_coordinator: GroupCoordinatorRuntime
    share_partitions: SharePartitionManager  # the share-partition leader
    transaction_coordinator: TransactionCoordinatorRuntime
    console: Console
    metrics: MetricsService
    client_metrics: ClientMetricsManager  # KIP-714 client telemetry
    client_metrics_store: ClientMetricsStore
    client_telemetry: ClientTelemetry  # pushes: checked by the manager, decoded off the loop, kept in the store
    client_metrics_resources: ClientMetricsResources
    feature_control: FeatureControl  # finalized feature levels and UpdateFeatures
    endpoints: Endpoints  # this broker as clients see it (built at start, once the listeners are known)

    def __init__(self, config: BrokerConfig, *, port_file: str | os.PathLike | None = None,
                 add_scram: list | None = None) -> None:
        self.config = config
        self.port_file = Path(port_file) if port_file is not None else None
        self._add_scram = list(add_scram or ())  # (mechanism, user, password, iterations) to create at start
        self.node_id = config.node_id
        self.cluster_id: str = ""
        self.node: Node | None = None  # as advertised on the first advertised listener
        self.nodes: dict[str, Node] = {}  # listener name -> this broker as advertised on that listener
        self._closables: list[tuple[str, Closable]] = []  # in creation order; stop() closes them in reverse
        self.router = Router()
        self.server = Server(self.router.handle, SocketServerConfig.from_config(config),
                             quotas=ConnectionQuotas(lambda: ConnectionQuotaConfig.from_config(config)),
                             serial_api_keys=LARGE_RESPONSE_APIS, refused=self.router.count_refused,
                             admit=self.router.admit)
        self._tasks: set[asyncio.Task] = set()  # running background tasks; finished ones drop out
        self._stopped = asyncio.Event()
        self._stopping = False
        self.failed = asyncio.Event()  # set when the broker must stop on its own (its log directory failed)
        self.failure_reason: str | None = None
        self._stop_task: asyncio.Task | None = None

    # --- components ----------------------------------------------------------------------------------------
    @property
    def features(self) -> Features:
        """The finalized feature levels (ApiVersions; transaction.version gates the TV2 versions)."""
        return self.feature_control.features

    def _closed_on_stop(self, name: str, component: C) -> C:
        """Record a component stop() must close (reverse creation order); returns it."""
        self._closables.append((name, component))
        return component

    async def _build_components(self) -> None:
        """Storage, the metadata journal, topics, configs, the partition layer, producer ids, the coordinators, the
        share-partition leader and metrics, each given what it uses."""
        config = self.config
        data_dir = config.data_dir
        # One log directory holds the partitions, the internal topics and the journal: one failure channel.
        failures = self.log_dir_failures = LogDirFailureChannel(str(data_dir))
        loop = asyncio.get_running_loop()
        failures.add_listener(lambda reason: loop.call_soon_threadsafe(self._log_dir_failed, reason))
        logs = self.logs = self._closed_on_stop(
            "logs", LogManager(data_dir, config.log_config({}), leader_epoch=LEADER_EPOCH, failures=failures))
        await asyncio.to_thread(logs.start)  # opening and recovering partition logs is blocking work
        # The journal is a log of its own, never visible as a topic (LogManager skips its directory). Its recovery
        # truncates only a torn tail: anything else stops start-up (JournalError/LogCorruptionError).
        self.metadata_log = self._closed_on_stop("metadata_log", PartitionLog(
            data_dir / METADATA_LOG_DIR, strict_recovery=True, failures=failures))
        flusher = self.flusher = self._closed_on_stop(
            "flusher", GroupCommitFlusher(
                flush_interval_ms=LogManagerConfig.from_config(config).flush_interval_ms))
        journal = MetadataJournal(self.metadata_log)
        topics = self.topics = TopicManager(config, logs, journal, self.node_id)
        await asyncio.to_thread(topics.load)
        security = self.security = SecurityManager(config, journal)
        await asyncio.to_thread(security.load)
        await security.add_missing_scram(self._add_scram)
        await topics.ensure_internal_topics()
        self.configs = ConfigService(config, topics, BrokerLoggers(config.node_id))
        self.configs.load()
        quotas = self.quotas = QuotaService(config, journal)
        await asyncio.to_thread(quotas.load)
        self.router.quotas = quotas
        self.router.authorizer = security
        self.server.connection_throttle = quotas.connection_throttle
        self.feature_control = FeatureControl(config, topics, self.router, self.node_id)
        self._build_client_telemetry()
        replicas = self.replicas = ReplicaManager(
            topics, flusher, producer_config=lambda: ProducerStateManagerConfig.from_config(config),
            logs=logs)
        topics.on_delete(lambda info: replicas.forget_topic(info.name))
        cleaner = self.log_cleaner = self._closed_on_stop("log_cleaner", LogCleaner(
            logs, lambda: CleanerConfig.from_config(config),
            producer_last_offsets=replicas.producer_last_offsets,
            last_stable_offset=replicas.last_stable_offset, load_partition_state=replicas.ensure_loaded))
        topics.on_delete(lambda info: cleaner.forget(info.name))
        allocator = ProducerIdAllocator(topics.registry.next_producer_id, topics.reserve_producer_ids)
        self.producer_ids = ProducerIdManager(allocator)
        # Clients' regular expressions are compiled and matched in a child process (broker/linear_regex.py).
        self.regex_worker = self._closed_on_stop("regex_worker", RegexWorker())
        self._build_coordinators()
        # Markers: data partitions -> the ReplicaManager, __consumer_offsets -> the group coordinator (it settles
        # transactional offset commits).
        markers = RoutedMarkerWriter(replicas, self.group_coordinator)
        txn = self.transaction_coordinator = self._closed_on_stop("transaction_coordinator", build_transaction_coordinator(
            config, topics, allocator, CoordinatorLog(topics, replicas, TRANSACTION_STATE_TOPIC), markers, self.spawn,
            self.regex_worker))
        # The produce path asks the transaction coordinator whether a partition is in the transaction (KIP-890
        # part 1); bound here because the coordinator's log is written through the replica manager.
        verifying = FeatureConfig.from_config(config).partition_verification_enable
        replicas.set_txn_verifier(txn if verifying else None)
        self.feature_control.follow_transaction_version(txn.set_transaction_version)
        # Served on the metrics listener only (read-only views of these components).
        self.console = Console(topics=topics, logs=logs, group_coordinator=self.group_coordinator,
                               share_partitions=self.share_partitions,
                               group_configs=self.configs.group_settings)
        self.metrics = self._closed_on_stop("metrics", MetricsService(
            config, self.router.request_metrics.registry, self.spawn, logs=logs,
            share_partitions=self.share_partitions, group_coordinator=self.group_coordinator, server=self.server,
            transaction_coordinator=txn, replicas=replicas, console=self.console, client_metrics=self.client_metrics,
            client_metrics_store=self.client_metrics_store, clock_ms=_monotonic_ms, quotas=quotas,
            flusher=flusher))

    def _build_client_telemetry(self) -> None:
        """KIP-714: the client metrics manager, what clients push (exported on /metrics) and the client-metrics
        subscriptions journaled as CLIENT_METRICS configs."""
        store = self.client_metrics_store = ClientMetricsStore(_monotonic_ms)
        manager = self.client_metrics = ClientMetricsManager(
            max_bytes=ClientTelemetryConfig.from_config(self.config).max_bytes, clock=_monotonic_ms,
            receiver=store)
        self.client_telemetry = ClientTelemetry(manager, store, _monotonic_ms)
        self.client_metrics_resources = ClientMetricsResources(self.topics, manager)
        self.client_metrics_resources.load()
        self.server.close_listeners.append(lambda info: manager.connection_closed(info.id))

    def _build_coordinators(self) -> None:
        """The share coordinator, the group coordinator and the share-partition leader, wired to each other and to
        topic deletion."""
        config, topics, replicas, spawn = self.config, self.topics, self.replicas, self.spawn
        # The share coordinator first: the group coordinator initializes share-partitions through it.
        fsync_ms = ShareCoordinatorConfig.from_config(config).state_fsync_interval_ms
        share_coordinator = self.share_coordinator = ShareCoordinatorRuntime(
            state_log=CoordinatorLog(topics, replicas, SHARE_STATE_TOPIC, fsync_interval_ms=fsync_ms),
            config=config, topics=topics, spawn=spawn)
        topics.on_delete(lambda info: spawn(share_coordinator.delete_topics([info.topic_id]),
                                            "share-state-delete-topic"))
        features = FeatureConfig.from_config(config)
        groups = self.group_coordinator = GroupCoordinatorRuntime(
            GroupCoordinatorConfig.from_config(config), CoordinatorLog(topics, replicas, OFFSETS_TOPIC),
            topics, self.configs, share_coordinator, spawn,
            # built after the group coordinator (whose markers it writes through it): a late-bound reference
            txn_verifier=lambda: self.transaction_coordinator, authorizer=self.security,
            regex_worker=self.regex_worker,
            consumer_enabled=features.consumer_groups_enabled, share_enabled=features.share_groups_enabled,
            streams_enabled=features.streams_groups_enabled)
        topics.on_delete(lambda info: spawn(groups.topics_deleted([info.topic_id], [info.name]),
                                            "group-coordinator-delete-topic"))
        group_configs = self.configs.group_settings  # typed, one object per group until its configs change
        leader = self.share_partitions = self._closed_on_stop("share_partitions", SharePartitionManager(
            config=config, topics=topics, replicas=replicas, persister=share_coordinator, groups=groups,
            dlq=DeadLetterQueue(config=config, topics=topics, replicas=replicas,
                                group_configs=group_configs),
            group_configs=group_configs, spawn=spawn))
        follow_share_events(leader, topics=topics, groups=groups, server=self.server)

    def _build_apis(self) -> list[Apis]:
        """The API objects (Kafka's KafkaApis, split by family), each given the components its handlers use."""
        config, topics, replicas, quotas, endpoints = (self.config, self.topics, self.replicas, self.quotas,
                                                       self.endpoints)
        groups, security, client_metrics = self.group_coordinator, self.security, self.client_metrics_resources
        return [
            # the cluster as clients see it
            ApiVersionsApis(self.router, lambda: self.feature_control.features, endpoints),
            MetadataApis(topics, endpoints),
            ClusterApis(endpoints),
            DescribeTopicPartitionsApis(topics, config, endpoints),
            QuorumApis(self.metadata_log, endpoints),
            UpdateFeaturesApis(self.feature_control),
            # partitions
            ProduceApis(topics, replicas),
            FetchApis(topics, replicas, quotas, config, endpoints),
            ListOffsetsApis(topics, replicas),
            LeaderEpochApis(topics, replicas),
            DescribeProducersApis(topics, replicas),
            DeleteRecordsApis(topics, replicas),
            TxnMarkerApis(replicas, groups),
            # administration
            TopicAdminApis(topics, quotas),
            ConfigApis(self.configs, client_metrics),
            AlterConfigApis(self.configs, topics, client_metrics),
            ClientQuotaApis(quotas),
            LogDirApis(config, self.log_dir_failures, self.logs, topics),
            ElectionApis(topics, self.node_id),
            # transactions
            ProducerIdApis(self.producer_ids, self.transaction_coordinator),
            TransactionApis(self.transaction_coordinator),
            TxnOffsetApis(groups, topics),
            # groups
            GroupApis(groups),
            ConsumerGroupApis(groups),
            StreamsGroupApis(groups),
            OffsetApis(groups, topics),
            # share groups
            ShareGroupApis(groups),
            ShareStateApis(self.share_coordinator),
            ShareFetchApis(self.share_partitions, topics, quotas, config, endpoints),
            # security
            SaslApis(),
            ScramAdminApis(security),
            DelegationTokenApis(security, config),
            AclApis(security),
            # client telemetry (KIP-714)
            TelemetryApis(self.client_metrics, self.client_telemetry, topics, client_metrics, self.node_id),
        ]

    def _startables(self) -> tuple[Startable, ...]:
        """The components with work to start, in creation order."""
        # (The group coordinator loads before the transaction coordinator resends the markers of prepared
        # transactions, some of which settle transactional offsets.)
        return (self.log_cleaner, self.regex_worker, self.share_coordinator, self.group_coordinator,
                self.share_partitions, self.transaction_coordinator, self.metrics)

    # --- lifecycle -----------------------------------------------------------------------------------------
    async def start(self) -> None:
        data_dir = self.config.data_dir
        node = NodeConfig.from_config(self.config)
        # in a worker thread: writing the file takes fsyncs. Logs already there without it stop start-up (their
        # cluster id would be lost) rather than get a new cluster id.
        self.cluster_id = await asyncio.to_thread(
            lambda: ensure_meta_properties(data_dir, self.node_id, node.cluster_id,
                                           existing_logs=existing_logs(data_dir)))
        log.info("starting broker", node_id=self.node_id, cluster_id=self.cluster_id, data_dir=str(data_dir))
        await self._build_components()
        for component in self._startables():
            await component.start()
        # Node must exist before any request arrives.
        self.nodes = {a.name: Node(self.node_id, advertised_host(a.host), a.port, node.rack)
                      for a in self.config.advertised_listeners}
        self.node = self.nodes[self.config.advertised_listeners[0].name]
        self.endpoints = Endpoints(self.cluster_id, self.node_id, self.nodes, self.node)
        apis = self._build_apis()
        unbuilt = set(handlers.api_classes()) - {type(api) for api in apis}
        if unbuilt:
            raise RuntimeError(f"API classes not built by Broker._build_apis: {sorted(c.__name__ for c in unbuilt)}")
        registered = handlers.register_all(self.router, apis, max_versions=self.features.version_caps(),
                                           unstable=node.unstable_api_versions_enable)
        log.info("handlers registered", api_objects=registered, apis=len(self.router.registrations()))
        self.server.listener_security = self.security.listener_security(self.router.version_range)
        freeze_startup_heap()  # before the first connection: the full collection it runs stalls nobody
        bound = await self.server.start(self.config.listeners)
        self._fix_advertised_port(bound)
        if self.port_file is not None:
            # First line: the port of the first advertised listener; then one "NAME PORT" line per listener, and
            # "prometheus PORT" when the metrics endpoint is on.
            lines = [str(self.node.port)] + [f"{name} {port}" for name, _, port in bound]
            if self.metrics.port is not None:
                lines.append(f"prometheus {self.metrics.port}")  # lower case: never a listener name
            # renamed into place so a reader never sees half of it; not fsynced: it describes this process only
            # (removed at stop), so a power loss makes it stale whatever it holds
            tmp = self.port_file.with_name(self.port_file.name + ".tmp")
            tmp.write_text("\n".join(lines) + "\n")
            tmp.replace(self.port_file)
        self._start_background()
        log.info("broker started", advertised=f"{self.node.host}:{self.node.port}")

    def _fix_advertised_port(self, bound: list[tuple[str, str, int]]) -> None:
        """Port 0 listeners bind an ephemeral port; advertise the port actually bound."""
        by_name = {name: port for name, _, port in bound}
        advertised: Listener
        for advertised in self.config.advertised_listeners:
            if advertised.port == 0:
                self.nodes[advertised.name].port = by_name.get(advertised.name, bound[0][2])

    def _start_background(self) -> None:
        producers = ProducerStateManagerConfig.from_config(self.config)
        for name, what, interval_ms, work in (
                ("retention", "retention", LogManagerConfig.from_config(self.config).retention_check_interval_ms,
                 self.logs.apply_retention),
                ("producer-id-expiration", "producer id expiration",
                 producers.producer_id_expiration_check_interval_ms, self.replicas.expire_producers),
                ("delegation-token-expiry", "delegation token expiry",
                 self.security.settings.delegation_token_expiry_check_interval_ms, self.security.expire_tokens)):
            task = PeriodicTask(name, work, every_s=interval_ms / 1000, failure_fields={"task": what})
            self.spawn(task.run(), name)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        """Run a background task for the life of the broker; it is cancelled on stop and failures are logged."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not self._stopping:
            log.error("background task failed", task=task.get_name(), exc_info=task.exception())

    def _log_dir_failed(self, reason: str) -> None:
        """The only log directory is offline: stop, as Kafka's broker does when no log directory is left (it
        halts). Nothing is served from memory that no longer matches the disk; a restart recovers from disk."""
        if self.failed.is_set():
            return
        self.failure_reason = reason
        log.error("shutting down the broker because its only log directory has failed",
                  data_dir=str(self.config.data_dir), reason=reason)
        self.failed.set()
        if not self._stopping:
            self._stop_task = asyncio.get_running_loop().create_task(self._stop_after_failure(),
                                                                     name="stop-after-log-dir-failure")

    async def _stop_after_failure(self, grace_s: float = 5.0) -> None:
        # Requests in flight (produce waiting on the failed flush) are answered first: with the error.
        deadline = time.monotonic() + grace_s
        while self.server.answering and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await self.stop()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        log.info("stopping broker")
        await self.server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for name, component in reversed(self._closables):
            try:
                result = component.close()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001
                log.exception("component failed to close", component=name)
        if self.port_file is not None:
            with contextlib.suppress(OSError):
                self.port_file.unlink()
        log.info("broker stopped")
        self._stopped.set()
