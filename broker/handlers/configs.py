"""DescribeConfigs (32) and IncrementalAlterConfigs (44): thin wrappers over the config service."""

from __future__ import annotations

DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44


async def handle_describe_configs(ctx, req) -> dict:
    service = ctx.broker.configs
    version = ctx.api_version
    results = [
        service.describe(
            resource.resource_type,
            resource.resource_name,
            resource.configuration_keys,
            include_synonyms=version >= 1 and req.include_synonyms,
            include_documentation=version >= 3 and req.include_documentation,
        )
        for resource in req.resources
    ]
    return {"throttle_time_ms": 0, "results": results}


async def handle_incremental_alter_configs(ctx, req) -> dict:
    service = ctx.broker.configs
    responses = []
    for resource in req.resources:
        code, message = await service.alter(
            resource.resource_type,
            resource.resource_name,
            [(c.name, c.config_operation, c.value) for c in resource.configs],
            validate_only=req.validate_only,
        )
        responses.append(
            {
                "error_code": int(code),
                "error_message": message,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
            }
        )
    return {"throttle_time_ms": 0, "responses": responses}


HANDLERS = {DESCRIBE_CONFIGS: handle_describe_configs, INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs}
