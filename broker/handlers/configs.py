"""DescribeConfigs (32) and IncrementalAlterConfigs (44): thin wrappers over the config service.

Authorization as Kafka's ConfigHelper / ControllerApis: DESCRIBE_CONFIGS (ALTER_CONFIGS) on the topic, the group,
or the cluster for broker and client-metrics resources; a refused resource gets its type's authorization error.

A resource named twice in one IncrementalAlterConfigs is refused, every copy (Kafka's ConfigAdminManager: INVALID_REQUEST
"Each resource must appear at most once."). Kafka describes every copy in a DescribeConfigs; Shoal describes the
first and answers the others INVALID_REQUEST "Duplicate resource.": no client sends duplicates (librdkafka and the
Java admin refuse them), and answering each copy let one 100 KB request build a 260 MB response.
"""

from __future__ import annotations

from broker.cluster.config_service import INVALID_REQUEST_MESSAGE, ConfigService
from broker.cluster.topics import BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE
from broker.config.broker_loggers import BROKER_LOGGER_RESOURCE
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.pacing import Pacer
from broker.security.acl import AUTHORIZATION_ERRORS, CLUSTER_NAME, AclOperation, ResourceType
from broker.telemetry.resources import ClientMetricsResources
from protocol.errors import ErrorCode

DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44
# Config resource type -> the ACL resource that guards it (and names it).
_GUARD = {TOPIC_RESOURCE: ResourceType.TOPIC, GROUP_RESOURCE: ResourceType.GROUP, BROKER_RESOURCE: ResourceType.CLUSTER,
          BROKER_LOGGER_RESOURCE: ResourceType.CLUSTER, CLIENT_METRICS_RESOURCE: ResourceType.CLUSTER}
DUPLICATE_RESOURCE = (int(ErrorCode.INVALID_REQUEST), "Duplicate resource.")
DUPLICATE_ALTERATION = (int(ErrorCode.INVALID_REQUEST), "Each resource must appear at most once.")


def _repeated(resources) -> set[tuple[int, str]]:
    """(type, name) of the resources a request names more than once."""
    seen: set[tuple[int, str]] = set()
    repeated: set[tuple[int, str]] = set()
    for resource in resources:
        ident = (resource.resource_type, resource.resource_name)
        (repeated if ident in seen else seen).add(ident)
    return repeated


def _refused(ctx: RequestContext, operation: AclOperation, resource_type: int, name: str) -> tuple[int, str] | None:
    """(error code, message) when the client may not do `operation` on this config resource."""
    guard = _GUARD.get(resource_type)
    if guard is None:
        return None  # unknown resource types are answered by the config service
    if ctx.authorize(operation, guard, CLUSTER_NAME if guard == ResourceType.CLUSTER else name):
        return None
    return AUTHORIZATION_ERRORS[guard]


class ConfigApis(Apis):
    """DescribeConfigs and IncrementalAlterConfigs, through the config service (client-metrics resources
    through theirs)."""

    def __init__(self, configs: ConfigService, client_metrics_resources: ClientMetricsResources) -> None:
        self._configs = configs
        self._client_metrics_resources = client_metrics_resources

    async def describe_configs(self, ctx: RequestContext, req: Request) -> Response:
        service = self._configs
        version = ctx.api_version
        if any(resource.resource_type not in _GUARD for resource in req.resources):
            # Kafka fails the whole request on a resource type it does not know (while authorizing it): every
            # resource is answered INVALID_REQUEST with the error's generic message
            return {"throttle_time_ms": 0, "results": [
                {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": INVALID_REQUEST_MESSAGE, "configs": [],
                 "resource_type": r.resource_type, "resource_name": r.resource_name} for r in req.resources]}
        results = []
        seen: set[tuple[int, str]] = set()
        pacer = Pacer()
        for resource in req.resources:
            await pacer.pace()  # every config of thousands of topics: yield to the loop between resources
            ident = (resource.resource_type, resource.resource_name)
            # the first copy is described, later ones refused
            refused = DUPLICATE_RESOURCE if ident in seen else (
                _refused(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name))
            seen.add(ident)
            if refused is not None:
                results.append({"error_code": refused[0], "error_message": refused[1], "configs": [],
                                "resource_type": resource.resource_type,
                                "resource_name": resource.resource_name})
                continue
            if resource.resource_type == CLIENT_METRICS_RESOURCE:  # client-metrics subscriptions (KIP-714)
                results.append(self._client_metrics_resources.describe(
                    resource.resource_name, resource.configuration_keys,
                    include_synonyms=version >= 1 and req.include_synonyms,
                    include_documentation=version >= 3 and req.include_documentation))
                continue
            results.append(service.describe(
                resource.resource_type,
                resource.resource_name,
                resource.configuration_keys,
                include_synonyms=version >= 1 and req.include_synonyms,
                include_documentation=version >= 3 and req.include_documentation,
            ))
        return {"throttle_time_ms": 0, "results": results}

    async def incremental_alter_configs(self, ctx: RequestContext, req: Request) -> Response:
        service = self._configs
        responses = []
        repeated = _repeated(req.resources)
        for resource in req.resources:
            duplicate = (resource.resource_type, resource.resource_name) in repeated
            # every copy is refused: which of two alterations was meant is unknowable. A broker logger's
            # authorization comes after the checks of its operations, as Kafka's RuntimeLoggerManager does it.
            refused: tuple[int, str | None] | None = DUPLICATE_ALTERATION if duplicate else (
                None if resource.resource_type == BROKER_LOGGER_RESOURCE else
                _refused(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name))
            if refused is not None and resource.resource_type == BROKER_RESOURCE and not duplicate:
                refused = (refused[0], None)  # Kafka's refusal of a broker resource here carries no message
            if refused is not None:
                responses.append({"error_code": refused[0], "error_message": refused[1],
                                  "resource_type": resource.resource_type,
                                  "resource_name": resource.resource_name})
                continue
            ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
            if resource.resource_type == BROKER_LOGGER_RESOURCE:
                code, message = service.alter_loggers(
                    resource.resource_name, ops, validate_only=req.validate_only,
                    authorized=ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME))
            elif resource.resource_type == CLIENT_METRICS_RESOURCE:  # client-metrics subscriptions (KIP-714)
                code, message = await self._client_metrics_resources.alter(
                    resource.resource_name, ops, validate_only=req.validate_only)
            else:
                code, message = await service.alter(
                    resource.resource_type, resource.resource_name, ops, validate_only=req.validate_only)
            responses.append(
                {
                    "error_code": int(code),
                    "error_message": message,
                    "resource_type": resource.resource_type,
                    "resource_name": resource.resource_name,
                }
            )
        return {"throttle_time_ms": 0, "responses": responses}

    HANDLERS = {DESCRIBE_CONFIGS: describe_configs, INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs}
