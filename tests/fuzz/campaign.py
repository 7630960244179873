"""A fuzz campaign against a running broker: mutated real-client frames over many pipelining connections.

Each worker opens a connection, sends bursts of 1-16 mutated frames (well-formed ones with odd values, then at
most one byte-level mutant) followed by an ApiVersions probe, and reads
everything the broker answers. The probe's answer means every earlier frame was handled (responses are in
order); end of stream means the broker closed the connection (its answer to malformed input); no answer within
`probe_timeout` (a long-poll fetch, a frame whose size prefix promises more bytes) makes the worker give up the
connection. A few frames get a lying size prefix (longer, shorter, negative, huge) to exercise framing.

With a SASL listener, every eighth worker connects there and opens each connection with a captured
authentication (ApiVersions, SaslHandshake, SaslAuthenticate of PLAIN or SCRAM), each frame mutated now and then,
before its bursts: the authenticator's states and the requests after it are fuzzed too.

    corpus = load_corpus()
    stats = asyncio.run(run_campaign(port, corpus, frames=5000, connections=8, seed=1))
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.codec import request_codec, response_codec
from protocol.framing import RequestHeader, decode_request_header, encode_request, encode_request_header
from tests.fuzz.mutator import Mutator, _slots

CORPUS = Path(__file__).with_name("corpus.txt")
API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
SASL_CLIENT = "sasl"  # the corpus label of frames captured on the SASL listener
SASL_EVERY = 8  # one worker in SASL_EVERY fuzzes the SASL listener
_SIZE = struct.Struct(">i")


def load_corpus(path: Path = CORPUS) -> list[tuple[str, bytes]]:
    """(client, frame) in capture order."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            client, _api, _version, hexed = line.split()
            out.append((client, bytes.fromhex(hexed)))
    return out


@dataclass
class Stats:
    frames: int = 0
    connections: int = 0
    closed_by_broker: int = 0
    gave_up: int = 0  # no probe answer in time: the client dropped the connection
    responses: int = 0
    response_bytes: int = 0
    refused: int = 0  # connect() failed
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    gave_up_apis: Counter[int] = field(default_factory=Counter)  # api keys of the frames of given-up bursts

    def figures(self) -> dict[str, Any]:
        seconds = (self.finished or time.monotonic()) - self.started
        return {"frames": self.frames, "connections": self.connections, "closed_by_broker": self.closed_by_broker,
                "client_gave_up": self.gave_up, "gave_up_apis": dict(self.gave_up_apis.most_common(8)),
                "responses": self.responses, "refused": self.refused,
                "seconds": round(seconds, 1), "frames_per_s": round(self.frames / seconds) if seconds else 0}


class _Budget:
    def __init__(self, frames: int) -> None:
        self.left = frames

    def take(self, n: int) -> int:
        n = min(n, self.left)
        self.left -= n
        return n


def sasl_openings(corpus: list[tuple[str, bytes]]) -> list[list[bytes]]:
    """The captured authentications of the SASL listener: each SaslHandshake with the SaslAuthenticate frames that
    followed it, after an ApiVersions request (as clients open)."""
    openings: list[list[bytes]] = []
    versions: bytes | None = None
    for client, frame in corpus:
        if client != SASL_CLIENT or len(frame) < 2:
            continue
        api_key = struct.unpack_from(">h", frame)[0]
        if api_key == API_VERSIONS:
            versions = frame
        elif api_key == SASL_HANDSHAKE:
            openings.append([versions, frame] if versions is not None else [frame])
        elif api_key == SASL_AUTHENTICATE and openings:
            openings[-1].append(frame)
    return openings


def with_live_topic_ids(frames: list[bytes], live_ids: list[uuid.UUID]) -> list[bytes]:
    """The corpus with capture-time topic ids replaced by ids of topics that exist in this broker."""
    if not live_ids:
        return frames
    rng = random.Random(0)
    out = []
    for frame in frames:
        try:
            header, offset = decode_request_header(frame)
            codec = request_codec(header.api_key, header.api_version)
            value = codec.decode(frame[offset:])
        except Exception:  # noqa: BLE001 - keep frames we cannot rewrite as they are
            out.append(frame)
            continue
        changed = False
        for parent, key in list(_slots(value)):
            if isinstance(parent[key], uuid.UUID) and parent[key].int != 0:
                parent[key] = rng.choice(live_ids)
                changed = True
        out.append(encode_request_header(header) + codec.encode(value) if changed else frame)
    return out


def _probe(correlation_id: int) -> bytes:
    return encode_request(RequestHeader(API_VERSIONS, 0, correlation_id, "fuzz-probe"), b"")


async def _reader(reader: asyncio.StreamReader, stats: Stats, probes: dict[int, asyncio.Event]) -> None:
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, OSError):
        while True:
            head = await reader.readexactly(8)
            size, correlation_id = struct.unpack(">ii", head)
            remaining = size - 4
            while remaining > 0:
                chunk = await reader.read(min(remaining, 1 << 20))
                if not chunk:
                    raise asyncio.IncompleteReadError(b"", remaining)
                remaining -= len(chunk)
            stats.responses += 1
            stats.response_bytes += size
            event = probes.pop(correlation_id, None)
            if event is not None:
                event.set()


async def _answered(event: asyncio.Event, read_task: asyncio.Future, timeout: float) -> bool:
    """Wait for the probe's answer, the end of the stream or the timeout; True if the probe was answered."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter, read_task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    return event.is_set()


async def _worker(port: int, mutator: Mutator, budget: _Budget, stats: Stats, probe_timeout: float,
                  worker_id: int, openings: list[list[bytes]] | None = None) -> None:
    """Bursts of mutated frames over connection after connection until the budget is spent; with `openings`
    (a SASL listener), each connection first sends one of them, a frame mutated now and then."""
    rng = mutator.rng
    probe_ids = iter(range(-1_000_000 * (worker_id + 1), -1_000_000 * worker_id))
    while budget.left > 0:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
        except (OSError, TimeoutError):
            stats.refused += 1
            if stats.refused > 50:
                return
            await asyncio.sleep(0.2)
            continue
        stats.connections += 1
        probes: dict[int, asyncio.Event] = {}
        read_task = asyncio.ensure_future(_reader(reader, stats, probes))
        try:
            for burst in range(rng.randint(1, 8) + (1 if openings else 0)):
                if openings and burst == 0:
                    frames = [f if rng.random() < 0.8 else mutator.mutate(f) for f in rng.choice(openings)]
                    frames = frames[:budget.take(len(frames))]
                    n = len(frames)
                else:
                    n = budget.take(rng.randint(1, 16))
                    # Well-formed frames first and at most one byte-level mutant last: the broker closes the
                    # connection at a malformed frame, and frames after it would never be read.
                    frames = [mutator.wellformed() for _ in range(n - 1)]
                    if n:
                        frames.append(mutator.malformed() if rng.random() < 0.6 else mutator.wellformed())
                if n == 0:
                    break
                stats.frames += n
                wire = [_SIZE.pack(len(f)) + f for f in frames]
                lying = rng.random() < 0.02
                if lying:  # the last frame's size prefix lies
                    last = frames[-1]
                    wire[-1] = _SIZE.pack(rng.choice((len(last) + rng.randint(1, 1000), len(last) - 1, -1,
                                                      0x7FFFFFFF, 0))) + last
                probe_id = next(probe_ids)
                event = asyncio.Event()
                probes[probe_id] = event
                writer.write(b"".join(wire) + _probe(probe_id))
                answered = await _answered(event, read_task, probe_timeout if not lying else min(probe_timeout, 0.5))
                if read_task.done():
                    stats.closed_by_broker += 1
                    break
                if not answered:
                    stats.gave_up += 1
                    stats.gave_up_apis.update(struct.unpack_from(">h", f)[0] for f in frames if len(f) >= 2)
                    break
        except (ConnectionError, OSError):
            stats.closed_by_broker += 1
        finally:
            read_task.cancel()
            with contextlib.suppress(BaseException):
                await read_task
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 5)


async def replay(port: int, frames: list[bytes], timeout: float = 20.0) -> int:
    """Send frames unmodified on one connection, one at a time with a probe each; returns how many were answered
    before the broker closed the connection (if it did). Replaying the corpus creates its topics and members."""
    answered = 0
    stats = Stats()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    probes: dict[int, asyncio.Event] = {}
    read_task = asyncio.ensure_future(_reader(reader, stats, probes))
    try:
        for i, frame in enumerate(frames):
            event = asyncio.Event()
            probes[-10 - i] = event
            writer.write(_SIZE.pack(len(frame)) + frame + _probe(-10 - i))
            if not await _answered(event, read_task, timeout):
                break
            answered += 1
    finally:
        read_task.cancel()
        with contextlib.suppress(BaseException):
            await read_task
        writer.close()
    return answered


async def live_topic_ids(port: int) -> list[uuid.UUID]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        body = request_codec(METADATA, 12).encode({"topics": None, "allow_auto_topic_creation": False})
        writer.write(encode_request(RequestHeader(METADATA, 12, 1, "fuzz-setup"), body))
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        frame = await reader.readexactly(size)
        meta = response_codec(METADATA, 12).decode(frame[5:])
        return [t.topic_id for t in meta.topics if not t.name.startswith("__")]
    finally:
        writer.close()


async def prepare(port: int, corpus: list[tuple[str, bytes]]) -> list[bytes]:
    """Replay the corpus per client (topics, producers, share members come to exist), then give it live topic
    ids and replay it again; returns the frames to mutate."""
    frames = [frame for _, frame in corpus]
    for client in dict.fromkeys(c for c, _ in corpus):
        await replay(port, [f for c, f in corpus if c == client])
    frames = with_live_topic_ids(frames, await live_topic_ids(port))
    await replay(port, frames)
    return frames


async def run_campaign(port: int, frames: list[bytes], *, count: int, connections: int, seed: int,
                       probe_timeout: float = 1.0, stats: Stats | None = None, sasl_port: int | None = None,
                       openings: list[list[bytes]] | None = None) -> Stats:
    stats = stats or Stats()
    budget = _Budget(count)
    workers = []
    for i in range(connections):
        sasl = sasl_port is not None and bool(openings) and i % SASL_EVERY == SASL_EVERY - 1
        workers.append(_worker(sasl_port if sasl else port, Mutator(seed * 1000 + i, frames), budget, stats,
                               probe_timeout, i, openings if sasl else None))
    try:
        await asyncio.gather(*workers)
    finally:
        stats.finished = time.monotonic()
    return stats
