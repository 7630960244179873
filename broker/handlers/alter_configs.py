"""AlterConfigs (33), the legacy, non-incremental form: each resource's dynamic configs become exactly the ones
given (Kafka's ConfigurationControlManager.legacyAlterConfigs); the config service checks and journals them, the
client-metrics resources (KIP-714) their subscriptions.

As Kafka: a resource named twice is refused (every copy, INVALID_REQUEST "Each resource must appear at most
once."), ALTER_CONFIGS on the topic, the group, or the cluster for broker resources (that type's authorization
error otherwise), validate_only checks without changing anything.
"""

from __future__ import annotations

from broker.cluster.config_service import DELETE, SET, ConfigService
from broker.cluster.manager import TopicManager
from broker.cluster.topics import BROKER_RESOURCE, CLIENT_METRICS_RESOURCE
from broker.config.broker_loggers import BROKER_LOGGER_RESOURCE
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.handlers.configs import _refused, _repeated
from broker.security.acl import AclOperation
from broker.telemetry.resources import ClientMetricsResources
from protocol.errors import ErrorCode

ALTER_CONFIGS = 33
DUPLICATE = (int(ErrorCode.INVALID_REQUEST), "Each resource must appear at most once.")


class AlterConfigApis(Apis):
    """AlterConfigs (whole-resource replacement), through the config service."""

    def __init__(self, configs: ConfigService, topics: TopicManager,
                 client_metrics_resources: ClientMetricsResources) -> None:
        self._configs = configs
        self._topics = topics
        self._client_metrics_resources = client_metrics_resources

    async def alter_configs(self, ctx: RequestContext, req: Request) -> Response:
        service = self._configs
        repeated = _repeated(req.resources)
        responses = []
        for resource in req.resources:
            kind, name = resource.resource_type, resource.resource_name
            # a broker logger is refused by the config service before any authorization (Kafka's preprocess:
            # the legacy AlterConfigs does not know that resource type)
            refused: tuple[int, str | None] | None = DUPLICATE if (kind, name) in repeated else (
                None if kind == BROKER_LOGGER_RESOURCE
                else _refused(ctx, AclOperation.ALTER_CONFIGS, kind, name))
            if refused is not None and kind == BROKER_RESOURCE and refused is not DUPLICATE:
                refused = (refused[0], None)  # Kafka's refusal of a broker resource carries no message
            if refused is None:
                configs = [(c.name, c.value) for c in resource.configs]
                if kind == CLIENT_METRICS_RESOURCE:
                    code, message = await self._replace_subscription(name, configs, req.validate_only)
                else:
                    code, message = await service.replace(kind, name, configs,
                                                          validate_only=req.validate_only)
                refused = (int(code), message)
            responses.append({"error_code": refused[0], "error_message": refused[1], "resource_type": kind,
                              "resource_name": name})
        return {"throttle_time_ms": 0, "responses": responses}

    async def _replace_subscription(self, name: str, configs: list[tuple[str, str | None]],
                                    validate_only: bool) -> tuple[ErrorCode, str | None]:
        """A client-metrics subscription becomes exactly `configs`: sets for those given, deletes for the others."""
        nulls = [key for key, value in configs if value is None]
        if nulls:  # Kafka's ConfigAdminManager.preprocess, before anything else
            return ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
        current = self._topics.registry.client_metrics_configs.get(name, {})
        given = {key for key, _ in configs}
        ops = [(key, SET, value) for key, value in configs] + [(key, DELETE, None) for key in current if key not in given]
        return await self._client_metrics_resources.alter(name, ops, validate_only=validate_only)

    HANDLERS = {ALTER_CONFIGS: alter_configs}
