"""ApiVersions (api key 18): the versions this broker serves, computed from the router's registrations.

v3+ responses carry the features (SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures) of
broker.features, as Kafka's ApiVersionsResponse: never empty (librdkafka 2.0.2, kcat 1.7.1, rejects empty
arrays; metadata.version is always there), v3 without the supported features whose minimum is 0 (KAFKA-17492).
A client reads transaction.version there to choose transactions v2 (KIP-890). Versions above the ones we serve
are answered by the router (v0 layout, UNSUPPORTED_VERSION, KIP-511).

v5 (KIP-1242): a client that knows which cluster and node it means to reach sends ClusterId and NodeId; when
they name another cluster or node (a stale address after a rolling restart) the answer is REBOOTSTRAP_REQUIRED,
with no api keys, and a Kafka client configured with metadata.recovery.strategy=rebootstrap rebootstraps. As
Kafka's KafkaApis (clusterIdOrNodeIdIsInvalid), only a request naming a cluster is checked, and then both must
be this broker's; a NodeId without a ClusterId is an invalid request (INVALID_REQUEST, as Kafka 4.4).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from broker.context import RequestContext
from broker.features import Features
from broker.handlers.apis import Apis, Request, Response
from broker.node import Endpoints
from broker.router import Router
from protocol.errors import ErrorCode

API_VERSIONS = 18
# Kafka's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN (KIP-511).
SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def valid_software(name: str | None, version: str | None) -> bool:
    return bool(name and version and SOFTWARE_NAME_VERSION.fullmatch(name)
                and SOFTWARE_NAME_VERSION.fullmatch(version))


class ApiVersionsApis(Apis):
    """ApiVersions, from the router's registrations and the finalized features (`features()`: the current
    levels, which UpdateFeatures changes)."""

    def __init__(self, router: Router, features: Callable[[], Features], endpoints: Endpoints) -> None:
        self._router = router
        self._features = features
        self._endpoints = endpoints

    def _misrouted(self, cluster_id: str | None, node_id: int) -> bool:
        """KIP-1242: the client names a cluster, and it or the node is not this broker's."""
        return cluster_id is not None and (cluster_id != self._endpoints.cluster_id
                                           or node_id != self._endpoints.node_id)

    async def api_versions(self, ctx: RequestContext, req: Request) -> Response:
        router = self._router
        if ctx.api_version >= 3:
            name, version = req.client_software_name, req.client_software_version
            if not valid_software(name, version) or (ctx.api_version >= 5 and req.cluster_id is None
                                                     and req.node_id != -1):
                ctx.log.info("invalid ApiVersions request", software_name=name, software_version=version)
                return {"error_code": int(ErrorCode.INVALID_REQUEST), "api_keys": [], "throttle_time_ms": 0}
            ctx.connection.client_software_name = name
            ctx.connection.client_software_version = version
            if ctx.api_version >= 5 and self._misrouted(req.cluster_id, req.node_id):
                ctx.log.info("misrouted connection", cluster_id=req.cluster_id, node_id=req.node_id)
                return {"error_code": int(ErrorCode.REBOOTSTRAP_REQUIRED), "api_keys": [],
                        "throttle_time_ms": 0}
            return {"error_code": 0, "api_keys": router.api_keys(), "throttle_time_ms": 0,
                    **self._features().api_versions_fields(ctx.api_version)}
        return {"error_code": 0, "api_keys": router.api_keys(), "throttle_time_ms": 0}

    HANDLERS = {API_VERSIONS: api_versions}
