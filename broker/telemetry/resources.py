"""The CLIENT_METRICS config resource: DescribeConfigs and IncrementalAlterConfigs of client-metrics
subscriptions, journaled as ConfigRecords in the metadata journal (replayed on start by the topic registry) and
handed to the ClientMetricsManager once applied, so a change takes effect at once."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.cluster.topics import CLIENT_METRICS_RESOURCE, CONFIG_RECORD
from broker.telemetry import subscriptions as sub
from broker.telemetry.manager import ClientMetricsManager
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.manager import TopicManager

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
CLIENT_METRICS_CONFIG_SOURCE = 7  # DescribeConfigs' ConfigSource.CLIENT_METRICS_CONFIG


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

    def describe(self, name: str, keys) -> dict:
        """As Kafka's ConfigHelper: the subscription's configs as set (no defaults), source CLIENT_METRICS_CONFIG;
        an unknown subscription has no configs."""
        result = {"error_code": 0, "error_message": None, "resource_type": CLIENT_METRICS_RESOURCE,
                  "resource_name": name, "configs": []}
        if not name:
            return {**result, "error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": "Client metrics subscription name must not be empty"}
        props = self._topics.registry.client_metrics_configs.get(name, {})
        result["configs"] = [
            {"name": key, "value": value, "read_only": False, "config_source": CLIENT_METRICS_CONFIG_SOURCE,
             "is_sensitive": False, "synonyms": [], "config_type": 0, "documentation": None}
            for key, value in sorted(props.items()) if not keys or key in keys]
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
            if key not in sub.LIST_KEYS:
                raise sub.SubscriptionError(ErrorCode.INVALID_CONFIG,
                                            f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key {key} "
                                            "because its type is not LIST.")
            items = sub.parse_list(after.get(key, ""))
            given = sub.parse_list(value or "")
            items = items + [v for v in given if v not in items] if op == APPEND else \
                [v for v in items if v not in given]
            after[key] = ",".join(items)
        elif op == SET:
            if value is None:
                raise sub.SubscriptionError(ErrorCode.INVALID_CONFIG, f"Null value not supported for: {key}")
            after[key] = value
        else:
            raise sub.SubscriptionError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    return after
