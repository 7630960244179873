"""The CLIENT_METRICS config resource: DescribeConfigs and IncrementalAlterConfigs of client-metrics
subscriptions, journaled as ConfigRecords in the metadata journal (replayed on start by the topic registry) and
handed to the ClientMetricsManager once applied, so a change takes effect at once."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from broker.cluster.topics import CLIENT_METRICS_RESOURCE, CONFIG_RECORD
from broker.telemetry import subscriptions as sub
from broker.telemetry.manager import ClientMetricsManager
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
CLIENT_METRICS_CONFIG_SOURCE = 7  # DescribeConfigs' ConfigSource.CLIENT_METRICS_CONFIG
DEFAULT_CONFIG_SOURCE = 5
INT_TYPE, LIST_TYPE = 3, 7  # DescribeConfigs' config types
# name -> (type, default as described, documentation)
_DESCRIBED = {
    sub.INTERVAL_MS: (INT_TYPE, str(sub.DEFAULT_INTERVAL_MS), "How often matching clients push their metrics (ms)."),
    sub.MATCH: (LIST_TYPE, "", "Which clients the subscription applies to: selector=pattern pairs (RE2)."),
    sub.METRICS: (LIST_TYPE, "", "Prefixes of the metric names the matching clients push (* for all)."),
}


def _shown(key: str, value: str) -> str:
    """A stored value as Kafka describes it: a number parsed, a list's items trimmed and joined by commas."""
    if key == sub.INTERVAL_MS:
        return str(int(value.strip()))
    return ",".join(item.strip() for item in value.split(",")) if value.strip() else ""


class ClientMetricsResources:
    def __init__(self, topics: TopicManager, manager: ClientMetricsManager) -> None:
        self._topics = topics
        self._manager = manager
        self._changes = asyncio.Lock()

    def load(self) -> None:
        """Hand the journaled subscriptions to the manager (start-up)."""
        for name, props in self._topics.registry.client_metrics_configs.items():
            self._manager.update_subscription(name, dict(props))

    def names(self) -> list[str]:
        return sorted(self._topics.registry.client_metrics_configs)

    def describe(self, name: str, keys, *, include_synonyms: bool = False, include_documentation: bool = False
                 ) -> dict:
        """As Kafka 4.4's ConfigHelper: the three configs of a subscription (none or empty `keys`: all), a set one
        with its value as Kafka prints it and source CLIENT_METRICS_CONFIG (itself its synonym), the others with
        their defaults; an unknown subscription has only defaults."""
        result: dict[str, Any] = {"error_code": 0, "error_message": "", "resource_type": CLIENT_METRICS_RESOURCE,
                  "resource_name": name, "configs": []}
        if not name:
            return {**result, "error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": "Client metrics subscription name must not be empty"}
        props = self._topics.registry.client_metrics_configs.get(name, {})
        for key, (type_code, default, doc) in _DESCRIBED.items():
            if keys and key not in keys:
                continue
            if key in props:
                value = _shown(key, props[key])
                source, synonyms = CLIENT_METRICS_CONFIG_SOURCE, [{"name": key, "value": value,
                                                                  "source": CLIENT_METRICS_CONFIG_SOURCE}]
            else:
                value, source, synonyms = default, DEFAULT_CONFIG_SOURCE, []
            result["configs"].append({
                "name": key, "value": value, "read_only": False, "config_source": source, "is_sensitive": False,
                "synonyms": synonyms if include_synonyms else [], "config_type": type_code,
                "documentation": doc if include_documentation else None})
        return result

    async def alter(self, name: str, ops: list[tuple[str, int, str | None]], *,
                    validate_only: bool) -> tuple[ErrorCode, str | None]:
        keys = [key for key, _, _ in ops]
        if len(set(keys)) != len(keys):
            return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
        async with self._changes:  # changes computed from the current values never interleave
            current = dict(self._topics.registry.client_metrics_configs.get(name, {}))
            try:
                after = _altered(current, ops)
                sub.validate(name, after)
            except sub.SubscriptionError as err:
                return err.code, err.message
            changes = {k: after.get(k) for k in current.keys() | after.keys() if current.get(k) != after.get(k)}
            if validate_only or not changes:
                return ErrorCode.NONE, None
            await self._topics.commit_records([
                (CONFIG_RECORD, {"resource_type": CLIENT_METRICS_RESOURCE, "resource_name": name, "name": k,
                                 "value": v}) for k, v in sorted(changes.items())
            ], then=lambda: self._manager.update_subscription(
                name, dict(self._topics.registry.client_metrics_configs.get(name, {}))))
        return ErrorCode.NONE, None


def _altered(current: dict[str, str], ops) -> dict[str, str]:
    after = dict(current)
    for key, op, value in ops:
        if op == DELETE:
            after.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            # Kafka 4.4's controller knows no types for client-metrics configs, so it refuses to APPEND or
            # SUBTRACT any of them, the LIST ones included (kafka-client-metrics.sh SETs whole lists).
            raise sub.SubscriptionError(ErrorCode.INVALID_CONFIG,
                                        f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key {key} "
                                        "because its type is not LIST.")
        elif op == SET:
            if value is None:
                raise sub.SubscriptionError(ErrorCode.INVALID_CONFIG, f"Null value not supported for: {key}")
            after[key] = value
        else:
            raise sub.SubscriptionError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    return after
