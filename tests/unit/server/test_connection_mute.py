"""The network layer's side of quotas, in-process with a fake dispatch: a throttled connection is muted (nothing
read or dispatched) for its throttle time while others are served; a throttle or a hold decided at admission, as
a frame is dispatched, holds back the Produce frames pipelined behind it (which are otherwise dispatched together);
and a connection over its address's creation rate is closed after its throttle time."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time

from broker.context import Admission
from broker.server import Server
from tests.helpers.waiting import async_wait_until

PRODUCE, METADATA = 0, 3


class Listener:
    name = "PLAINTEXT"
    host = "127.0.0.1"
    port = 0


def frame(correlation_id: int, api_key: int = METADATA) -> bytes:
    body = struct.pack(">hhi", api_key, 0, correlation_id)
    return struct.pack(">i", len(body)) + body


def corr(data) -> int:
    return struct.unpack_from(">i", data, 4)[0]


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


async def test_produce_frames_not_held_are_dispatched_together():
    """Pipelined Produce frames all start before the first is answered (unthrottled produce keeps its pipelining):
    a throttle known only when a request is answered would hold none of them back, hence the admission."""
    dispatched: list[int] = []
    release = asyncio.Event()

    async def dispatch(data, conn, admission=None):
        dispatched.append(corr(data))
        await release.wait()  # appends waiting for their shared flush
        return struct.pack(">ii", 4, corr(data))

    server = Server(dispatch, admit=lambda data, conn: None)
    ((_, _, port),) = await server.start([Listener()])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(frame(i, PRODUCE) for i in (1, 2, 3)))
    await async_wait_until(lambda: len(dispatched) == 3)
    release.set()
    assert await read_ids(reader, 3) == [1, 2, 3]
    writer.close()
    await server.close()


async def test_a_request_held_at_admission_holds_back_the_produce_frames_pipelined_behind_it():
    """A Produce over its byte rate is held at admission: the frames behind it wait until it is answered, and then
    for the throttle the answer mutes the connection for (Kafka's order: the response, then the mute)."""
    dispatched: list[tuple[int, float, Admission | None]] = []
    admitted: list[int] = []
    answered: list[float] = []

    def admit(data, conn) -> Admission | None:
        admitted.append(corr(data))
        if corr(data) == 2:  # the second request's bytes are over the rate
            return Admission(throttle_ms=300, hold=True)
        return None

    async def dispatch(data, conn, admission=None):
        dispatched.append((corr(data), time.monotonic(), admission))
        await asyncio.sleep(0.05)  # an append waiting for its flush: the next frames would start meanwhile
        if admission is not None:
            conn.mute_for(admission.throttle_ms / 1000)  # what the router does when it answers
            answered.append(time.monotonic())
        return struct.pack(">ii", 4, corr(data))

    server = Server(dispatch, admit=admit)
    ((_, _, port),) = await server.start([Listener()])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(frame(i, PRODUCE) for i in (1, 2, 3, 4)))
    assert await read_ids(reader, 2) == [1, 2]  # the throttled request itself is served and answered at once
    assert admitted == [1, 2] and [c for c, _t, _a in dispatched] == [1, 2]
    assert dispatched[1][2] == Admission(throttle_ms=300, hold=True)  # what admission decided reaches dispatch
    assert await read_ids(reader, 2) == [3, 4]
    assert all(t - answered[0] >= 0.29 for c, t, _a in dispatched if c in (3, 4))
    assert [c for c, _t, _a in dispatched] == [1, 2, 3, 4]
    writer.close()
    await server.close()


async def test_a_held_request_is_answered_before_the_next_frame_is_dispatched():
    """A client under a request quota: each request runs alone (it is charged when it ends, and the throttle
    must hold back the next), where Produce frames are otherwise dispatched together."""
    running: list[int] = []
    overlaps: list[tuple[int, list[int]]] = []
    hold = True

    def admit(data, conn) -> Admission | None:
        return Admission(hold=True) if hold else None

    async def dispatch(data, conn, admission=None):
        if running:
            overlaps.append((corr(data), list(running)))
        running.append(corr(data))
        await asyncio.sleep(0.02)
        running.remove(corr(data))
        return struct.pack(">ii", 4, corr(data))

    server = Server(dispatch, admit=admit)
    ((_, _, port),) = await server.start([Listener()])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(frame(i, PRODUCE) for i in range(1, 6)))
    assert await read_ids(reader, 5) == [1, 2, 3, 4, 5]
    assert overlaps == []
    hold = False  # no hold: pipelined again
    writer.write(b"".join(frame(i, PRODUCE) for i in range(6, 11)))
    assert await read_ids(reader, 5) == [6, 7, 8, 9, 10]
    assert overlaps
    writer.close()
    await server.close()


async def test_a_failing_admission_closes_only_its_connection():
    async def dispatch(data, conn, admission=None):
        return struct.pack(">ii", 4, corr(data))

    def admit(data, conn) -> Admission | None:
        if corr(data) == 66:
            raise RuntimeError("admission bug")
        return None

    server = Server(dispatch, admit=admit)
    ((_, _, port),) = await server.start([Listener()])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    other_reader, other_writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(66))
    assert await asyncio.wait_for(reader.read(), 10) == b""
    other_writer.write(frame(7))
    assert await read_ids(other_reader, 1) == [7]
    for w in (writer, other_writer):
        w.close()
    await server.close()
