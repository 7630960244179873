"""Handler modules, one per API family.

Each module exposes `HANDLERS = {api_key: async handler}` and optionally `VERSIONS = {api_key: (min, max)}`
to narrow the versions served below the schema's range, `ADVERTISED_MIN = {api_key: version}` for a minimum
ApiVersions lists below the one served (as Kafka lists Produce v0), and `UNSTABLE = {api_key: version}` for a version Kafka
marks latestVersionUnstable (served only with `unstable.api.versions.enable`, as Kafka's ApiVersions). List a new module in `MODULES`. Handlers reach the
broker's components through `ctx.broker` (typed attributes of `broker.app.Broker`), which has built them all
before the handlers are registered.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.router import Router

# module names under broker.handlers
MODULES: tuple[str, ...] = (
    "api_versions",
    "metadata",
    "cluster",
    "produce",
    "fetch",
    "list_offsets",
    "txn_markers",
    "describe_producers",
    "delete_records",
    "leader_epochs",
    "topic_admin",
    "configs",
    "producer_ids",
    "transactions",
    "share_groups",
    "groups",
    "consumer_groups",
    "offsets",
    "txn_offsets",
    "share_state",
    "share_fetch",
    "sasl",
    "scram_admin",
    "delegation_tokens",
    "acls",
    "telemetry",
    "client_quotas",
    "log_dirs",
    "elections",
    "quorum",
    "describe_topic_partitions",
    "alter_configs",
    "update_features",
)


def register_all(router: Router, modules: Iterable[str] = MODULES,
                 max_versions: Mapping[int, int] | None = None, unstable: bool = False) -> list[str]:
    """Import and register the handler modules (by default all of them); returns the modules registered.
    `max_versions` (api key -> max) narrows further: the versions a finalized feature gates (broker.features).
    Without `unstable`, a module's UNSTABLE versions are not served."""
    registered = []
    for name in modules:
        module = importlib.import_module(f"broker.handlers.{name}")
        limits = getattr(module, "VERSIONS", {})
        advertised = getattr(module, "ADVERTISED_MIN", {})
        caps: dict[int, int] = {}
        if not unstable:
            for api_key, first in getattr(module, "UNSTABLE", {}).items():
                caps[api_key] = min(caps.get(api_key, first - 1), first - 1)
        features = dict(max_versions or {})
        for api_key, handler in module.HANDLERS.items():
            lo, hi = limits.get(api_key, (None, None))
            if api_key in caps:
                hi = caps[api_key] if hi is None else min(hi, caps[api_key])
            # the ceiling a feature change may lift the served versions back to (UpdateFeatures)
            ceiling = hi
            if api_key in features:
                hi = features[api_key] if hi is None else min(hi, features[api_key])
            router.register(api_key, handler, lo, hi, ceiling=ceiling, advertised_min=advertised.get(api_key))
        registered.append(name)
    return registered
