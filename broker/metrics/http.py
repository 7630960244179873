"""The metrics listener: `GET /metrics` (Prometheus) and, when a console is given, the share-group console and its
JSON API, served by aiohttp on the broker's event loop.

Why on the loop and not prometheus-client's `start_http_server` (a thread): the collectors walk live broker state
(partition logs, share-partitions, groups) that only the event loop mutates. Walked from another thread, a dict can
change size mid-iteration and a share-partition's counts can be read half-updated. Here the loop copies those
numbers into plain rows (one consistent view, no locks added to the hot path; about 1 ms per 1000
share-partitions), then a worker thread builds the metric families from the rows and encodes the text, the costly
part (see bench/metrics_scrape.py). prometheus-client's own metrics (the router's counters and histograms, the
watchdog's) are thread-safe and read there directly.

The listener has no authentication and no TLS: anyone who can reach its address can read it, so it must stay on
loopback or behind a reverse proxy. What one client can cost the broker is bounded: aiohttp's C parser caps the
request line, each header and the header count, a whole request head is at most `MAX_HEAD_BYTES` (the connection
is cut beyond), the listener only serves GET and HEAD and never reads a body, at most `MAX_CONNECTIONS`
connections are open (others wait in the kernel's backlog), a connection without a whole request head within
`IDLE_TIMEOUT_S` is closed (slowloris), and a connection older than `MAX_CONNECTION_AGE_S` is closed after its
current response (a client that never reads its responses cannot hold a slot for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, cast

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

from broker.metrics.collectors import SNAPSHOTS, LoopStateCollector

if TYPE_CHECKING:
    from broker.console.service import Console

log = structlog.get_logger(__name__)

MAX_CONNECTIONS = 32
MAX_LINE_BYTES = 8190  # request line (aiohttp's default)
MAX_FIELD_BYTES = 8190  # one header, name and value
MAX_HEADERS = 32
MAX_HEAD_BYTES = 64 * 1024  # a whole request head (aiohttp bounds each line and the count, not their sum)
IDLE_TIMEOUT_S = 10.0  # no whole request head within this: closed (at connection start and between requests)
MAX_CONNECTION_AGE_S = 60.0  # then `Connection: close` on the next response
HARD_CONNECTION_AGE_S = 120.0  # then closed whatever it is doing (a client not reading its response)
ALLOWED_METHODS = ("GET", "HEAD")
BACKLOG = 16

# aiohttp logs every malformed request with a traceback: a client sending garbage would make the broker write
# logs as fast as it sends. Those are the client's errors, answered with a 400 and not logged.
_QUIET = logging.getLogger("shoal.metrics.http.aiohttp")
_QUIET.propagate = False
_QUIET.setLevel(logging.CRITICAL)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _encode(encoder: Callable[[CollectorRegistry], bytes], registry: CollectorRegistry, compress: bool) -> bytes:
    body = encoder(registry)
    return gzip.compress(body) if compress else body


class _Tracked(asyncio.Protocol):
    """aiohttp's connection handler, counted in `opened` while connected and closed at `HARD_CONNECTION_AGE_S`
    whatever it is doing (aiohttp has no limit of its own on connections nor on a connection's life)."""

    def __init__(self, inner: RequestHandler, opened: dict[RequestHandler, float],
                 on_closed: Callable[[], None]) -> None:
        self.inner = inner
        self._opened = opened
        self._on_closed = on_closed
        self._timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._head = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # a stream server's connection
        loop = asyncio.get_running_loop()
        self._opened[self.inner] = loop.time()
        self._timer = loop.call_later(HARD_CONNECTION_AGE_S, self.inner.force_close)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        # Bytes since the end of the last request head ("\r\n\r\n"; no request here has a body). aiohttp answers a
        # head with too many or too long headers with a 400, but keeps reading what the client sends until that
        # answer is written: a client streaming header lines is cut off here at once instead.
        first = data.find(b"\r\n\r\n")  # where the head in progress ends, if it does in this chunk
        if self._head + (first + 4 if first >= 0 else len(data)) > MAX_HEAD_BYTES:
            if self._transport is not None:  # always: data comes after connection_made
                self._transport.abort()
            return
        self._head = len(data) - data.rfind(b"\r\n\r\n") - 4 if first >= 0 else self._head + len(data)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        self.inner.eof_received()
        return None  # as aiohttp's handler: the transport closes itself

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._opened.pop(self.inner, None)
        self.inner.connection_lost(exc)
        self._on_closed()


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, host: str, port: int,
                 loop_collectors: Sequence[LoopStateCollector] = (), console: Console | None = None) -> None:
        self._registry = registry
        self._loop_collectors = tuple(loop_collectors)  # registered in `registry`; read on the loop per scrape
        self._console = console
        self.host = host
        self.port = port  # the bound port once started (port 0 binds an ephemeral one)
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading = False
        self._opened: dict[RequestHandler, float] = {}  # connected handlers -> loop time they connected
        self._connecting = 0  # accepted, transport not made yet
        self._tasks: set[asyncio.Task] = set()

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=1024)
        app.router.add_get("/metrics", self._metrics)
        if self._console is not None:
            self._console.add_routes(app.router)
        else:
            app.router.add_get("/", self._metrics)
        return app

    async def start(self) -> int:
        runner = self._runner = web.AppRunner(
            self._app(), handle_signals=False, access_log=None, keepalive_timeout=IDLE_TIMEOUT_S,
            max_line_size=MAX_LINE_BYTES, max_field_size=MAX_FIELD_BYTES, max_headers=MAX_HEADERS,
            lingering_time=0, shutdown_timeout=1.0, logger=_QUIET)
        await runner.setup()
        host = self.host or None
        family = socket.AF_INET6 if host and ":" in host else socket.AF_INET
        sock = self._sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host or "", self.port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self._loop = asyncio.get_running_loop()
        self._accepting(True)
        log.info("metrics listener started", host=self.host or "*", port=self.port,
                 console=self._console is not None)
        return self.port

    def _accepting(self, on: bool) -> None:
        """Accept while fewer than MAX_CONNECTIONS are open; beyond that new connections wait in the kernel's
        backlog (then are dropped by it) instead of being accepted and closed in a loop a client can spin."""
        if on == self._reading or self._sock is None or self._loop is None:
            return
        self._reading = on
        if on:
            self._loop.add_reader(self._sock.fileno(), self._accept)
        else:
            self._loop.remove_reader(self._sock.fileno())

    def _accept(self) -> None:
        assert self._sock is not None and self._loop is not None and self._runner is not None
        server = self._runner.server
        assert server is not None
        while len(self._opened) + self._connecting < MAX_CONNECTIONS:
            try:
                conn, _addr = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:  # EMFILE and the like: pause a second rather than spin on a readable socket
                log.warning("metrics listener accept failed; retrying in 1 s", error=repr(err))
                self._accepting(False)
                self._loop.call_later(1.0, self._closed)
                return
            conn.setblocking(False)
            self._connecting += 1
            task = self._loop.create_task(self._connect(conn, _Tracked(server(), self._opened, self._closed)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._accepting(False)

    async def _connect(self, conn: socket.socket, protocol: _Tracked) -> None:
        try:
            await self._loop.connect_accepted_socket(lambda: protocol, conn)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - the client left before its transport was made
            conn.close()
        finally:
            self._connecting -= 1
            self._closed()

    def _closed(self) -> None:
        if len(self._opened) + self._connecting < MAX_CONNECTIONS:
            self._accepting(True)

    async def close(self) -> None:
        self._accepting(False)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        for task in list(self._tasks):
            task.cancel()
        for handler in list(self._opened):
            handler.force_close()
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Read-only: GET and HEAD without a body; older connections are asked to reconnect."""
        if request.method not in ALLOWED_METHODS:
            response: web.StreamResponse = web.Response(status=405, headers={"Allow": ", ".join(ALLOWED_METHODS)})
            response.force_close()  # its body, if any, is never read
            return response
        if request.body_exists:
            response = web.Response(status=413, text="request bodies are not accepted\n")
            response.force_close()
            return response
        try:
            response = await handler(request)
        except web.HTTPException:
            raise
        except Exception:  # aiohttp answers 500; its own log of it is silenced (_QUIET), so it is logged here
            log.exception("metrics listener request failed", path=request.path)
            raise
        opened = self._opened.get(request.protocol)
        if opened is None or asyncio.get_running_loop().time() - opened > MAX_CONNECTION_AGE_S:
            response.force_close()
        return response

    async def _metrics(self, request: web.Request) -> web.Response:
        body, headers = await self.render(request.headers.get("Accept", ""),
                                          request.headers.get("Accept-Encoding", ""))
        return web.Response(body=body, headers=headers)

    async def render(self, accept: str = "", accept_encoding: str = "") -> tuple[bytes, dict[str, str]]:
        """(body, headers) for one scrape, content type negotiated as prometheus-client does."""
        encoder, content_type = choose_encoder(accept)
        compress = gzip_accepted(accept_encoding)
        started = time.monotonic()
        token = SNAPSHOTS.set({id(c): c.read() for c in self._loop_collectors})  # on the loop
        try:
            body = await asyncio.to_thread(_encode, encoder, self._registry, compress)  # sees SNAPSHOTS
        finally:
            SNAPSHOTS.reset(token)
        headers = {"Content-Type": content_type}
        if compress:
            headers["Content-Encoding"] = "gzip"
        log.debug("metrics scraped", seconds=round(time.monotonic() - started, 4), bytes=len(body))
        return body, headers
