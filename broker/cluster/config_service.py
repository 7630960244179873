"""DescribeConfigs / IncrementalAlterConfigs / AlterConfigs for topics, groups and the broker.

Topic overrides and dynamic broker settings are written to the metadata journal (ConfigRecord) before they
take effect, so they survive restarts. Broker settings follow Kafka's DynamicBrokerConfig: every config Kafka
defines is accepted where Kafka accepts it (those Shoal does not use are stored and described, with no effect),
read-only ones are refused with INVALID_REQUEST, per-broker ones need the broker's id, and a broker's own
settings (resource named by its id) override the cluster-wide defaults (resource named "").
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from broker.cluster.topics import BROKER_RESOURCE, CONFIG_RECORD, GROUP_RESOURCE, TOPIC_RESOURCE, TopicInfo
from broker.config import group_config as gc
from broker.config import topic_config as tc
from broker.config.broker_config import BrokerConfig
from broker.config.broker_defs import BROKER_CONFIGS, update_mode
from broker.config.broker_loggers import (
    BROKER_LOGGER_RESOURCE,
    DYNAMIC_BROKER_LOGGER_CONFIG,
    UNKNOWN_TYPE,
    BrokerLoggers,
    LoggerError,
)
from broker.config.definitions import ConfigError
from broker.config.kafka_broker_defs import PER_BROKER, READ_ONLY
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
GROUP_CACHE_SIZE = 10_000  # effective group configs kept; the cache starts over beyond that
# Kafka's DynamicBrokerConfig.DYNAMIC_SECURITY_CONFIGS (SslConfigs.RECONFIGURABLE_CONFIGS): dynamic only with a
# listener prefix.
SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates"})

log = structlog.get_logger(__name__)


class ConfigChangeError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _entry_dict(entry, include_synonyms: bool, include_documentation: bool) -> dict:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": entry.source,
        "is_sensitive": entry.is_sensitive,
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in entry.synonyms] if include_synonyms else [],
        "config_type": entry.config_type,
        "documentation": entry.documentation if include_documentation else None,
    }


def _apply_list_op(current: str, op: int, value: str | None) -> str:
    items = [v for v in current.split(",") if v]
    given = [v.strip() for v in (value or "").split(",") if v.strip()]
    if op == APPEND:
        items += [v for v in given if v not in items]
    else:
        items = [v for v in items if v not in given]
    return ",".join(items)


class ConfigService:
    def __init__(self, config: BrokerConfig, topics: TopicManager, loggers: BrokerLoggers) -> None:
        self._config = config
        self._topics = topics
        self._loggers = loggers
        # group id -> effective group configs; read on every share fetch, cleared when any config changes.
        self._group_cache: dict[str, dict[str, str]] = {}
        self._changes = asyncio.Lock()

    def load(self) -> None:
        """Re-apply the dynamic broker settings found in the journal (cluster-wide, then this broker's own)."""
        registry = self._topics.registry
        layers = ((registry.broker_configs, False), (registry.node_configs.get(str(self._config.node_id), {}), True))
        for layer, per_broker in layers:
            for name, value in layer.items():
                try:
                    self._config.set_dynamic(name, value, per_broker=per_broker)
                except ConfigError as err:  # journaled under older rules: kept in the journal, not applied
                    log.warning("dynamic broker config not applied", config=name, reason=str(err))
        self._group_cache.clear()

    # --- describe ----------------------------------------------------------------------------------------------
    def describe(self, resource_type: int, name: str, keys, *, include_synonyms: bool,
                 include_documentation: bool) -> dict:
        result = {"error_code": 0, "error_message": None, "resource_type": resource_type, "resource_name": name,
                  "configs": []}
        if resource_type == TOPIC_RESOURCE:
            info = self._topics.registry.get(name)
            if info is None:
                return {**result, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        "error_message": f"Topic {name} does not exist"}
            entries = self._config.describe_topic(info.configs, keys)
        elif resource_type == BROKER_RESOURCE:
            error = self._check_broker_name(name)
            if error is not None:
                return {**result, "error_code": int(error.code), "error_message": error.message}
            entries = self._config.describe(keys, include_synonyms=include_synonyms, cluster_defaults=not name)
        elif resource_type == BROKER_LOGGER_RESOURCE:
            try:
                rows = self._loggers.describe(name, keys)
            except LoggerError as err:
                return {**result, "error_code": int(err.code), "error_message": err.message}
            result["configs"] = [{"name": row.name, "value": row.level, "read_only": False,
                                  "config_source": DYNAMIC_BROKER_LOGGER_CONFIG, "is_sensitive": False,
                                  "synonyms": [], "config_type": UNKNOWN_TYPE, "documentation": None}
                                 for row in rows]
            return result
        elif resource_type == GROUP_RESOURCE:
            if not name:
                return {**result, "error_code": int(ErrorCode.INVALID_GROUP_ID), "error_message": "Empty group id"}
            overrides = self._topics.registry.group_configs.get(name, {})
            names = sorted(gc.GROUP_CONFIGS) if keys is None else [k for k in keys if k in gc.GROUP_CONFIGS]
            entries = [gc.effective(n, overrides, self._config.broker_value) for n in names]
        else:
            return {**result, "error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": f"Unsupported resource type {resource_type}"}
        result["configs"] = [_entry_dict(e, include_synonyms, include_documentation) for e in entries]
        return result

    # --- alter -------------------------------------------------------------------------------------------------
    async def alter(self, resource_type: int, name: str, ops: list[tuple[str, int, str | None]], *,
                    validate_only: bool) -> tuple[ErrorCode, str | None]:
        try:
            keys = [key for key, _, _ in ops]
            if len(set(keys)) != len(keys):
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            if resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE):
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")
            # one change at a time: a change computed from the current values (APPEND, SUBTRACT, group bounds)
            # must not interleave with another one waiting for its journal fsync
            async with self._changes:
                if resource_type == TOPIC_RESOURCE:
                    await self._alter_topic(name, ops, validate_only)
                elif resource_type == BROKER_RESOURCE:
                    await self._alter_broker(name, ops, validate_only)
                else:
                    await self._alter_group(name, ops, validate_only)
        except ConfigChangeError as err:
            return err.code, err.message
        return ErrorCode.NONE, None

    def alter_loggers(self, name: str, ops: list[tuple[str, int, str | None]], *, authorized: bool,
                      validate_only: bool) -> tuple[ErrorCode, str | None]:
        """IncrementalAlterConfigs of a BROKER_LOGGER resource: Kafka's preprocess checks (duplicate keys, null
        values), then the loggers' own (authorization, the broker's id, each operation)."""
        keys = [key for key, _, _ in ops]
        if len(set(keys)) != len(keys):
            return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
        nulls = [key for key, op, value in ops if op != DELETE and value is None]
        if nulls:
            return ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
        try:
            self._loggers.alter(name, ops, authorized=authorized, validate_only=validate_only)
        except LoggerError as err:
            return err.code, err.message
        return ErrorCode.NONE, None

    async def _alter_topic(self, name: str, ops, validate_only: bool) -> None:
        info: TopicInfo | None = self._topics.registry.get(name)
        if info is None:
            raise ConfigChangeError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        changes: dict[str, str | None] = {}
        for key, op, value in ops:
            definition = tc.TOPIC_CONFIGS.get(key)
            if definition is None:
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
            if op == DELETE:
                changes[key] = None
                continue
            if op in (APPEND, SUBTRACT):
                if definition.type != "list":
                    raise ConfigChangeError(ErrorCode.INVALID_CONFIG,
                                            f"Config value append/subtract is not allowed for config key: {key}")
                value = _apply_list_op(self._topics.str_config(info, key), op, value)
            elif op != SET:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
            if value is None:
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Null value not supported for: {key}")
            try:
                changes[key] = tc.validate(key, value)
            except ValueError as err:
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(err)) from None
        # the topic's configs as they would be after the change, checked together (Kafka validates the whole set)
        after = {k: v for k, v in {**info.configs, **changes}.items() if v is not None}
        try:
            self._config.validate_topic_values(after)
        except ValueError as err:
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(err)) from None
        if not validate_only and changes:
            await self._topics.set_topic_configs(info, changes)

    async def _alter_broker(self, name: str, ops, validate_only: bool) -> None:
        error = self._check_broker_name(name)
        if error is not None:
            raise error
        per_broker = bool(name)
        if any(op != DELETE and value is None for _, op, value in ops):
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(
                key for key, op, value in ops if op != DELETE and value is None))
        current = self._config.as_properties()
        changes: dict[str, str | None] = {}
        for key, op, value in ops:
            if op in (APPEND, SUBTRACT):
                definition = BROKER_CONFIGS.get(key)
                if definition is not None and definition.type != "list":
                    raise ConfigChangeError(ErrorCode.INVALID_CONFIG,
                                            f"Config value append/subtract is not allowed for config key: {key}")
                value = _apply_list_op(current.get(key, ""), op, value)
            elif op == DELETE:
                value = None
            elif op != SET:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")
            changes[key] = value
        self._check_broker_changes(changes, per_broker)
        if validate_only or not changes:
            return
        await self._commit_broker(changes, per_broker)

    def _check_broker_changes(self, changes: dict[str, str | None], per_broker: bool) -> None:
        """Kafka's DynamicBrokerConfig.validateConfigs, in its order; Shoal refuses names Kafka does not define."""
        unknown = [k for k in changes if k not in BROKER_CONFIGS]
        if unknown:
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Unknown broker config {unknown[0]}")
        for names, message in (
            ([k for k in changes if update_mode(k) == READ_ONLY and k not in SECURITY_CONFIGS],
             "Cannot update these configs dynamically"),
            ([k for k in changes if k in SECURITY_CONFIGS],
             "These security configs can be dynamically updated only per-listener using the listener prefix"),
        ):
            if names:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"{message}: [{', '.join(sorted(names))}]")
        for key, value in changes.items():
            try:
                self._config.validate_dynamic(key, value, per_broker=True)
            except ConfigError as err:
                # KAFKA-13609: a bad broker value is INVALID_REQUEST in Kafka (ConfigException wrapped)
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, str(err)) from None
        if not per_broker:
            names = sorted(k for k in changes if update_mode(k) == PER_BROKER)
            if names:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster "
                                        f"level, broker id must be specified: [{', '.join(names)}]")

    async def _commit_broker(self, changes: dict[str, str | None], per_broker: bool) -> None:
        resource_name = str(self._config.node_id) if per_broker else ""

        def apply() -> None:
            for key, value in changes.items():
                self._config.set_dynamic(key, value, per_broker=per_broker)
            self._group_cache.clear()  # group configs default to broker settings
            self._topics.reconfigure_all()

        await self._topics.commit_records([
            (CONFIG_RECORD, {"resource_type": BROKER_RESOURCE, "resource_name": resource_name, "name": k, "value": v})
            for k, v in changes.items()
        ], then=apply)

    # --- AlterConfigs (the legacy, non-incremental API) ---------------------------------------------------------
    async def replace(self, resource_type: int, name: str, configs: list[tuple[str, str | None]], *,
                      validate_only: bool) -> tuple[ErrorCode, str | None]:
        """Kafka's legacy AlterConfigs: the resource's dynamic configs become exactly `configs` (those not named
        are removed). Checks as ConfigAdminManager.preprocess, then each resource type's own validation."""
        try:
            keys = [key for key, _ in configs]
            if len(set(keys)) != len(keys):
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            nulls = [key for key, value in configs if value is None]
            if nulls:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
            if resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE):
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}")
            async with self._changes:
                wanted = dict(configs)
                if resource_type == TOPIC_RESOURCE:
                    info = self._topics.registry.get(name)
                    current = dict(info.configs) if info is not None else {}
                    ops = [(k, SET, v) for k, v in wanted.items()] + [(k, DELETE, None) for k in current
                                                                      if k not in wanted]
                    await self._alter_topic(name, ops, validate_only)
                elif resource_type == BROKER_RESOURCE:
                    error = self._check_broker_name(name)
                    if error is not None:
                        raise error
                    per_broker = bool(name)
                    self._check_broker_changes(dict(wanted), per_broker)
                    current = self._config.dynamic_overrides(per_broker=per_broker)
                    changes: dict[str, str | None] = {k: None for k in current if k not in wanted}
                    changes.update({k: v for k, v in wanted.items() if current.get(k) != v})
                    if not validate_only and changes:
                        await self._commit_broker(changes, per_broker)
                else:
                    current = self._topics.registry.group_configs.get(name, {})
                    ops = [(k, SET, v) for k, v in wanted.items()] + [(k, DELETE, None) for k in current
                                                                      if k not in wanted]
                    await self._alter_group(name, ops, validate_only)
        except ConfigChangeError as err:
            return err.code, err.message
        return ErrorCode.NONE, None

    async def _alter_group(self, group_id: str, ops, validate_only: bool) -> None:
        if not group_id:
            raise ConfigChangeError(ErrorCode.INVALID_GROUP_ID, "Empty group id")
        changes: dict[str, str | None] = {}
        for key, op, value in ops:
            if key not in gc.GROUP_CONFIGS:
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {key}")
            if op == DELETE:
                changes[key] = None
                continue
            if op != SET:
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG,
                                        f"Config value append/subtract is not allowed for config key: {key}")
            try:
                changes[key] = gc.validate(key, value or "")
            except ValueError as err:
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(err)) from None
        overrides = dict(self._topics.registry.group_configs.get(group_id, {}))
        for key, value in changes.items():
            if value is None:
                overrides.pop(key, None)
            else:
                overrides[key] = value
        try:
            gc.validate_overrides(changes, overrides, self._config.get)
        except ValueError as err:
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(err)) from None
        if validate_only or not changes:
            return
        await self._topics.commit_records([
            (CONFIG_RECORD, {"resource_type": GROUP_RESOURCE, "resource_name": group_id, "name": k, "value": v})
            for k, v in changes.items()
        ], then=lambda: self._group_cache.pop(group_id, None))

    def group_config(self, group_id: str) -> dict[str, str]:
        """Effective group configs of `group_id` (its overrides over broker settings over defaults)."""
        cached = self._group_cache.get(group_id)
        if cached is None:
            overrides = self._topics.registry.group_configs.get(group_id, {})
            cached = {n: gc.effective(n, overrides, self._config.broker_value).value or "" for n in gc.GROUP_CONFIGS}
            for name in overrides.keys() & gc.GROUP_CONFIGS.keys():
                value = gc.clamped(name, cached[name], self._config.get)
                if value != cached[name]:
                    log.warning("group config outside the broker's bounds: capped", group=group_id, config=name,
                                value=cached[name], effective=value)
                    cached[name] = value
            if len(self._group_cache) >= GROUP_CACHE_SIZE:
                self._group_cache.clear()
            self._group_cache[group_id] = cached
        return cached

    def _check_broker_name(self, name: str) -> ConfigChangeError | None:
        if name in ("", str(self._config.node_id)):
            return None
        if not name.lstrip("-").isdigit():
            return ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}")
        return ConfigChangeError(ErrorCode.INVALID_REQUEST,
                                 f"Unexpected broker id, expected {self._config.node_id} or empty string, "
                                 f"but received {name}")
