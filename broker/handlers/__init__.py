"""Handler modules, one per API family.

Each module exposes `HANDLERS = {api_key: async handler}` and optionally `VERSIONS = {api_key: (min, max)}`
to narrow the versions served below the schema's range. List a new module in `MODULES` with the broker
components it needs; a module whose components are absent is skipped with a warning, so its APIs are not
advertised in ApiVersions.
"""

from __future__ import annotations

import importlib

import structlog

log = structlog.get_logger(__name__)

# module name (under broker.handlers) -> Broker attributes it needs
MODULES: dict[str, tuple[str, ...]] = {
    "api_versions": (),
    "metadata": ("topics", "node"),
    "cluster": ("node",),
    "produce": ("topics", "replicas"),
    "fetch": ("topics", "replicas"),
    "list_offsets": ("topics", "replicas"),
    "txn_markers": ("topics", "replicas"),
    "describe_producers": ("topics", "replicas"),
    "topic_admin": ("topics",),
    "configs": ("configs",),
    "producer_ids": ("producer_ids",),
    "share_groups": ("group_coordinator",),
    "groups": ("group_coordinator",),
    "consumer_groups": ("group_coordinator",),
    "offsets": ("group_coordinator",),
    "share_state": ("share_state",),
    "share_fetch": ("topics", "replicas", "share_partitions"),
    "sasl": (),
    "scram_admin": ("security",),
    "acls": ("security",),
}


def register_all(router, broker, modules: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Import and register every handler module whose components exist; returns the modules registered."""
    registered = []
    for name, needs in (MODULES if modules is None else modules).items():
        missing = [attr for attr in needs if getattr(broker, attr, None) is None]
        if missing:
            log.warning("handler module skipped: components missing", module=name, missing=missing)
            continue
        module = importlib.import_module(f"broker.handlers.{name}")
        limits = getattr(module, "VERSIONS", {})
        for api_key, handler in module.HANDLERS.items():
            lo, hi = limits.get(api_key, (None, None))
            router.register(api_key, handler, lo, hi)
        registered.append(name)
    return registered
