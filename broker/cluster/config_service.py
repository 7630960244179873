"""DescribeConfigs / IncrementalAlterConfigs for topics, groups and the broker.

Topic overrides and dynamic broker settings are written to the metadata journal (ConfigRecord) before they
take effect, so they survive restarts.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from broker.cluster.topics import BROKER_RESOURCE, CONFIG_RECORD, GROUP_RESOURCE, TOPIC_RESOURCE, TopicInfo
from broker.config import group_config as gc
from broker.config import topic_config as tc
from broker.config.broker_config import BrokerConfig
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
GROUP_CACHE_SIZE = 10_000  # effective group configs kept; the cache starts over beyond that

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
    def __init__(self, config: BrokerConfig, topics: TopicManager) -> None:
        self._config = config
        self._topics = topics
        # group id -> effective group configs; read on every share fetch, cleared when any config changes.
        self._group_cache: dict[str, dict[str, str]] = {}
        self._changes = asyncio.Lock()

    def load(self) -> None:
        """Re-apply the dynamic broker settings found in the journal."""
        for name, value in self._topics.registry.broker_configs.items():
            self._config.set_dynamic(name, value)
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
            entries = self._config.describe(keys, include_synonyms=include_synonyms)
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
        changes: dict[str, str | None] = {}
        for key, op, value in ops:
            if op in (APPEND, SUBTRACT):
                value = _apply_list_op(self._config.as_properties().get(key, ""), op, value)
            elif op == DELETE:
                value = None
            elif op != SET:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
            try:
                self._config.validate_dynamic(key, value)
            except ValueError as err:
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(err)) from None
            changes[key] = value
        if validate_only or not changes:
            return

        def apply() -> None:
            for key, value in changes.items():
                self._config.set_dynamic(key, value)
            self._group_cache.clear()  # group configs default to broker settings
            self._topics.reconfigure_all()

        await self._topics.commit_records([
            (CONFIG_RECORD, {"resource_type": BROKER_RESOURCE, "resource_name": "", "name": k, "value": v})
            for k, v in changes.items()
        ], then=apply)

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
            gc.validate_overrides({k: v for k, v in changes.items() if v is not None}, overrides, self._config.get)
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
        return ConfigChangeError(ErrorCode.INVALID_REQUEST,
                                 f"Unexpected broker id, expected {self._config.node_id} or empty string, "
                                 f"but received {name}")
