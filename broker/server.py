"""TCP listeners and connections: manual framing on `asyncio.Protocol`, pipelined in-order responses.

Each complete frame becomes a task running `router.handle`; its future joins the connection's ordered queue,
and responses are written as soon as they and every earlier one are done, so handlers run concurrently while
clients see Kafka's per-connection ordering. A request with no response (Produce acks=0) still holds its
place in the queue. Reading pauses when `queued.max.requests` are in flight or the transport's write buffer is
above its high-water mark. A bad size prefix, malformed header or any router-level failure closes only that
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from broker.context import ConnectionInfo
from broker.router import CloseConnection

log = structlog.get_logger(__name__)

_SIZE = struct.Struct(">i")
Dispatch = Callable[[Any, ConnectionInfo], Any]  # coroutine function: (frame, connection) -> bytes | None


def _address(sockname: Any) -> str:
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        host, port = sockname[0], sockname[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(sockname)


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: Server, listener: str) -> None:
        self._server = server
        self._dispatch = server.dispatch
        self._max_frame = server.max_request_bytes
        self._max_inflight = server.max_inflight
        self._buf = bytearray()
        self._pending: deque[asyncio.Future] = deque()
        self._transport: asyncio.Transport | None = None
        self._closing = False
        self._read_paused = False
        self._write_paused = False
        self._close_after_flush = False
        self.info = ConnectionInfo(listener=listener)

    # --- transport callbacks -------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self.info.peer = _address(transport.get_extra_info("peername"))
        self.info.local = _address(transport.get_extra_info("sockname"))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._server.connections.add(self)
        log.debug("connection opened", conn=self.info.id, peer=self.info.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._server.connections.discard(self)
        for fut in self._pending:
            fut.cancel()
        self._pending.clear()
        self._buf = bytearray()
        log.debug("connection closed", conn=self.info.id, peer=self.info.peer, error=str(exc) if exc else None)
        for listener in list(self._server.close_listeners):
            try:
                listener(self.info)
            except Exception:  # noqa: BLE001 - one listener's failure must not skip the others
                log.exception("connection close listener failed", conn=self.info.id)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        if self._buf:
            self._buf += data
            source: bytes | bytearray = self._buf
        else:
            source = data  # common case: parse straight from the received bytes (immutable, so views are safe)
        view = memoryview(source)
        end = len(source)
        pos = 0
        frames = []
        handed_over = False
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(source, pos)
            if size < 0 or size > self._max_frame:
                view.release()
                self._bad_frame_size(size)
                return
            if end - pos - 4 < size:
                break
            if source is self._buf and pos == 0 and size + 4 == end:
                # The buffer holds exactly one frame (typical for large requests): hand it over, no copy.
                frames.append(view[4:])
                handed_over = True
                pos = end
                break
            if source is self._buf:
                frames.append(bytes(view[pos + 4:pos + 4 + size]))
            else:
                frames.append(view[pos + 4:pos + 4 + size])
            pos += 4 + size
        if handed_over:
            self._buf = bytearray()
        elif source is self._buf:
            view.release()
            if pos:
                del self._buf[:pos]
        elif pos < end:
            self._buf += view[pos:]
        for frame in frames:
            self._submit(frame)

    def eof_received(self) -> bool | None:
        # The client half-closed: still answer what is in flight, then close.
        if not self._pending:
            return None
        self._close_after_flush = True
        return True

    # --- requests ------------------------------------------------------------------------------------------
    def _submit(self, frame: bytes | memoryview) -> None:
        if self._closing:
            return
        task = asyncio.ensure_future(self._dispatch(frame, self.info))
        self._pending.append(task)
        task.add_done_callback(self._on_done)
        self._update_reading()

    def _on_done(self, _fut: asyncio.Future) -> None:
        pending = self._pending
        transport = self._transport
        out: list = []
        while pending and pending[0].done():
            fut = pending.popleft()
            if fut.cancelled() or self._closing or transport is None:
                continue
            err = fut.exception()
            if err is not None:
                if not isinstance(err, CloseConnection):
                    log.error("request failed outside its handler, closing connection", conn=self.info.id,
                              peer=self.info.peer, exc_info=err)
                if out:
                    transport.writelines(out)
                self.close()
                return
            response = fut.result()
            if response is None:
                continue
            if isinstance(response, list):
                out.extend(response)
            else:
                out.append(response)
        if out and transport is not None and not self._closing:
            if len(out) == 1:
                transport.write(out[0])
            else:
                transport.writelines(out)
        self._update_reading()
        if not pending and self._close_after_flush:
            self.close()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closing:
            return
        should_pause = self._write_paused or len(self._pending) >= self._max_inflight
        if should_pause and not self._read_paused:
            self._read_paused = True
            transport.pause_reading()
        elif not should_pause and self._read_paused:
            self._read_paused = False
            transport.resume_reading()

    def _bad_frame_size(self, size: int) -> None:
        log.warning("invalid request size, closing connection", conn=self.info.id, peer=self.info.peer, size=size,
                    max_size=self._max_frame)
        self.close()

    def close(self) -> None:
        self._closing = True
        self._buf = bytearray()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.abort()


class Server:
    """All listeners of the broker; `start()` binds them, `close()` stops accepting and drops connections."""

    def __init__(self, dispatch: Dispatch, *, max_request_bytes: int = 104_857_600, max_inflight: int = 100,
                 backlog: int = 1024) -> None:
        self.dispatch = dispatch
        self.max_request_bytes = max_request_bytes
        self.max_inflight = max_inflight
        self.backlog = backlog
        self.connections: set[KafkaConnection] = set()
        # fn(ConnectionInfo) after a connection closed (share sessions are tied to their connection).
        self.close_listeners: list[Callable[[ConnectionInfo], None]] = []
        self._servers: list[asyncio.AbstractServer] = []
        self.bound: list[tuple[str, str, int]] = []  # (listener name, host, port) after start()

    async def start(self, listeners: list[Any]) -> list[tuple[str, str, int]]:
        loop = asyncio.get_running_loop()
        for listener in listeners:
            host = listener.host or None  # empty host = all interfaces
            srv = await loop.create_server(lambda name=listener.name: KafkaConnection(self, name), host,
                                           listener.port, backlog=self.backlog, reuse_address=True)
            self._servers.append(srv)
            port = srv.sockets[0].getsockname()[1]
            self.bound.append((listener.name, listener.host, port))
            log.info("listening", host=listener.host or "0.0.0.0", port=port, listener=listener.name)
        return self.bound

    async def close(self, grace_s: float = 2.0) -> None:
        for srv in self._servers:
            srv.close()
        for conn in list(self.connections):
            conn.close()
        for srv in self._servers:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(srv.wait_closed(), grace_s)
        for conn in list(self.connections):
            conn.abort()
        self._servers.clear()
