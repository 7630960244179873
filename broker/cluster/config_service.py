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

from broker.cluster.topics import (
    BROKER_RESOURCE,
    CONFIG_RECORD,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
    TopicError,
    TopicInfo,
    validate_topic_name,
)
from broker.config import group_config as gc
from broker.config import topic_config as tc
from broker.config.broker_config import BrokerConfig
from broker.config.broker_defs import BROKER_CONFIGS, KAFKA_4_4_CONFIGS
from broker.config.broker_loggers import (
    BROKER_LOGGER_RESOURCE,
    DYNAMIC_BROKER_LOGGER_CONFIG,
    UNKNOWN_TYPE,
    BrokerLoggers,
    LoggerError,
)
from broker.config.definitions import ConfigError
from broker.config.kafka_broker_defs import CLUSTER_WIDE, PER_BROKER, READ_ONLY
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
# ApiError's message for an INVALID_REQUEST raised without one (Errors.INVALID_REQUEST's).
INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library or "
                           "the message was sent to an incompatible broker. See the broker logs for more details.")
GROUP_CACHE_SIZE = 10_000  # effective group configs kept; the cache starts over beyond that
# Kafka's DynamicBrokerConfig.DYNAMIC_SECURITY_CONFIGS (SslConfigs.RECONFIGURABLE_CONFIGS): dynamic only with a
# listener prefix.
SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates"})

# Kafka's update mode of each of its broker configs (read-only, per-broker, cluster-wide).
KAFKA_MODES = {name: facts[2] for name, facts in KAFKA_4_4_CONFIGS.items()}

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
        # Kafka documents every config: Shoal's text where it has one, else an empty one
        "documentation": (entry.documentation or "") if include_documentation else None,
    }


def _apply_list_op(current: str | None, op: int, value: str | None) -> str:
    """Kafka's APPEND and SUBTRACT: the current value's non-empty comma-separated parts, with each of the
    given ones added if missing, or removed."""
    items = [v for v in (current or "").split(",") if v]
    for item in (value or "").split(","):
        if op == APPEND and item not in items:
            items.append(item)
        elif op == SUBTRACT and item in items:
            items.remove(item)
    return ",".join(items)


class ConfigService:
    def __init__(self, config: BrokerConfig, topics: TopicManager, loggers: BrokerLoggers) -> None:
        self._config = config
        self._topics = topics
        self._loggers = loggers
        # group id -> effective group configs; read on every share fetch, cleared when any config changes.
        self._group_cache: dict[str, dict[str, str]] = {}
        # group id -> (the effective configs it was built from, typed); rebuilt when those are replaced
        self._group_settings: dict[str, tuple[dict[str, str], gc.GroupConfig]] = {}
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
        # Kafka's answer leaves the message unset (""), but for the errors it describes
        result = {"error_code": 0, "error_message": "", "resource_type": resource_type, "resource_name": name,
                  "configs": []}
        if resource_type == TOPIC_RESOURCE:
            try:
                validate_topic_name(name)
            except TopicError as err:
                return {**result, "error_code": int(err.code), "error_message": err.message}
            info = self._topics.registry.get(name)
            if info is None:
                return {**result, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
            entries = self._config.describe_topic(info.configs, keys)
        elif resource_type == BROKER_RESOURCE:
            error = self._check_broker_name(name, describing=True)
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
                                  "synonyms": [], "config_type": UNKNOWN_TYPE,
                                  "documentation": ""}  # Kafka leaves it unset
                                 for row in rows]
            return result
        elif resource_type == GROUP_RESOURCE:
            if not name:
                return {**result, "error_code": int(ErrorCode.INVALID_REQUEST),
                        "error_message": "Group name must not be empty"}
            overrides = self._topics.registry.group_configs.get(name, {})
            # Kafka lists an internal group config only where the group sets it, even when asked by name.
            entries = [gc.effective(n, overrides, self._config) for n in sorted(gc.GROUP_CONFIGS)
                       if (not keys or n in keys) and (n in overrides or not gc.GROUP_CONFIGS[n].internal)]
        else:  # Kafka fails to describe it (an unknown resource type), with the generic INVALID_REQUEST message
            return {**result, "error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": INVALID_REQUEST_MESSAGE}
        result["configs"] = [_entry_dict(e, include_synonyms, include_documentation) for e in entries]
        return result

    # --- alter -------------------------------------------------------------------------------------------------
    async def alter(self, resource_type: int, name: str, ops: list[tuple[str, int, str | None]], *,
                    validate_only: bool) -> tuple[ErrorCode, str | None]:
        """IncrementalAlterConfigs of a topic, broker or group: Kafka's preprocessing (duplicate keys, null values,
        the resource type), then that resource's checks and the change."""
        try:
            _preprocess(ops, legacy=False)
            if resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE):
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}")
            unknown = [op for _, op, _ in ops if op not in (SET, DELETE, APPEND, SUBTRACT)]
            if unknown:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {unknown[0]}")
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

    async def _alter_topic(self, name: str, ops, validate_only: bool, *, replace: bool = False) -> None:
        """Kafka's ConfigurationControlManager: the new overrides (APPEND and SUBTRACT on a list config's
        override, or its default), the topic's name, its configs after the change checked together, then
        whether the topic exists. `replace`: the overrides not named go (the legacy AlterConfigs)."""
        info: TopicInfo | None = self._topics.registry.get(name)
        current = dict(info.configs) if info is not None else {}
        changes: dict[str, str | None] = {key: None for key in current} if replace else {}
        for key, op, value in ops:
            if op in (APPEND, SUBTRACT):
                definition = tc.TOPIC_CONFIGS.get(key)
                if definition is None or definition.type != "list":
                    raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {key} because "
                                            "its type is not LIST.")
                value = _apply_list_op(current.get(key, definition.default), op, value)
            changes[key] = None if op == DELETE else value
        if not name:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        try:
            validate_topic_name(name)
        except TopicError as err:
            raise ConfigChangeError(err.code, err.message or "") from None
        after = {k: v for k, v in {**current, **changes}.items() if v is not None}
        try:
            for key, value in after.items():
                tc.validate(key, value)
            self._config.validate_topic_values(after)
        except ValueError as err:
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(err)) from None
        if info is None:
            raise ConfigChangeError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        changes = {k: v for k, v in changes.items() if current.get(k) != v}
        if not validate_only and changes:
            await self._topics.set_topic_configs(info, changes)

    async def _alter_broker(self, name: str, ops, validate_only: bool) -> None:
        error = self._check_broker_name(name)
        if error is not None:
            raise error
        per_broker = bool(name)
        current = self._config.as_properties()
        changes: dict[str, str | None] = {}
        for key, op, value in ops:
            if op in (APPEND, SUBTRACT):
                definition = BROKER_CONFIGS.get(key)
                if definition is not None and definition.type != "list":
                    raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Config value {_OP_NAMES[op].lower()} is not "
                                            f"allowed for config key: {key}")
                value = _apply_list_op(current.get(key, ""), op, value)
            elif op == DELETE:
                value = None
            changes[key] = value
        self._check_broker_changes(changes, per_broker)
        if validate_only or not changes:
            return
        await self._commit_broker(changes, per_broker)

    def _check_broker_changes(self, changes: dict[str, str | None], per_broker: bool) -> None:
        """Kafka's DynamicBrokerConfig.validateConfigs, in its order (by Kafka's update modes), then Shoal's own
        refusals: names Kafka does not define, and Kafka-dynamic configs Shoal reads only at start."""
        for names, message in (
            ([k for k in changes if KAFKA_MODES.get(k, CLUSTER_WIDE) == READ_ONLY and k not in SECURITY_CONFIGS],
             "Cannot update these configs dynamically"),
            ([k for k in changes if k in SECURITY_CONFIGS],
             "These security configs can be dynamically updated only per-listener using the listener prefix"),
        ):
            if names:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"{message}: [{', '.join(sorted(names))}]")
        for key, value in changes.items():
            definition = BROKER_CONFIGS.get(key)
            if definition is not None and value is not None:
                try:
                    definition.parse(value)
                except ConfigError as err:
                    # KAFKA-13609: a bad broker value is INVALID_REQUEST in Kafka (ConfigException wrapped)
                    raise ConfigChangeError(ErrorCode.INVALID_REQUEST, str(err)) from None
        if not per_broker:
            names = sorted(k for k in changes if KAFKA_MODES.get(k) == PER_BROKER)
            if names:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster "
                                        f"level, broker id must be specified: [{', '.join(names)}]")
        unknown = [k for k in changes if k not in BROKER_CONFIGS]
        if unknown:
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Unknown broker config {unknown[0]}")
        for key, value in changes.items():
            try:
                self._config.validate_dynamic(key, value, per_broker=True)
            except ConfigError as err:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, str(err)) from None

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
        """AlterConfigs (legacy): the resource's dynamic configs become exactly `configs`. Kafka's
        preprocess, then each resource type's own validation."""
        try:
            _preprocess([(key, SET, value) for key, value in configs], legacy=True)
            if resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE):
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}")
            async with self._changes:
                wanted = dict(configs)
                if resource_type == TOPIC_RESOURCE:
                    await self._alter_topic(name, [(k, SET, v) for k, v in wanted.items()], validate_only,
                                            replace=True)
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
                    await self._alter_group(name, [(k, SET, v) for k, v in wanted.items()], validate_only,
                                            replace=True)
        except ConfigChangeError as err:
            return err.code, err.message
        return ErrorCode.NONE, None

    async def _alter_group(self, group_id: str, ops, validate_only: bool, *, replace: bool = False) -> None:
        """As topics (Kafka's ConfigurationControlManager): the new overrides, the group's name, then every
        override after the change checked (GroupConfig.validate: values, the broker's bounds)."""
        current = dict(self._topics.registry.group_configs.get(group_id, {}))
        changes: dict[str, str | None] = {key: None for key in current} if replace else {}
        for key, op, value in ops:
            if op in (APPEND, SUBTRACT):  # Kafka knows no list-typed group config here, its lists included
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {key} because "
                                        "its type is not LIST.")
            changes[key] = None if op == DELETE else value
        if not group_id:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        after = {k: v for k, v in {**current, **changes}.items() if v is not None}
        try:
            gc.validate_all(after, self._config.get)
        except ValueError as err:
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(err)) from None
        changes = {k: v for k, v in changes.items() if current.get(k) != v}
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
            cached = {n: gc.effective_value(n, overrides, self._config) for n in gc.GROUP_CONFIGS}
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

    def group_settings(self, group_id: str) -> gc.GroupConfig:
        """The effective group configs of `group_id`, typed (built again only after a change)."""
        values = self.group_config(group_id)
        cached = self._group_settings.get(group_id)
        if cached is not None and cached[0] is values:
            return cached[1]
        settings = gc.GroupConfig.from_values(values)
        if len(self._group_settings) >= GROUP_CACHE_SIZE:
            self._group_settings.clear()
        self._group_settings[group_id] = (values, settings)
        return settings

    def _check_broker_name(self, name: str, *, describing: bool = False) -> ConfigChangeError | None:
        """Kafka's checks of a broker resource's name: empty (the cluster-wide defaults) or this broker's id."""
        if name in ("", str(self._config.node_id)):
            return None
        try:
            int(name)
        except ValueError:
            what = "Broker" if describing else "Node"
            return ConfigChangeError(ErrorCode.INVALID_REQUEST, f"{what} id must be an integer, but it is: {name}")
        expected = f"{self._config.node_id} or empty string," if describing else f"{self._config.node_id},"
        return ConfigChangeError(ErrorCode.INVALID_REQUEST,
                                 f"Unexpected broker id, expected {expected} but received {name}")


def _preprocess(ops: list[tuple[str, int, str | None]], *, legacy: bool) -> None:
    """Kafka's ConfigAdminManager.preprocess of one resource: no key twice, no null value (but to DELETE)."""
    keys = [key for key, _, _ in ops]
    if len(set(keys)) != len(keys):
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [key for key, op, value in ops if value is None and (legacy or op != DELETE)]
    if nulls:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
