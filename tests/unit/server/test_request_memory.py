"""Kafka's queued.max.request.bytes: the pool's accounting (sans-IO) and the server muting connections with it."""

from __future__ import annotations

import asyncio
import socket
import struct

from broker.request_memory import TRIM_AFTER_BYTES, RequestMemoryPool, give_back_memory
from broker.server import Server, SocketServerConfig
from protocol.framing import FrameSplitter
from tests.helpers.waiting import async_assert_stays, async_wait_until


class Listener:
    name = "PLAINTEXT"
    host = "127.0.0.1"
    port = 0


def test_pool_mutes_at_capacity_and_resumes_an_eighth_below() -> None:
    pool = RequestMemoryPool(800)
    pool.charge(0, 799)
    assert not pool.muting
    pool.charge(799, 800)
    assert pool.muting
    pool.charge(800, 701)
    assert pool.muting  # 701 > 800 - 100
    pool.charge(701, 700)
    assert not pool.muting and pool.used == 700


def test_unbounded_pool_never_mutes_but_still_tracks_bursts() -> None:
    pool = RequestMemoryPool(-1)
    assert pool.capacity is None
    pool.charge(0, TRIM_AFTER_BYTES)
    assert not pool.muting and not pool.drained_after_burst()
    pool.charge(TRIM_AFTER_BYTES, TRIM_AFTER_BYTES // 8)
    assert pool.drained_after_burst()
    assert not pool.drained_after_burst()  # once per burst
    assert give_back_memory() in (True, False)


def test_frame_splitter_says_what_is_missing_of_the_first_frame() -> None:
    frames = FrameSplitter()
    assert frames.missing() == 0
    frames.feed(struct.pack(">i", 10) + b"abc")
    assert frames.missing() == 7
    frames.feed(b"defghij" + struct.pack(">i", 100))
    assert frames.missing() == 0  # the first frame is whole


async def test_connections_beyond_the_pool_are_not_read_until_it_has_room() -> None:
    """Three connections each send part of a 100 KB frame into a 150 KB pool: two get reservations, then the pool
    is exhausted and a fourth connection is not even accepted; completing one frame frees its reservation and
    everything moves on, each frame dispatched whole."""
    seen: list[int] = []

    async def dispatch(frame, conn):
        seen.append(len(frame))
        return None

    server = Server(dispatch, SocketServerConfig(max_queued_bytes=150_000))
    ((_, _, port),) = await server.start([Listener()])
    body = struct.pack(">hhi", 0, 9, 1) + b"\x00" * (100_000 - 8)
    head = struct.pack(">i", len(body))
    loop = asyncio.get_running_loop()
    socks = []
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        await loop.sock_sendall(s, head + body[:60_000])
        socks.append(s)
        expected = len(socks)
        await async_wait_until(lambda: len(server.connections) == expected)  # noqa: B023 - awaited here
    pool = server.request_memory
    await async_wait_until(lambda: pool.muting)
    granted = [c for c in server.connections if c._granted]  # noqa: SLF001
    assert len(granted) == 2 and pool.used <= 2 * 100_004 + 60_004
    late = socket.create_connection(("127.0.0.1", port))
    late.setblocking(False)
    await loop.sock_sendall(late, head + body)
    await async_assert_stays(lambda: len(server.connections) == 3, 0.2, "the late connection not accepted")
    first = next(i for i, c in enumerate(server.connections) if c._granted)  # noqa: SLF001
    await loop.sock_sendall(socks[first], body[60_000:])
    for i, s in enumerate(socks):
        if i != first:
            await loop.sock_sendall(s, body[60_000:])
    await async_wait_until(lambda: len(seen) == 4, timeout=10)
    assert seen == [len(body)] * 4 and not pool.muting and pool.used == 0
    for s in [*socks, late]:
        s.close()
    await server.close()
