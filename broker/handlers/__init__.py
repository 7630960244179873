"""Handler modules, one per API family, each with one API object class (Kafka's KafkaApis, split by family).

An API class (`broker.handlers.apis.Apis`) takes the components its handlers use in its constructor, serves
its APIs with methods `async def x(self, ctx: RequestContext, req: Request) -> Response`, lists them by api
key in `HANDLERS`, and may narrow the versions served (`VERSIONS`, `ADVERTISED_MIN`, `UNSTABLE`: see apis.py).
`broker/app.py` (`Broker._build_apis`) builds one object per class once every component is built, and
`register_all` registers their bound methods with the router. List a new module in `MODULES` (the broker
refuses to start if one of their classes is not built)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from broker.handlers.apis import Apis

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
    "streams_groups",
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


def register_all(router: Router, apis: Iterable[Apis], max_versions: Mapping[int, int] | None = None,
                 unstable: bool = False) -> list[str]:
    """Register the handlers of the API objects (`broker/app.py` builds them); returns their class names.
    `max_versions` (api key -> max) narrows further: the versions a finalized feature gates (broker.features).
    Without `unstable`, an object's UNSTABLE versions are not served."""
    registered = []
    features = dict(max_versions or {})
    for api in apis:
        caps: dict[int, int] = {}
        if not unstable:
            for api_key, first in api.UNSTABLE.items():
                caps[api_key] = min(caps.get(api_key, first - 1), first - 1)
        for api_key, handler in api.handlers().items():
            lo, hi = api.VERSIONS.get(api_key, (None, None))
            if api_key in caps:
                hi = caps[api_key] if hi is None else min(hi, caps[api_key])
            # the ceiling a feature change may lift the served versions back to (UpdateFeatures)
            ceiling = hi
            if api_key in features:
                hi = features[api_key] if hi is None else min(hi, features[api_key])
            router.register(api_key, handler, lo, hi, ceiling=ceiling,
                            advertised_min=api.ADVERTISED_MIN.get(api_key))
        registered.append(type(api).__name__)
    return registered


def api_classes(modules: Iterable[str] = MODULES) -> list[type[Apis]]:
    """The API classes of the handler modules (one each), for what needs their api keys and versions without a
    built broker (tests, the fuzz corpus)."""
    found = []
    for name in modules:
        module = importlib.import_module(f"broker.handlers.{name}")
        found += [cls for cls in vars(module).values()
                  if isinstance(cls, type) and issubclass(cls, Apis) and cls is not Apis
                  and cls.__module__ == module.__name__]
    return found


def served_api_keys(modules: Iterable[str] = MODULES) -> dict[int, str]:
    """api key -> the name of the API class serving it."""
    return {api_key: cls.__name__ for cls in api_classes(modules) for api_key in cls.HANDLERS}
