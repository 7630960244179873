"""UpdateFeatures (57): change finalized feature levels (broker.features.FeatureControl).

Kafka forwards it from the broker listener to the controller, which checks ALTER on the cluster and answers as
QuorumController.updateFeatures: all updates or none; a failure is the top-level error with "The update failed
for all features since the following feature had an error: ..." and no per-feature results; on success v0-1
list each feature with no error and v2 only the top level. A request naming a feature twice keeps its last
update (Kafka builds a map). v0 has no upgrade type: AllowDowngrade picks SAFE_DOWNGRADE, else UPGRADE.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.features import SAFE_DOWNGRADE, UPGRADE, FeatureControl
from broker.handlers.apis import Apis, Request, Response
from broker.security.acl import AUTHORIZATION_ERRORS, CLUSTER_NAME, AclOperation, ResourceType

UPDATE_FEATURES = 57


class UpdateFeaturesApis(Apis):
    """UpdateFeatures, through the finalized features."""

    def __init__(self, features: FeatureControl) -> None:
        self._features = features

    async def update_features(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            denied, why = AUTHORIZATION_ERRORS[ResourceType.CLUSTER]
            return {"throttle_time_ms": 0, "error_code": denied, "error_message": why, "results": []}
        version = ctx.api_version
        updates: dict[str, tuple[int, int]] = {}
        for update in req.feature_updates:
            if version == 0:
                upgrade_type = SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE
            else:
                upgrade_type = update.upgrade_type
            updates[update.feature] = (update.max_version_level, upgrade_type)
        validate_only = req.validate_only if version >= 1 else False
        code, message = await self._features.update(updates, validate_only=validate_only)
        results = []
        if code == 0 and version <= 1:
            results = [{"feature": u.feature, "error_code": 0, "error_message": None} for u in req.feature_updates]
        return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message, "results": results}

    HANDLERS = {UPDATE_FEATURES: update_features}
