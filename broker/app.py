"""The Broker: loads config, builds components, registers handlers, runs the server and background tasks.

Components are attributes of the Broker (handlers reach them as `ctx.broker.<name>`) and are also listed in
`broker.components` in creation order; `stop()` closes them in reverse order (`close()`, sync or async).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from broker import handlers
from broker.config import BrokerConfig, Listener, ensure_meta_properties
from broker.connection_quotas import ConnectionQuotas
from broker.router import LARGE_RESPONSE_APIS, Router
from broker.server import Server

log = structlog.get_logger(__name__)



@dataclass
class Node:
    """This broker as clients see it (Metadata, FindCoordinator, DescribeCluster)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def advertised_host(host: str) -> str:
    """Kafka advertises the canonical host name for a wildcard or empty listener host."""
    if host in ("", "0.0.0.0", "::"):
        return socket.getfqdn()
    return host


class Broker:
    def __init__(self, config: BrokerConfig, *, port_file: str | os.PathLike | None = None,
                 add_scram: list | None = None) -> None:
        self.config = config
        self.port_file = Path(port_file) if port_file is not None else None
        self._add_scram = list(add_scram or ())  # (mechanism, user, password, iterations) to create at start
        self.node_id = config.node_id
        self.cluster_id: str = ""
        self.node: Node | None = None  # as advertised on the first advertised listener
        self.nodes: dict[str, Node] = {}  # listener name -> this broker as advertised on that listener
        self.components: dict[str, Any] = {}
        self.router = Router(self)
        self.server = Server(self.router.handle, max_request_bytes=config.get("socket.request.max.bytes"),
                             max_inflight=config.get("queued.max.requests"),
                             max_unsent_bytes=config.get("connections.max.unsent.bytes"),
                             idle_ms=config.get("connections.max.idle.ms"), quotas=ConnectionQuotas(config.get),
                             serial_api_keys=LARGE_RESPONSE_APIS, refused=self.router.count_refused)
        self._tasks: set[asyncio.Task] = set()  # running background tasks; finished ones drop out
        self._stopped = asyncio.Event()
        self._stopping = False
        self.failed = asyncio.Event()  # set when the broker must stop on its own (its log directory failed)
        self.failure_reason: str | None = None
        self._stop_task: asyncio.Task | None = None

    # --- components ----------------------------------------------------------------------------------------
    def add_component(self, name: str, component: Any) -> Any:
        """Register a component; it becomes `broker.<name>` and is closed (reverse order) on stop."""
        if name in self.components or (hasattr(self, name) and getattr(self, name) is not None):
            raise ValueError(f"component {name!r} already exists")
        self.components[name] = component
        setattr(self, name, component)
        return component

    async def _build_components(self) -> None:
        """Storage, the metadata journal, topics, configs, the partition layer and producer ids."""
        from broker.cluster.config_service import ConfigService
        from broker.cluster.journal import MetadataJournal
        from broker.cluster.manager import TopicManager
        from broker.log import GroupCommitFlusher, LogManager, PartitionLog
        from broker.log.dir_failure import LogDirFailureChannel
        from broker.log.log_manager import METADATA_LOG_DIR
        from broker.producer_ids import ProducerIdAllocator, ProducerIdManager
        from broker.replica_manager import ReplicaManager

        config = self.config
        data_dir = config.data_dir
        # One log directory holds the partitions, the internal topics and the journal: one failure channel.
        failures = self.log_dir_failures = LogDirFailureChannel(str(data_dir))
        loop = asyncio.get_running_loop()
        failures.add_listener(lambda reason: loop.call_soon_threadsafe(self._log_dir_failed, reason))
        logs = self.add_component("logs", LogManager(data_dir, config.log_config({}), failures=failures))
        await asyncio.to_thread(logs.start)  # opening and recovering partition logs is blocking work
        # The journal is a log of its own, never visible as a topic (LogManager skips its directory). Its recovery
        # truncates only a torn tail: anything else stops start-up (JournalError/LogCorruptionError).
        metadata_log = self.add_component("metadata_log",
                                          PartitionLog(data_dir / METADATA_LOG_DIR, strict_recovery=True,
                                                       failures=failures))
        flusher = self.add_component(
            "flusher", GroupCommitFlusher(flush_interval_ms=config.get("log.flush.interval.ms")))
        journal = MetadataJournal(metadata_log)
        topics = self.add_component("topics", TopicManager(config, logs, journal, self.node_id))
        await asyncio.to_thread(topics.load)
        from broker.security.manager import SecurityManager

        security = self.add_component("security", SecurityManager(config, journal))
        await asyncio.to_thread(security.load)
        await security.add_missing_scram(self._add_scram)
        await topics.ensure_internal_topics({
            "__consumer_offsets": config.get("offsets.topic.num.partitions"),
            "__share_group_state": config.get("share.coordinator.state.topic.num.partitions"),
        })
        configs = self.add_component("configs", ConfigService(config, topics))
        configs.load()
        replicas = self.add_component("replicas", ReplicaManager(
            topics, flusher, producer_expiration_ms=lambda: config.get("producer.id.expiration.ms")))
        topics.on_delete(lambda info: replicas.forget_topic(info.name))
        from broker.log.cleaner import LogCleaner

        cleaner = self.add_component("log_cleaner", LogCleaner(
            logs, config.get, producer_last_offsets=replicas.producer_last_offsets))
        topics.on_delete(lambda info: cleaner.forget(info.name))
        allocator = ProducerIdAllocator(topics.registry.next_producer_id, topics.reserve_producer_ids)
        self.add_component("producer_ids", ProducerIdManager(
            allocator, transactional_id_expiration_ms=lambda: config.get("transactional.id.expiration.ms")))
        from broker.groups.runtime import build as build_share_groups
        from broker.sharestate.runtime import build as build_share_state

        build_share_state(self)  # share_state first: share_groups initializes share-partitions through it
        build_share_groups(self)
        from broker.share.manager import build as build_share_partitions

        build_share_partitions(self)
        from broker.metrics.service import build as build_metrics

        build_metrics(self)

    # --- lifecycle -----------------------------------------------------------------------------------------
    async def start(self) -> None:
        data_dir = self.config.data_dir
        self.cluster_id = ensure_meta_properties(data_dir, self.node_id, self.config.get("cluster.id"))
        log.info("starting broker", node_id=self.node_id, cluster_id=self.cluster_id, data_dir=str(data_dir))
        await self._build_components()
        for component in self.components.values():
            start = getattr(component, "start", None)
            if start is not None and inspect.iscoroutinefunction(start):
                await start()
        # Node must exist before handlers register (they check for it) and before any request arrives.
        rack = self.config.get("broker.rack")
        self.nodes = {a.name: Node(self.node_id, advertised_host(a.host), a.port, rack)
                      for a in self.config.advertised_listeners}
        self.node = self.nodes[self.config.advertised_listeners[0].name]
        registered = handlers.register_all(self.router, self)
        log.info("handlers registered", modules=registered, apis=len(self.router.registrations()))
        security = self.components.get("security")
        if security is not None:
            self.server.listener_security = security.listener_security(self.router.version_range)
        bound = await self.server.start(self.config.listeners)
        self._fix_advertised_port(bound)
        if self.port_file is not None:
            # First line: the port of the first advertised listener; then one "NAME PORT" line per listener, and
            # "prometheus PORT" when the metrics endpoint is on.
            lines = [str(self.node.port)] + [f"{name} {port}" for name, _, port in bound]
            metrics = self.components.get("metrics")
            if metrics is not None and metrics.port is not None:
                lines.append(f"prometheus {metrics.port}")  # lower case: never a listener name
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
        logs = self.components.get("logs")
        retention = getattr(logs, "apply_retention", None) if logs is not None else None
        if retention is not None:
            interval = self.config.get("log.retention.check.interval.ms") / 1000
            self.spawn(self._every(interval, retention, "retention"), "retention")
        replicas = self.components.get("replicas")
        if replicas is not None:
            interval = self.config.get("producer.id.expiration.check.interval.ms") / 1000
            self.spawn(self._every(interval, replicas.expire_producers, "producer id expiration"),
                       "producer-id-expiration")
        producer_ids = self.components.get("producer_ids")
        if producer_ids is not None:
            interval = self.config.get("transaction.remove.expired.transaction.cleanup.interval.ms") / 1000
            self.spawn(self._every(interval, producer_ids.remove_expired_transactional_ids,
                                   "transactional id expiration"), "transactional-id-expiration")

    def spawn(self, coro, name: str) -> asyncio.Task:
        """Run a background task for the life of the broker; it is cancelled on stop and failures are logged."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not self._stopping:
            log.error("background task failed", task=task.get_name(), exc_info=task.exception())

    async def _every(self, interval_s: float, fn: Callable[[], Any], what: str) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001 - a failed round must not stop the timer
                log.exception("periodic task failed", task=what)

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
        for name, component in reversed(list(self.components.items())):
            close = getattr(component, "close", None)
            if close is None:
                continue
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001
                log.exception("component failed to close", component=name)
        if self.port_file is not None:
            with contextlib.suppress(OSError):
                self.port_file.unlink()
        log.info("broker stopped")
        self._stopped.set()
