"""The Prometheus scrape endpoint: `GET /metrics` over HTTP/1.1, served by an asyncio server on the broker's loop.

Why not prometheus-client's `start_http_server` (a thread): the collectors walk live broker state (partition logs,
share-partitions, groups) that only the event loop mutates. Walked from another thread, a dict can change size
mid-iteration and a share-partition's counts can be read half-updated. Here the loop copies those numbers into
plain rows (one consistent view, no locks added to the hot path; about 1 ms per 1000 share-partitions), then a
worker thread builds the metric families from the rows and encodes the text, the costly part (see
bench/metrics_scrape.py). prometheus-client's own metrics (the router's counters and histograms, the watchdog's)
are thread-safe and read there directly. One request per connection (`Connection: close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

from broker.metrics.collectors import SNAPSHOTS, LoopStateCollector

log = structlog.get_logger(__name__)

MAX_HEADER_BYTES = 16_384
READ_TIMEOUT_S = 10.0
PATHS = ("/metrics", "/")


def _encode(encoder: Callable[[CollectorRegistry], bytes], registry: CollectorRegistry, compress: bool) -> bytes:
    body = encoder(registry)
    return gzip.compress(body) if compress else body


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, host: str, port: int,
                 loop_collectors: Sequence[LoopStateCollector] = ()) -> None:
        self._registry = registry
        self._loop_collectors = tuple(loop_collectors)  # registered in `registry`; read on the loop per scrape
        self.host = host
        self.port = port  # the bound port once started (port 0 binds an ephemeral one)
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port,
                                                  limit=MAX_HEADER_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("prometheus metrics endpoint listening", host=self.host or "*", port=self.port)
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._clients):
                task.cancel()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def render(self, accept: str = "", accept_encoding: str = "") -> tuple[bytes, list[tuple[str, str]]]:
        """(body, headers) for one scrape, content type negotiated as prometheus-client does."""
        encoder, content_type = choose_encoder(accept)
        compress = gzip_accepted(accept_encoding)
        token = SNAPSHOTS.set({id(c): c.read() for c in self._loop_collectors})  # on the loop
        try:
            body = await asyncio.to_thread(_encode, encoder, self._registry, compress)  # sees SNAPSHOTS
        finally:
            SNAPSHOTS.reset(token)
        headers = [("Content-Type", content_type)]
        if compress:
            headers.append(("Content-Encoding", "gzip"))
        return body, headers

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):  # not wait_for: it can lose a cancellation on 3.11
                status, headers, body = await self._answer(reader)
            head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
            head += [f"{name}: {value}" for name, value in headers]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # a client that left, stalled or sent garbage: nothing to answer
        except Exception:  # noqa: BLE001 - a failed scrape must not take the endpoint down
            log.exception("metrics scrape failed")
        finally:
            if task is not None:
                self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[str, list[tuple[str, str]], bytes]:
        request_line = (await reader.readuntil(b"\r\n")).decode("latin-1").strip()
        headers: dict[str, str] = {}
        while True:
            line = (await reader.readuntil(b"\r\n")).decode("latin-1").strip()
            if not line:
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return "400 Bad Request", [("Content-Type", "text/plain")], b"bad request\n"
        method, target = parts[0], parts[1]
        if urlsplit(target).path not in PATHS:
            return "404 Not Found", [("Content-Type", "text/plain")], b"not found: try /metrics\n"
        if method != "GET":
            return "405 Method Not Allowed", [("Allow", "GET"), ("Content-Type", "text/plain")], b""
        body, out_headers = await self.render(headers.get("accept", ""), headers.get("accept-encoding", ""))
        return "200 OK", out_headers, body
