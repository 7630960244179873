"""The network layer's side of quotas, in-process with a fake dispatch: a throttled connection is muted (nothing
read or dispatched) for its throttle time while others are served, and a connection over its address's creation
rate is closed after its throttle time."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time

from broker.server import Server
from tests.helpers.waiting import async_wait_until

METADATA = 3


class Listener:
    name = "PLAINTEXT"
    host = "127.0.0.1"
    port = 0


def frame(correlation_id: int) -> bytes:
    body = struct.pack(">hhi", METADATA, 0, correlation_id)
    return struct.pack(">i", len(body)) + body


async def read_ids(reader: asyncio.StreamReader, n: int) -> list[int]:
    out = []
    for _ in range(n):
        _size, corr = struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10))
        out.append(corr)
    return out


async def test_a_muted_connection_is_not_read_until_its_throttle_ends():
    dispatched: list[tuple[int, float]] = []

    async def dispatch(data, conn):
        (corr,) = struct.unpack_from(">i", data, 4)
        dispatched.append((corr, time.monotonic()))
        if corr == 1:
            conn.mute_for(0.3)  # what the router does for a throttled response
        return struct.pack(">ii", 4, corr)

    server = Server(dispatch)
    ((_, _, port),) = await server.start([Listener()])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    other_reader, other_writer = await asyncio.open_connection("127.0.0.1", port)
    began = time.monotonic()
    writer.write(frame(1) + frame(2) + frame(3))  # pipelined behind the throttled one
    assert await read_ids(reader, 1) == [1]  # the throttled request is answered at once
    other_writer.write(frame(100))
    assert await read_ids(other_reader, 1) == [100]  # another connection is served meanwhile
    assert [c for c, _t in dispatched] == [1, 100]
    conn = next(c for c in server.connections if c.muted)
    assert conn.muted
    assert await read_ids(reader, 2) == [2, 3]
    assert all(t - began >= 0.29 for c, t in dispatched if c in (2, 3))
    await async_wait_until(lambda: not conn.muted)
    for w in (writer, other_writer):
        w.close()
    await server.close()


async def test_a_connection_over_its_creation_rate_is_closed_after_the_throttle():
    async def dispatch(data, conn):
        return struct.pack(">ii", 4, struct.unpack_from(">i", data, 4)[0])

    server = Server(dispatch)
    throttles = iter([0, 250])
    server.connection_throttle = lambda ip: next(throttles, 0)
    ((_, _, port),) = await server.start([Listener()])
    _r1, first = await asyncio.open_connection("127.0.0.1", port)
    await async_wait_until(lambda: len(server.connections) == 1)
    began = time.monotonic()
    reader, second = await asyncio.open_connection("127.0.0.1", port)
    second.write(frame(7))
    with contextlib.suppress(ConnectionResetError):  # never served: closed (reset: its request was never read)
        assert await asyncio.wait_for(reader.read(), 10) == b""
    assert time.monotonic() - began >= 0.2
    assert len(server.connections) == 1
    for w in (first, second):
        w.close()
    await server.close()
