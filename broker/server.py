"""TCP listeners and connections: manual framing on `asyncio.Protocol`, pipelined in-order responses.

Each request frame becomes a task running `router.handle`; its future joins the connection's ordered queue,
and responses are written as soon as they and every earlier one are done, so handlers run concurrently while
clients see Kafka's per-connection ordering. A request with no response (Produce acks=0) still holds its
place in the queue. A bad size prefix, malformed header or any router-level failure closes only that
connection; so does the client's end of stream (as in Kafka; requests still in flight are cancelled).

Memory per connection is bounded. Received frames stay in the connection's buffer until they may be
dispatched: while fewer than `queued.max.requests` are in flight, while the response bytes not yet sent (the
transport's write buffer plus finished responses waiting behind an earlier one) stay under
`connections.max.unsent.bytes`, and, for the APIs whose responses can be large (Fetch, ShareFetch), while no
other such request of the connection is in flight, as real clients never pipeline them. Frames are dispatched
one per loop iteration, so a handler that finishes at once has its response counted before the next request
starts; pipelined Produce requests (small responses) are dispatched together, so they share one fsync. Reading
pauses while the write buffer is above its high-water mark, so a client that never reads its responses holds at
most about one response and one request, and while more than 64 KiB of whole frames wait in the buffer: below
that the connection keeps reading behind a request that waits (a long poll), so the client's end of stream, its
next small requests and its activity are still seen.

Quotas hold whatever a client pipelines, as Kafka's network layer does by reading one request per connection at a
time. Each frame is admitted as it is dispatched, before the connection's next one is looked at (`Server.admit`,
the router's quota admission): a request it holds is answered before anything more of the connection is
dispatched (a Produce over its byte rate; any request of a client under a request quota, charged once it has run).
A throttled answer mutes the connection for the throttle time (`mute_for`: nothing read or dispatched); Fetch and
ShareFetch, one at a time, are throttled before they are answered.

Accepting follows Kafka's connection quotas (`broker.connection_quotas`), and connections that receive and
send nothing for `connections.max.idle.ms` are dropped (also those stuck in the middle of a frame, or closing
towards a client that reads nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import struct
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import structlog

from broker.config.components import ComponentConfig, setting
from broker.connection_quotas import ConnectionQuotas, normalize_ip
from broker.context import Admission, ConnectionInfo
from broker.request_memory import RequestMemoryPool, give_back_memory
from broker.router import CloseConnection
from broker.security.listener import ListenerSecurity
from protocol.errors import ErrorCode
from protocol.framing import FrameSizeError, FrameSplitter, lone_frame_size

log = structlog.get_logger(__name__)

# Bytes read on behind a request that may not be dispatched yet (a second Fetch behind a waiting long poll):
# enough for a client's next small requests and its end of stream to be seen, bounded per connection.
READ_AHEAD_BYTES = 64 * 1024
_API_KEY = struct.Struct(">h")
PRODUCE = 0
Dispatch = Callable[..., Any]  # coroutine function: (frame, connection[, admission]) -> bytes | None
# fn(frame, connection) -> Admission | None, called as a frame is dispatched, before the connection's next is looked at
Admit = Callable[[Any, ConnectionInfo], Admission | None]


def _address(sockname: Any) -> str:
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        host, port = sockname[0], sockname[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(sockname)


def _size(response: Any) -> int:
    return sum(len(r) for r in response) if isinstance(response, list) else len(response)


_PLAINTEXT = ListenerSecurity()


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: Server, listener: str, peer_ip: str | None = None) -> None:
        self._server = server
        self._security = server.listener_security.get(listener, _PLAINTEXT)
        self._sasl: Any = None  # the SASL authenticator on SASL listeners
        self._auth_failed = False  # a failed authentication: nothing more is read, the connection closes
        self._dispatch = server.dispatch
        self._admit = server.admit
        self._max_frame = server.config.max_request_bytes
        self._max_inflight = server.config.max_inflight
        self._max_unsent = server.config.max_unsent_bytes
        self._serial_apis = server.serial_api_keys
        self.peer_ip = peer_ip  # counted in the server's connection quotas until the connection is lost
        self._buf = FrameSplitter()  # received, not yet dispatched: whole frames and at most one partial frame
        self._charged = 0  # bytes charged to the server's request memory pool (broker.request_memory)
        self._granted = False  # the partial frame in the buffer holds a reservation for its whole declared size
        self._pending: deque[asyncio.Future] = deque()  # dispatched requests, answered in this order
        self._held = 0  # bytes of finished responses not yet handed to the transport
        self._serial_inflight = 0  # in-flight requests of the large-response APIs
        self._holding = False  # a request admitted with `hold` is in flight: nothing more is dispatched until it ends
        self._pump_handle: asyncio.Handle | None = None
        self._transport: asyncio.Transport | None = None
        self._closing = False
        self._read_paused = False
        self._write_paused = False
        self.last_active = time.monotonic()
        self.write_buffer_seen = 0  # write buffer size at the idle sweep (a draining buffer is activity)
        self.info = ConnectionInfo(listener=listener)
        self.info.mute_for = self.mute_for
        self._unmute_handle: asyncio.TimerHandle | None = None  # set while muted by a quota throttle

    # --- transport callbacks -------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        stream = cast(asyncio.Transport, transport)  # a stream server's connection
        self._transport = stream
        peername = transport.get_extra_info("peername")
        self.info.peer = _address(peername)
        if isinstance(peername, tuple) and peername:
            self.info.host = str(peername[0])
        self.info.local = _address(transport.get_extra_info("sockname"))
        # pause_writing() above the bound; resume_writing() once the client has read most of it.
        stream.set_write_buffer_limits(high=self._max_unsent, low=self._max_unsent // 4)
        security = self._security
        if security.certificate_principal is not None:  # the TLS handshake is done when connection_made runs
            self.info.principal = security.certificate_principal(transport.get_extra_info("peercert"))
        if security.authenticator is not None:
            self._sasl = security.authenticator(self.info)
        self._server.connection_opened(self)
        if self._server.request_memory.muting:
            # A new connection needs memory too: not read until there is room. The transport starts reading after
            # connection_made returns (whatever is asked here), so it is paused from the loop's next turn.
            asyncio.get_running_loop().call_soon(self._mute_new)
        log.debug("connection opened", conn=self.info.id, peer=self.info.peer)

    def _mute_new(self) -> None:
        self._read_paused = False  # the transport reads on its own after connection_made, whatever we asked
        self._update_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._cancel_pump()
        if self._unmute_handle is not None:
            self._unmute_handle.cancel()
            self._unmute_handle = None
        self._server.connection_closed(self)
        for fut in self._pending:
            fut.cancel()  # finished ones are unaffected; their own _on_done retrieved their outcome
        self._pending.clear()
        self._buf.clear()
        self._granted = False
        self._server.memory_muted.discard(self)
        if self._charged:
            charged, self._charged = self._charged, 0
            self._server.request_memory_charged(charged, 0)
        self._held = 0
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
        if self._closing:
            return
        self._server.touch(self)
        if self._pump_handle is None:
            self._pump()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._server.touch(self)
        # Common case: exactly one whole request; dispatch straight from the received bytes (immutable, so views
        # are safe), no copy.
        if (not self._buf.buffer and self._pump_handle is None and len(data) >= 6
                and lone_frame_size(data, self._frame_limit()) is not None):
            api_key = _API_KEY.unpack_from(data, 4)[0]
            if self._may_dispatch(api_key):
                self._submit(memoryview(data)[4:], api_key)
                self._update_reading()
                return
        self._buf.feed(data)
        if self._pump_handle is None:
            self._pump()
        else:  # a pump is already due this iteration: one frame per iteration, one chain of pumps
            self._update_reading()

    def eof_received(self) -> bool | None:
        # The client closed its side. As Kafka, close the connection: requests in flight are cancelled (their
        # answers would be dropped anyway), so a long poll with a huge MaxWaitMs cannot outlive its client.
        return None

    # --- quota throttling (KIP-219) ------------------------------------------------------------------------
    def mute_for(self, seconds: float) -> None:
        """Stop reading and dispatching this connection's requests for `seconds` (a client over its quota: the
        broker answers at once with the throttle time and mutes the channel, as Kafka's SocketServer does). A
        longer throttle extends the mute; a shorter one inside it changes nothing."""
        if seconds <= 0 or self._closing:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        handle = self._unmute_handle
        if handle is not None:
            if handle.when() >= until:
                return
            handle.cancel()
        self._unmute_handle = loop.call_at(until, self._unmute)
        self._update_reading()

    @property
    def muted(self) -> bool:
        return self._unmute_handle is not None

    def _unmute(self) -> None:
        self._unmute_handle = None
        if self._closing:
            return
        if self._pump_handle is None:
            self._pump()  # dispatches what arrived meanwhile, and resumes reading
        else:
            self._update_reading()

    # --- dispatching ---------------------------------------------------------------------------------------
    def _unsent(self) -> int:
        transport = self._transport
        return self._held + (transport.get_write_buffer_size() if transport is not None else 0)

    def _may_dispatch(self, api_key: int) -> bool:
        if (len(self._pending) >= self._max_inflight or self._write_paused or self._unmute_handle is not None
                or self._holding):
            return False
        if self._held and self._unsent() >= self._max_unsent:
            return False
        return not (self._serial_inflight and api_key in self._serial_apis)

    def _pump(self) -> None:
        """Dispatch the first buffered frame if the bounds allow, and come back next loop iteration for more
        (pipelined Produce frames all at once)."""
        self._pump_handle = None
        if self._closing:
            return
        frames = self._buf
        while True:
            try:
                size = frames.frame_size(self._frame_limit())
            except FrameSizeError as err:
                self._bad_frame_size(err.size, err.max_size)
                return
            if size is None:
                break
            if size < 2:
                self._submit(frames.pop(size), -1)  # too short for a header: the router says so
                break
            api_key = _API_KEY.unpack_from(frames.buffer, 4)[0]
            if not self._may_dispatch(api_key):
                break
            self._submit(frames.pop(size), api_key)  # the whole buffer when it is all one frame: no copy
            if api_key != PRODUCE or self._closing:
                if frames.has_frame():
                    self._pump_handle = asyncio.get_running_loop().call_soon(self._pump)
                break
            # Pipelined Produce requests go out together: one frame per loop iteration capped a connection at one
            # request per iteration (a client with unbounded in flight, librdkafka's default, fell further behind
            # the busier the loop got), and their appends now all precede the flush they share. Their responses
            # are small, so the unsent bound needs no look at them first.
        self._update_reading()

    def _cancel_pump(self) -> None:
        if self._pump_handle is not None:
            self._pump_handle.cancel()
            self._pump_handle = None

    def _frame_limit(self) -> int:
        sasl = self._sasl
        if sasl is None or sasl.authenticated:
            return self._max_frame
        return min(self._max_frame, self._security.max_unauthenticated_frame)

    def _submit(self, frame: bytes | memoryview, api_key: int) -> None:
        if self._auth_failed:
            return
        if self._sasl is not None:
            step = self._sasl.receive(frame)
            if step is not None and not step.dispatch:
                if step.kafka_request:  # answered or refused by the authenticator: counted as the router would
                    self._server.refused(api_key if len(frame) >= 2 else None, step.error or None)
                self._sasl_step(step)
                return
        admitted = None
        if self._admit is not None:
            # Now, before the next frame is looked at: a hold keeps the frames behind this one buffered until it is
            # answered (and its throttle, if any, has muted the connection), however many the client pipelined.
            try:
                admitted = self._admit(frame, self.info)
            except Exception:  # noqa: BLE001 - a failure must not escape into the transport's callback
                log.exception("request admission failed, closing connection", conn=self.info.id, peer=self.info.peer)
                self.close()
                return
            if admitted is not None and admitted.hold:
                self._holding = True
        serial = api_key in self._serial_apis
        if serial:
            self._serial_inflight += 1
        task = asyncio.ensure_future(self._run(frame, serial, admitted))
        self._pending.append(task)
        task.add_done_callback(self._on_done)

    def _sasl_step(self, step) -> None:
        """Queue an authenticator's answer in request order; a failed authentication stops reading, and its
        answer goes out after the failed-authentication delay, then the connection closes (as Kafka)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append(fut)
        fut.add_done_callback(self._on_done)
        if self._sasl.authenticated:
            self.info.principal = self._sasl.principal
            self.info.token_authenticated = self._sasl.token_authenticated
        if step.close:
            fut.set_exception(CloseConnection("SASL state"))
        elif step.fail:
            self._auth_failed = True
            self._buf.clear()
            loop.call_later(self._security.failed_authentication_delay_s, _fail, fut, step.response)
        else:
            if step.response is not None:
                self._held += len(step.response)
            fut.set_result(step.response)

    async def _run(self, frame: bytes | memoryview, serial: bool, admitted: Admission | None) -> Any:
        try:
            if admitted is None:
                response = await self._dispatch(frame, self.info)
            else:
                response = await self._dispatch(frame, self.info, admitted)
        finally:
            if serial:
                self._serial_inflight -= 1
            if admitted is not None and admitted.hold:
                self._holding = False
        if response is not None and not self._closing:
            self._held += _size(response)  # counted as unsent until written (see _may_dispatch)
        return response

    def _on_done(self, fut: asyncio.Future) -> None:
        # Every task's outcome is retrieved here, so asyncio never reports an exception as never retrieved.
        failure = None if fut.cancelled() else fut.exception()
        if self._closing:
            if failure is not None and not isinstance(failure, CloseConnection):
                log.warning("request failed after its connection closed", conn=self.info.id, peer=self.info.peer,
                            error=repr(failure))
            return
        pending = self._pending
        transport = self._transport
        out: list = []
        while pending and pending[0].done():
            head = pending.popleft()
            if head.cancelled():
                continue
            err = head.exception()
            if err is not None:
                if not isinstance(err, CloseConnection):
                    log.error("request failed outside its handler, closing connection", conn=self.info.id,
                              peer=self.info.peer, exc_info=err)
                elif err.response is not None:
                    out.append(err.response)  # the last answer before closing (a failed authentication)
                if out and transport is not None:
                    transport.writelines(out)
                self.close()
                return
            response = head.result()
            if response is None:
                continue
            self._held -= _size(response)
            if isinstance(response, list):
                out.extend(response)
            else:
                out.append(response)
        if out and transport is not None:
            if len(out) == 1:
                transport.write(out[0])
            else:
                transport.writelines(out)
            self._server.touch(self)
        if self._pump_handle is None and self._buf.buffer:
            self._pump()
        else:
            self._update_reading()

    def _recharge(self) -> None:
        """Charge the request memory pool for what the buffer holds, and for the rest of a partial frame once
        that frame got a reservation (granted while the pool is not exhausted)."""
        buf = self._buf
        held = len(buf.buffer)
        missing = buf.missing() if held else 0
        if missing:
            if not self._granted and not self._server.request_memory.muting:
                self._granted = True
            if self._granted:
                held += min(missing, self._max_frame + 4)
        else:
            self._granted = False
        if held != self._charged:
            charged, self._charged = self._charged, held
            self._server.request_memory_charged(charged, held)

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closing:
            return
        self._recharge()
        memory_muted = self._server.request_memory.muting and not self._granted
        should_pause = (self._write_paused or self._auth_failed or memory_muted or self._unmute_handle is not None
                        or (len(self._buf.buffer) >= READ_AHEAD_BYTES and self._buf.has_frame()))
        if memory_muted:
            self._server.memory_muted.add(self)
        # RuntimeError: the transport closed under us (the peer went away) and connection_lost is on its way.
        if should_pause and not self._read_paused:
            self._read_paused = True
            with contextlib.suppress(RuntimeError):
                transport.pause_reading()
        elif not should_pause and self._read_paused:
            self._read_paused = False
            with contextlib.suppress(RuntimeError):
                transport.resume_reading()

    def _bad_frame_size(self, size: int, max_size: int) -> None:
        log.warning("invalid request size, closing connection", conn=self.info.id, peer=self.info.peer, size=size,
                    max_size=max_size, authenticated=self._sasl is None or self._sasl.authenticated)
        # counted as a request of its API when the key has arrived; no error code is answered (Kafka closes too)
        buf = self._buf.buffer
        self._server.refused(_API_KEY.unpack_from(buf, 4)[0] if len(buf) >= 6 else None, None)
        self.close()

    # --- closing -------------------------------------------------------------------------------------------
    def write_buffer_size(self) -> int:
        transport = self._transport
        return transport.get_write_buffer_size() if transport is not None else 0

    def close(self) -> None:
        """Close after the responses already written are flushed (the idle sweep aborts a stuck flush)."""
        self._closing = True
        self._cancel_pump()
        self._buf.clear()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        self._closing = True
        self._cancel_pump()
        self._buf.clear()
        if self._transport is not None:
            self._transport.abort()


def _fail(fut: asyncio.Future, response: bytes | None) -> None:
    if not fut.done():  # the connection may have closed during the delay
        fut.set_exception(CloseConnection("SASL authentication failed", response=response))


@dataclass(frozen=True)
class SocketServerConfig(ComponentConfig):
    """The listeners' and connections' settings (Kafka's SocketServerConfigs, Shoal's unsent-bytes bound)."""

    max_request_bytes: int = setting("socket.request.max.bytes")
    max_inflight: int = setting("queued.max.requests")  # requests in flight per connection
    max_unsent_bytes: int = setting("connections.max.unsent.bytes")
    idle_ms: int = setting("connections.max.idle.ms")
    backlog: int = setting("socket.listen.backlog.size")
    max_queued_bytes: int = setting("queued.max.request.bytes")
    # -1 leaves the kernel's default (autotuned)
    send_buffer_bytes: int = setting("socket.send.buffer.bytes")
    receive_buffer_bytes: int = setting("socket.receive.buffer.bytes")


class Server:
    """All listeners of the broker; `start()` binds them, `close()` stops accepting and drops connections."""

    def __init__(self, dispatch: Dispatch, config: SocketServerConfig | None = None, *,
                 quotas: ConnectionQuotas | None = None, serial_api_keys: Iterable[int] = (),
                 refused: Callable[[int | None, ErrorCode | None], None] | None = None,
                 admit: Admit | None = None) -> None:
        self.dispatch = dispatch
        # Called as each frame is dispatched (the router's quota admission); what it returns is handed to dispatch.
        self.admit = admit
        # fn(api key or None, error or None) for a request refused before it reaches the router (request metrics)
        self.refused = refused or (lambda _api_key, _error: None)
        self.config = config = config or SocketServerConfig()
        self.quotas = quotas or ConnectionQuotas()
        # fn(ip) -> ms: a new connection's throttle for connection_creation_rate (0 accepts it); set by the broker
        self.connection_throttle: Callable[[str], int] = lambda _ip: 0
        self._delayed_close: set[socket.socket] = set()  # throttled connections, closed when their delay ends
        self.serial_api_keys = frozenset(serial_api_keys)
        self.listener_security: dict[str, ListenerSecurity] = {}  # listener name -> security (PLAINTEXT if absent)
        self._handshakes: set[asyncio.Task] = set()  # TLS connections being set up
        # Open connections, least recently active first (the idle sweep walks from the front).
        self.connections: OrderedDict[KafkaConnection, None] = OrderedDict()
        # fn(ConnectionInfo) after a connection closed (share sessions are tied to their connection).
        self.close_listeners: list[Callable[[ConnectionInfo], None]] = []
        # Kafka's queued.max.request.bytes: while exhausted, connections holding no reservation are not read.
        self.request_memory = RequestMemoryPool(config.max_queued_bytes)
        self.memory_muted: set[KafkaConnection] = set()  # connections not read until the pool has room
        self._memory_room = asyncio.Event()  # set while the pool is not muting: new connections are accepted
        self._memory_room.set()
        self._trimming = False
        self._sockets: list[socket.socket] = []
        self._tasks: list[asyncio.Task] = []
        self.bound: list[tuple[str, str, int]] = []  # (listener name, host, port) after start()

    # --- listening -----------------------------------------------------------------------------------------
    async def start(self, listeners: list[Any]) -> list[tuple[str, str, int]]:
        loop = asyncio.get_running_loop()
        await self.quotas.refresh()
        for listener in listeners:
            socks = await self._bind(listener.host, listener.port)
            port = socks[0].getsockname()[1]
            for sock in socks:
                self._sockets.append(sock)
                self._tasks.append(loop.create_task(self._accept_loop(sock, listener.name),
                                                    name=f"accept {listener.name}"))
            self.bound.append((listener.name, listener.host, port))
            log.info("listening", host=listener.host or "0.0.0.0", port=port, listener=listener.name,
                     security_protocol=self.listener_security.get(listener.name, _PLAINTEXT).protocol)
        if self.config.idle_ms >= 0:
            self._tasks.append(loop.create_task(self._expire_idle(), name="idle connections"))
        return self.bound

    async def _bind(self, host: str, port: int) -> list[socket.socket]:
        """Listening sockets for host (empty = every interface, as asyncio's create_server binds them)."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        socks: list[socket.socket] = []
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if self.config.receive_buffer_bytes != -1:
                    # before bind, as Kafka's acceptor does: accepted connections inherit it, and the window scale
                    # offered in the handshake is chosen from it
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.config.receive_buffer_bytes)
                if port == 0 and len(socks) > 1:  # every address of an ephemeral listener on one port
                    address = (address[0], socks[0].getsockname()[1], *address[2:])
                sock.bind(address)
                sock.listen(self.config.backlog)
                sock.setblocking(False)
        except OSError:
            for sock in socks:
                sock.close()
            raise
        return socks

    async def _accept_loop(self, lsock: socket.socket, listener: str) -> None:
        loop = asyncio.get_running_loop()
        quotas = self.quotas
        while True:
            if quotas.at_capacity():
                log.info("max.connections reached: new connections wait until one closes", listener=listener,
                         connections=quotas.total, max_connections=quotas.max_connections())
                await quotas.wait_for_slot()
            if self.request_memory.muting:
                # A new connection would need memory too (its first read may take a whole socket buffer before it
                # could be paused): it waits in the listen backlog until the pool has room, like a muted one.
                await self._memory_room.wait()
            try:
                sock, address = await loop.sock_accept(lsock)
            except OSError as err:  # EMFILE, ENFILE, ENOBUFS...: keep serving the open connections, retry soon
                log.warning("cannot accept a connection", listener=listener, error=str(err))
                await asyncio.sleep(0.1)
                continue
            await quotas.refresh()
            wait_ms = quotas.creation_throttle_ms(int(time.monotonic() * 1000))
            if wait_ms > 0:
                # over max.connection.creation.rate: this connection waits, and the next ones in the backlog
                log.info("connection accept throttled: max.connection.creation.rate reached", listener=listener,
                         throttle_ms=wait_ms)
                await asyncio.sleep(wait_ms / 1000)
            ip = normalize_ip(address[0]) if isinstance(address, tuple) else str(address)
            throttle_ms = self.connection_throttle(ip)
            if throttle_ms > 0:
                # Kafka's acceptor holds a connection over its address's creation rate and closes it after the
                # throttle time (a delayed close, so a client retrying at once is slowed too)
                log.info("connection throttled: its address is over connection_creation_rate", listener=listener,
                         peer=_address(address), throttle_ms=throttle_ms)
                self._delayed_close.add(sock)
                loop.call_later(throttle_ms / 1000, self._close_throttled, sock)
                continue
            if not quotas.try_acquire(ip):
                log.info("connection rejected: too many connections from its address", listener=listener,
                         peer=_address(address), limit=quotas.limit_for(ip))
                sock.close()
                continue
            security = self.listener_security.get(listener, _PLAINTEXT)
            if security.ssl_context is None:
                await self._set_up(sock, address, listener, ip, None)
            else:  # a TLS handshake takes round trips: it must not hold up the next accept
                task = loop.create_task(self._set_up(sock, address, listener, ip, security))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)

    async def _set_up(self, sock: socket.socket, address: Any, listener: str, ip: str,
                      security: ListenerSecurity | None) -> None:
        loop = asyncio.get_running_loop()
        factory = functools.partial(KafkaConnection, self, listener, ip)
        try:
            self._configure_accepted(sock)
            if security is None:
                await loop.connect_accepted_socket(factory, sock)
            else:
                await loop.connect_accepted_socket(factory, sock, ssl=security.ssl_context,
                                                   ssl_handshake_timeout=security.ssl_handshake_timeout_s)
        except Exception as err:  # noqa: BLE001 - the peer may be gone already; the listener stays up
            self.quotas.release(ip)
            sock.close()
            log.info("accepted connection failed", listener=listener, peer=_address(address), error=str(err))

    def _configure_accepted(self, sock: socket.socket) -> None:
        """Kafka's options for an accepted connection: no Nagle delay, keepalive, and socket.send.buffer.bytes."""
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if self.config.send_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.send_buffer_bytes)

    def _close_throttled(self, sock: socket.socket) -> None:
        self._delayed_close.discard(sock)
        sock.close()

    # --- request memory ------------------------------------------------------------------------------------
    def request_memory_charged(self, before: int, after: int) -> None:
        pool = self.request_memory
        was = pool.muting
        pool.charge(before, after)
        if pool.muting and not was:
            log.warning("request memory pool exhausted: reading only connections in the middle of a request",
                        used=pool.used, capacity=pool.capacity, connections=len(self.connections))
            self._memory_room.clear()
            for conn in list(self.connections):
                conn._update_reading()  # noqa: SLF001 - same module
        elif was and not pool.muting:
            self._memory_room.set()
            muted, self.memory_muted = self.memory_muted, set()
            for conn in muted:
                conn._update_reading()  # noqa: SLF001 - same module
        if pool.drained_after_burst() and not self._trimming:
            self._trimming = True
            task = asyncio.get_running_loop().run_in_executor(None, give_back_memory)
            task.add_done_callback(self._trimmed)

    def _trimmed(self, fut: asyncio.Future) -> None:
        self._trimming = False
        if not fut.cancelled() and fut.exception() is not None:
            log.warning("giving memory back failed", error=repr(fut.exception()))

    # --- connection bookkeeping ----------------------------------------------------------------------------
    def connection_opened(self, conn: KafkaConnection) -> None:
        self.connections[conn] = None

    def connection_closed(self, conn: KafkaConnection) -> None:
        if self.connections.pop(conn, False) is not False and conn.peer_ip is not None:
            self.quotas.release(conn.peer_ip)
            conn.peer_ip = None

    def touch(self, conn: KafkaConnection) -> None:
        """Bytes moved on this connection: it is the most recently active."""
        conn.last_active = time.monotonic()
        with contextlib.suppress(KeyError):
            self.connections.move_to_end(conn)

    async def _expire_idle(self) -> None:
        idle_s = self.config.idle_ms / 1000
        interval = min(max(idle_s / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            self.expire_idle(time.monotonic() - idle_s)

    @property
    def answering(self) -> bool:
        """Some connection has a request not yet answered."""
        return any(conn._pending for conn in self.connections)  # noqa: SLF001 - same module

    def expire_idle(self, deadline: float) -> int:
        """Drop connections inactive since before `deadline` (monotonic seconds); returns how many."""
        dropped = 0
        for conn in list(self.connections):
            if conn.last_active > deadline:
                break  # least recently active first: the rest are younger
            size = conn.write_buffer_size()
            if size and size != conn.write_buffer_seen:
                conn.write_buffer_seen = size  # a slow reader is draining a large response: that is activity
                self.touch(conn)
                continue
            log.info("closing idle connection", conn=conn.info.id, peer=conn.info.peer,
                     idle_ms=self.config.idle_ms, unsent_bytes=size)
            # Abort: a graceful close would wait for a client that reads nothing.
            conn.abort()
            self.connection_closed(conn)
            dropped += 1
        return dropped

    async def close(self, grace_s: float = 2.0) -> None:
        for task in [*self._tasks, *self._handshakes]:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for sock in [*self._sockets, *self._delayed_close]:
            sock.close()
        self._sockets.clear()
        self._delayed_close.clear()
        for conn in list(self.connections):
            conn.close()
        deadline = time.monotonic() + grace_s
        while self.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            conn.abort()
