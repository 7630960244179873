"""Router per-request cost: `Router.handle` on in-memory frames with handlers that do nothing, so the figure is
the router's own work (header decode, body codecs, metrics).

    python -m bench.router_overhead [--against REV] [--requests N] [--rounds R]

Prints the best round's microseconds per request for three shapes: ApiVersions v3 (a real handler), a Metadata
v12 request answered with an empty body, and a Produce v9 answer with 10 partitions, 2 of them with an error code.
`--against REV` also loads `broker/router.py` as it was at git revision REV and alternates rounds of both routers
in this one process (the machine is shared: only same-run comparisons mean anything).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker.context import AllowAll, ConnectionInfo
from broker.features import Features
from broker.handlers.api_versions import ApiVersionsApis
from broker.node import Endpoints, Node
from broker.router import Router
from protocol.codec import request_codec
from protocol.framing import RequestHeader, encode_request

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18


def _frame(api_key: int, version: int, body: dict) -> bytes:
    payload = request_codec(api_key, version).encode(body)
    return encode_request(RequestHeader(api_key, version, 7, "bench"), payload)[4:]


async def _metadata(ctx, req) -> dict:
    return {"cluster_id": "bench", "controller_id": 1}


async def _produce(ctx, req) -> dict:
    parts = [{"index": i, "error_code": 0 if i % 5 else 6, "base_offset": 100, "log_append_time_ms": -1,
              "log_start_offset": 0} for i in range(10)]
    return {"responses": [{"name": "t", "partition_responses": parts}], "throttle_time_ms": 0}


CASES: dict[str, tuple[int, int, dict[str, Any]]] = {
    "ApiVersions v3": (API_VERSIONS, 3, {"client_software_name": "b", "client_software_version": "1"}),
    "Metadata v12 (empty answer)": (METADATA, 12, {"topics": []}),
    "Produce v9 answer, 10 partitions": (PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": []}),
}


def _router(cls: type) -> Router:
    # routers before issue 34 took the broker, later ones the authorizer
    router = cls(authorizer=AllowAll()) if "authorizer" in inspect.signature(cls).parameters else cls(broker=None)
    node = Node(1, "127.0.0.1", 9092)
    apis = ApiVersionsApis(router, lambda: Features(finalized={}, epoch=0), Endpoints("bench", 1, {}, node))
    router.register(API_VERSIONS, apis.api_versions)
    router.register(METADATA, _metadata)
    router.register(PRODUCE, _produce)
    return router


def _router_at(rev: str) -> type:
    """The Router class of broker/router.py at a git revision (its imports resolve against this checkout)."""
    source = subprocess.run(["git", "show", f"{rev}:broker/router.py"], check=True, capture_output=True).stdout
    path = Path(tempfile.mkdtemp()) / "router_at_rev.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("router_at_rev", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Router


async def _round(router: Router, frame: bytes, n: int) -> float:
    conn = ConnectionInfo()
    start = time.perf_counter()
    for _ in range(n):
        await router.handle(frame, conn)
    return (time.perf_counter() - start) / n * 1e6


async def main(n: int, rounds: int, against: str | None) -> None:
    routers = {"this checkout": _router(Router)}
    if against is not None:
        routers[against] = _router(_router_at(against))
    for name, (api_key, version, body) in CASES.items():
        frame = _frame(api_key, version, body)
        best = dict.fromkeys(routers, float("inf"))
        for _ in range(rounds):
            for label, router in routers.items():
                best[label] = min(best[label], await _round(router, frame, n))
        cells = "  ".join(f"{label} {us:6.2f} us" for label, us in best.items())
        delta = f"  delta {best['this checkout'] - best[against]:+.2f} us" if against is not None else ""
        print(f"{name:34s} {cells}{delta}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="compare with broker/router.py at this git revision")
    parser.add_argument("--requests", type=int, default=2000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.rounds, args.against))
