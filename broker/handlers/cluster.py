"""DescribeCluster (60) and FindCoordinator (10): this single broker is every coordinator."""

from __future__ import annotations

import base64
import binascii
import re
import uuid

from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.node import Endpoints
from broker.security.acl import AUTHORIZATION_ERRORS, CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode

FIND_COORDINATOR = 10
DESCRIBE_CLUSTER = 60

GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2
BROKER_ENDPOINT = 1
NO_AUTHORIZED_OPERATIONS = -2147483648


# Kafka's message for INVALID_REQUEST when it gives no other (Errors.INVALID_REQUEST's exception).
INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library or "
                           "the message was sent to an incompatible broker. See the broker logs for more details.")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _java_int(text: str) -> bool:
    """Whether Java's Integer.parseInt reads `text`: an optional sign, decimal digits (any script's), in range."""
    digits = text[1:] if text[:1] in "+-" else text
    return bool(digits) and digits.isdecimal() and INT32_MIN <= int(text) <= INT32_MAX


def valid_share_key(key: str) -> bool:
    """A SHARE coordinator key is "groupId:topicId:partition" (the group id may itself contain ':'), read as
    Kafka's SharePartitionKey does: a group id not blank, a topic id in Kafka's base64 form, a partition any Java
    int (Kafka does not check its sign)."""
    parts = key.split(":")
    while parts and not parts[-1]:
        parts.pop()  # Java's String.split drops trailing empty strings
    if len(parts) < 3 or not ":".join(parts[:-2]).strip():
        return False
    if not _java_int(parts[-1]):
        return False
    try:
        uuid.UUID(bytes=_decode_topic_id(parts[-2]))
    except ValueError:
        return False
    return True


def _decode_topic_id(text: str) -> bytes:
    # Kafka prints topic ids as URL-safe base64, unpadded (22 characters); its decoder refuses other characters.
    if not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ValueError("not URL-safe base64")
    try:
        raw = base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))
    except binascii.Error as e:
        raise ValueError(str(e)) from None
    if len(raw) != 16:
        raise ValueError("topic id must be 16 bytes")
    return raw


def _find_error(ctx: RequestContext, key_type: int, key: str, version: int) -> ErrorCode:
    """Kafka's getCoordinator: DESCRIBE on the group (transactional id) first, then the key type's version,
    CLUSTER_ACTION for share keys (which only brokers look up), then the share key's form. Any group id, even
    an empty one, has a coordinator."""
    guard = {GROUP_KEY: (AclOperation.DESCRIBE, ResourceType.GROUP, key),
             TRANSACTION_KEY: (AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)}.get(key_type)
    if guard is not None and not ctx.authorize(*guard):
        return ErrorCode(AUTHORIZATION_ERRORS[guard[1]][0])
    if key_type == SHARE_KEY:
        if version < 6:
            return ErrorCode.INVALID_REQUEST
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if not valid_share_key(key):
            return ErrorCode.INVALID_REQUEST
    return ErrorCode.NONE


def _message(code: ErrorCode) -> str:
    """The message Kafka's FindCoordinator v1-v3 puts in an answer: its exception's default message for an
    error, the error's name for none."""
    if code == ErrorCode.NONE:
        return "NONE"
    if code == ErrorCode.INVALID_REQUEST:
        return INVALID_REQUEST_MESSAGE
    return next((message for c, message in AUTHORIZATION_ERRORS.values() if c == code), code.name)


def _cluster_operations(ctx: RequestContext, req) -> int:
    if not req.get("include_cluster_authorized_operations"):
        return NO_AUTHORIZED_OPERATIONS
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)


class ClusterApis(Apis):
    """FindCoordinator and DescribeCluster: this broker is every coordinator."""

    def __init__(self, endpoints: Endpoints) -> None:
        self._endpoints = endpoints

    async def find_coordinator(self, ctx: RequestContext, req: Request) -> Response:
        node = self._endpoints.for_listener(ctx.connection.listener)
        version = ctx.api_version
        key_type = req.get("key_type", GROUP_KEY) if version >= 1 else GROUP_KEY
        # An unknown key type fails the whole request, with INVALID_REQUEST's message on every key (v4+).
        known = key_type in (GROUP_KEY, TRANSACTION_KEY, SHARE_KEY)
        if version < 4:
            code = _find_error(ctx, key_type, req.key, version) if known else ErrorCode.INVALID_REQUEST
            ok = code == ErrorCode.NONE
            return {
                "throttle_time_ms": 0,
                "error_code": int(code),
                "error_message": _message(code),
                "node_id": node.node_id if ok else -1,
                "host": node.host if ok else "",
                "port": node.port if ok else -1,
            }
        coordinators = []
        for key in req.coordinator_keys:
            code = _find_error(ctx, key_type, key, version) if known else ErrorCode.INVALID_REQUEST
            ok = code == ErrorCode.NONE
            coordinators.append(
                {
                    "key": key,
                    "node_id": node.node_id if ok else -1,
                    "host": node.host if ok else "",
                    "port": node.port if ok else -1,
                    "error_code": int(code),
                    # Kafka sets a message only when the whole request failed
                    "error_message": "" if known else INVALID_REQUEST_MESSAGE,
                }
            )
        return {"throttle_time_ms": 0, "coordinators": coordinators}

    async def describe_cluster(self, ctx: RequestContext, req: Request) -> Response:
        node = self._endpoints.for_listener(ctx.connection.listener)
        endpoint_type = req.get("endpoint_type", BROKER_ENDPOINT) if ctx.api_version >= 1 else BROKER_ENDPOINT
        if endpoint_type != BROKER_ENDPOINT:
            # Controller endpoints are not exposed: this broker is combined-mode with no separate controller listener,
            # so a controller's request reached a broker's endpoint, as Kafka's brokers answer it.
            return {
                "error_code": int(ErrorCode.MISMATCHED_ENDPOINT_TYPE),
                "error_message": "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                                 "CONTROLLER",
                "endpoint_type": endpoint_type,
                "cluster_id": self._endpoints.cluster_id,
                "controller_id": -1,
                "brokers": [],
            }
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "endpoint_type": BROKER_ENDPOINT,
            "cluster_id": self._endpoints.cluster_id,
            "controller_id": node.node_id,
            "brokers": [
                {"broker_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack, "is_fenced": False}
            ],
            "cluster_authorized_operations": _cluster_operations(ctx, req),
        }

    HANDLERS = {FIND_COORDINATOR: find_coordinator, DESCRIBE_CLUSTER: describe_cluster}
