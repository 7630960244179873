"""The server in-process: the socket options of accepted connections (Kafka's acceptor sets TCP_NODELAY,
SO_KEEPALIVE, socket.send.buffer.bytes on each, socket.receive.buffer.bytes on the listening socket)."""

from __future__ import annotations

import asyncio
import socket

from broker.server import Server, SocketServerConfig
from tests.helpers.waiting import async_wait_until


class Listener:
    name = "PLAINTEXT"
    host = "127.0.0.1"
    port = 0


async def _accepted(server: Server) -> tuple[socket.socket, asyncio.StreamWriter]:
    """Start `server`, connect to it; the server side's socket and the client's writer."""
    ((_, _, port),) = await server.start([Listener()])
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    await async_wait_until(lambda: server.connections)
    conn = next(iter(server.connections))
    return conn._transport.get_extra_info("socket"), writer  # noqa: SLF001 - the transport's own socket


async def _no_dispatch(frame, conn):  # pragma: no cover - no request is sent
    raise AssertionError("no request expected")


async def test_configured_buffers_and_kafka_options():
    server = Server(_no_dispatch, SocketServerConfig(send_buffer_bytes=50_000, receive_buffer_bytes=60_000))
    sock, writer = await _accepted(server)
    try:
        # Linux doubles what is asked (the bookkeeping overhead) and reports the doubled size
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 100_000
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 120_000  # inherited from the listener
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    finally:
        writer.close()
        await server.close()


def _kernel_defaults() -> tuple[int, int]:
    """SO_SNDBUF and SO_RCVBUF of a loopback connection accepted with no options set."""
    with socket.create_server(("127.0.0.1", 0)) as listener, \
            socket.create_connection(listener.getsockname()):
        accepted, _ = listener.accept()
        with accepted:
            return (accepted.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                    accepted.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))


async def test_default_leaves_the_kernels_buffers():
    """-1 (Shoal's default): the sizes the kernel gives a connection, which autotuning grows with use."""
    server = Server(_no_dispatch)
    sock, writer = await _accepted(server)
    try:
        assert (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)) == _kernel_defaults()
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    finally:
        writer.close()
        await server.close()
