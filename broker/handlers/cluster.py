"""DescribeCluster (60) and FindCoordinator (10): this single broker is every coordinator."""

from __future__ import annotations

import base64
import uuid

from broker.context import RequestContext
from broker.security.acl import AUTHORIZATION_ERRORS, CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

FIND_COORDINATOR = 10
DESCRIBE_CLUSTER = 60

GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2
BROKER_ENDPOINT = 1
NO_AUTHORIZED_OPERATIONS = -2147483648


def valid_share_key(key: str) -> bool:
    """A SHARE coordinator key is "groupId:topicId:partition" (the group id may itself contain ':')."""
    group, sep1, rest = key.rpartition(":")
    group, sep2, topic_id = group.rpartition(":")
    if not (sep1 and sep2 and group):
        return False
    try:
        uuid.UUID(bytes=_decode_topic_id(topic_id))
        return int(rest) >= 0
    except ValueError:
        return False


def _decode_topic_id(text: str) -> bytes:
    # Kafka prints topic ids as URL-safe base64 without padding (22 characters).
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError("topic id must be 16 bytes")
    return raw


def coordinator_error(key_type: int, key: str, version: int) -> tuple[ErrorCode, str | None]:
    if key_type not in (GROUP_KEY, TRANSACTION_KEY, SHARE_KEY) or (key_type == SHARE_KEY and version < 6):
        return ErrorCode.INVALID_REQUEST, f"Unsupported key type {key_type}"
    if key_type == SHARE_KEY and not valid_share_key(key):
        return ErrorCode.INVALID_REQUEST, "Share coordinator key must be groupId:topicId:partition"
    if key_type == GROUP_KEY and not key:
        return ErrorCode.INVALID_REQUEST, "Group id must not be empty"
    return ErrorCode.NONE, None


def _find_error(ctx: RequestContext, key_type: int, key: str, version: int) -> tuple[ErrorCode, str | None]:
    """Kafka's order: DESCRIBE on the group (transactional id) first, then CLUSTER_ACTION for share keys (which
    only brokers look up), then the key itself."""
    guard = {GROUP_KEY: (AclOperation.DESCRIBE, ResourceType.GROUP, key),
             TRANSACTION_KEY: (AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)}.get(key_type)
    if key_type == SHARE_KEY and version >= 6:
        guard = (AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    if guard is not None and not ctx.authorize(*guard):
        code, message = AUTHORIZATION_ERRORS[guard[1]]
        return ErrorCode(code), message
    return coordinator_error(key_type, key, version)


async def handle_find_coordinator(ctx: RequestContext, req) -> dict:
    node = ctx.node
    version = ctx.api_version
    key_type = req.get("key_type", GROUP_KEY) if version >= 1 else GROUP_KEY
    if version < 4:
        code, message = _find_error(ctx, key_type, req.key, version)
        ok = code == ErrorCode.NONE
        return {
            "throttle_time_ms": 0,
            "error_code": int(code),
            "error_message": message,
            "node_id": node.node_id if ok else -1,
            "host": node.host if ok else "",
            "port": node.port if ok else -1,
        }
    coordinators = []
    for key in req.coordinator_keys:
        code, message = _find_error(ctx, key_type, key, version)
        ok = code == ErrorCode.NONE
        coordinators.append(
            {
                "key": key,
                "node_id": node.node_id if ok else -1,
                "host": node.host if ok else "",
                "port": node.port if ok else -1,
                "error_code": int(code),
                "error_message": message,
            }
        )
    return {"throttle_time_ms": 0, "coordinators": coordinators}


async def handle_describe_cluster(ctx: RequestContext, req) -> dict:
    node = ctx.node
    endpoint_type = req.get("endpoint_type", BROKER_ENDPOINT) if ctx.api_version >= 1 else BROKER_ENDPOINT
    if endpoint_type != BROKER_ENDPOINT:
        # Controller endpoints are not exposed: this broker is combined-mode with no separate controller listener.
        return {
            "error_code": int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
            "error_message": "Only broker endpoints are served",
            "endpoint_type": endpoint_type,
            "cluster_id": ctx.broker.cluster_id,
            "controller_id": -1,
            "brokers": [],
        }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": BROKER_ENDPOINT,
        "cluster_id": ctx.broker.cluster_id,
        "controller_id": node.node_id,
        "brokers": [
            {"broker_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack, "is_fenced": False}
        ],
        "cluster_authorized_operations": _cluster_operations(ctx, req),
    }


def _cluster_operations(ctx: RequestContext, req) -> int:
    if not req.get("include_cluster_authorized_operations"):
        return NO_AUTHORIZED_OPERATIONS
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)


HANDLERS = {FIND_COORDINATOR: handle_find_coordinator, DESCRIBE_CLUSTER: handle_describe_cluster}
