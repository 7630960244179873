"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72), and ListConfigResources (74,
KIP-1142's generalisation of ListClientMetricsResources).

Get/PushTelemetry consult no ACL (as Kafka's KafkaApis); ListConfigResources needs DESCRIBE_CONFIGS on the
cluster. The client's attributes that subscriptions match on are read from the request and its connection.
"""

from __future__ import annotations

from broker.cluster.manager import TopicManager
from broker.cluster.topics import BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE
from broker.config.broker_loggers import BROKER_LOGGER_RESOURCE
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.telemetry import subscriptions as sub
from broker.telemetry.manager import ACCEPTED_COMPRESSION_TYPES, ZERO_UUID, ClientMetricsManager
from broker.telemetry.resources import ClientMetricsResources
from broker.telemetry.runtime import ClientTelemetry
from protocol.errors import ErrorCode

GET_TELEMETRY_SUBSCRIPTIONS = 71
PUSH_TELEMETRY = 72
LIST_CONFIG_RESOURCES = 74
# What v1 lists when no type is named (v0 lists client-metrics subscriptions only); any other type named is
# UNSUPPORTED_VERSION, as Kafka.
V1_TYPES = (TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE)


def client_attributes(ctx: RequestContext) -> dict[str, str | None]:
    """ClientMetricsInstanceMetadata: what `match` patterns see (the instance id is added by the manager)."""
    conn = ctx.connection
    host, _, port = conn.peer.rpartition(":")
    return {
        sub.CLIENT_ID: ctx.client_id,
        sub.CLIENT_SOFTWARE_NAME: conn.client_software_name,
        sub.CLIENT_SOFTWARE_VERSION: conn.client_software_version,
        sub.CLIENT_SOURCE_ADDRESS: conn.host if conn.host != "?" else (host.strip("[]") or None),
        sub.CLIENT_SOURCE_PORT: port or None,
    }


class TelemetryApis(Apis):
    """GetTelemetrySubscriptions, PushTelemetry (KIP-714) and ListConfigResources."""

    def __init__(self, client_metrics: ClientMetricsManager, client_telemetry: ClientTelemetry,
                 topics: TopicManager, client_metrics_resources: ClientMetricsResources,
                 node_id: int) -> None:
        self._client_metrics = client_metrics
        self._client_telemetry = client_telemetry
        self._topics = topics
        self._client_metrics_resources = client_metrics_resources
        self._node_id = node_id

    async def get_telemetry_subscriptions(self, ctx: RequestContext, req: Request) -> Response:
        manager = self._client_metrics
        answer = manager.get_subscriptions(req.client_instance_id, client_attributes(ctx), ctx.connection.id)
        instance = answer.instance
        if instance is None:  # Kafka's error response: every other field at its default
            return {"throttle_time_ms": 0, "error_code": int(answer.error), "client_instance_id": ZERO_UUID,
                    "subscription_id": 0, "accepted_compression_types": [], "push_interval_ms": 0,
                    "telemetry_max_bytes": 0, "delta_temporality": False, "requested_metrics": []}
        return {"throttle_time_ms": 0, "error_code": 0, "client_instance_id": instance.instance_id,
                "subscription_id": instance.subscription_id,
                "accepted_compression_types": list(ACCEPTED_COMPRESSION_TYPES),
                "push_interval_ms": instance.push_interval_ms, "telemetry_max_bytes": manager.max_bytes,
                "delta_temporality": True, "requested_metrics": list(instance.metrics)}

    async def push_telemetry(self, ctx: RequestContext, req: Request) -> Response:
        answer = await self._client_telemetry.push(
            req.client_instance_id, req.subscription_id, req.terminating, req.compression_type, bytes(req.metrics or b""),
            client_attributes(ctx), ctx.connection.id)
        if answer.error != ErrorCode.NONE:
            ctx.log.debug("push telemetry refused", error=answer.error.name, reason=answer.message)
        return {"throttle_time_ms": 0, "error_code": int(answer.error)}

    async def list_config_resources(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                    "config_resources": []}
        wanted = list(req.resource_types) if ctx.api_version >= 1 else []
        if not wanted:
            wanted = list(V1_TYPES) if ctx.api_version >= 1 else [CLIENT_METRICS_RESOURCE]
        if any(t not in V1_TYPES for t in wanted):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.UNSUPPORTED_VERSION), "config_resources": []}
        registry = self._topics.registry
        node = str(self._node_id)
        names = {
            TOPIC_RESOURCE: lambda: registry.names(),
            BROKER_RESOURCE: lambda: [node],
            BROKER_LOGGER_RESOURCE: lambda: [node],
            CLIENT_METRICS_RESOURCE: lambda: self._client_metrics_resources.names(),
            GROUP_RESOURCE: lambda: sorted(registry.group_configs),
        }
        resources = [{"resource_name": name, "resource_type": t}
                     for t in dict.fromkeys(wanted) for name in names[t]()]
        return {"throttle_time_ms": 0, "error_code": 0, "config_resources": resources}

    HANDLERS = {
        GET_TELEMETRY_SUBSCRIPTIONS: get_telemetry_subscriptions,
        PUSH_TELEMETRY: push_telemetry,
        LIST_CONFIG_RESOURCES: list_config_resources,
    }
