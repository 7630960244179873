"""A seeded mutator over captured request frames (size prefix excluded).

Byte-level operations (bit flips, interesting bytes and integers, huge varints, truncation, insertion, deletion,
duplication, splicing two frames), header operations (api key, version, correlation id, client id length) and a
structure-aware one (decode with our codecs, change one field to an extreme: long or odd strings, huge arrays,
boundary integers, null; then encode again). Everything is drawn from one `random.Random(seed)`, so a campaign
is reproducible from its seed.
"""

from __future__ import annotations

import random
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from protocol.codec import request_codec
from protocol.framing import decode_request_header

INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE)
INTERESTING_INTS = (0, 1, -1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF, -0x80000000,
                    0xFFFFFFFF, 1 << 20, 100_000)
HUGE_VARINTS = (0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x8001, 0x10000000, 1 << 20)
ODD_STRINGS = ("", "x" * 249, "x" * 250, "x" * 32767, "__consumer_offsets", "__cluster_metadata", ".", "..",
               "a/b", "\x00", "é" * 200, "topic with spaces", "-1", "ffffffff")
MAX_GROW = 1 << 20  # a structure-aware mutation never builds a frame larger than this


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class Mutator:
    def __init__(self, seed: int, corpus: Sequence[bytes], api_keys: Sequence[int] = ()) -> None:
        if not corpus:
            raise ValueError("empty corpus")
        self.rng = random.Random(seed)
        self.corpus = list(corpus)
        self.api_keys = list(api_keys) or sorted({struct.unpack_from(">h", f)[0] for f in corpus})
        self._ops: list[tuple[int, Callable[[bytearray], bytearray]]] = [
            (5, self.flip_bits), (2, self.set_byte), (5, self.set_int), (3, self.set_varint), (2, self.truncate),
            (1, self.insert), (1, self.delete), (1, self.duplicate), (2, self.splice), (3, self.header),
        ]
        self._weights = [w for w, _ in self._ops]

    def mutate(self, frame: bytes | None = None) -> bytes:
        """One frame (size prefix excluded): well-formed or not, half and half."""
        return self.wellformed(frame) if self.rng.random() < 0.5 else self.malformed(frame)

    def wellformed(self, frame: bytes | None = None) -> bytes:
        """A frame that still decodes (mostly): a quarter unchanged (ordinary traffic between the abuse), the rest
        with one to three fields set to odd values by the structure-aware operation."""
        rng = self.rng
        data = bytearray(frame if frame is not None else rng.choice(self.corpus))
        if rng.random() < 0.25:
            return bytes(data)
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            data = self.structural(data)
        return bytes(data)

    def malformed(self, frame: bytes | None = None) -> bytes:
        """One to four byte-level or header changes (most such frames close the connection)."""
        rng = self.rng
        data = bytearray(frame if frame is not None else rng.choice(self.corpus))
        for _ in range(rng.choice((1, 1, 1, 1, 2, 2, 3, 4))):
            op = rng.choices(self._ops, self._weights)[0][1]
            data = op(data)
        return bytes(data)

    # --- byte level ------------------------------------------------------------------------------------------
    def _pos(self, data: bytearray, width: int = 1) -> int:
        return self.rng.randrange(max(1, len(data) - width + 1))

    def flip_bits(self, data: bytearray) -> bytearray:
        if data:
            for _ in range(self.rng.choice((1, 1, 1, 2, 3, 8))):
                pos = self._pos(data)
                data[pos] ^= 1 << self.rng.randrange(8)
        return data

    def set_byte(self, data: bytearray) -> bytearray:
        if data:
            data[self._pos(data)] = self.rng.choice(INTERESTING_BYTES)
        return data

    def set_int(self, data: bytearray) -> bytearray:
        width, fmt = self.rng.choice(((2, ">H"), (4, ">I"), (8, ">Q")))
        if len(data) < width:
            return data
        value = self.rng.choice(INTERESTING_INTS) & ((1 << (8 * width)) - 1)
        pos = self._pos(data, width)
        data[pos:pos + width] = struct.pack(fmt, value)
        return data

    def set_varint(self, data: bytearray) -> bytearray:
        if data:
            pos = self._pos(data)
            data[pos:pos + 1] = uvarint(self.rng.choice(HUGE_VARINTS))
        return data

    def truncate(self, data: bytearray) -> bytearray:
        return data[:self.rng.randrange(len(data) + 1)]

    def insert(self, data: bytearray) -> bytearray:
        pos = self.rng.randrange(len(data) + 1)
        data[pos:pos] = self.rng.randbytes(self.rng.choice((1, 2, 4, 16, 100)))
        return data

    def delete(self, data: bytearray) -> bytearray:
        if data:
            pos = self._pos(data)
            del data[pos:pos + self.rng.choice((1, 2, 4, 16))]
        return data

    def duplicate(self, data: bytearray) -> bytearray:
        if data and len(data) < MAX_GROW:
            start = self._pos(data)
            chunk = data[start:start + self.rng.choice((1, 4, 16, 64, 512))]
            pos = self.rng.randrange(len(data) + 1)
            data[pos:pos] = chunk * self.rng.choice((1, 2, 10))
        return data

    def splice(self, data: bytearray) -> bytearray:
        """This frame's header with another frame's body."""
        other = self.rng.choice(self.corpus)
        try:
            _, head_end = decode_request_header(bytes(data))
            _, body_start = decode_request_header(other)
        except Exception:  # noqa: BLE001 - a header already mutated beyond reading
            return data
        return bytearray(data[:head_end] + other[body_start:])

    def header(self, data: bytearray) -> bytearray:
        if len(data) < 10:
            return data
        rng = self.rng
        what = rng.randrange(4)
        if what == 0:
            key = rng.choice(self.api_keys + [rng.randrange(-1, 100), 0x7FFF, -0x8000])
            data[0:2] = struct.pack(">h", key)
        elif what == 1:
            version = rng.choice((-1, 0, 1, rng.randrange(20), 0x7FFF, struct.unpack_from(">h", data, 2)[0] + 1))
            data[2:4] = struct.pack(">h", max(-0x8000, min(0x7FFF, version)))
        elif what == 2:
            data[4:8] = struct.pack(">i", rng.choice((0, -1, 0x7FFFFFFF, rng.randrange(1 << 31))))
        else:
            data[8:10] = struct.pack(">h", rng.choice((-1, -2, 0, 0x7FFF, -0x8000, len(data))))
        return data

    # --- structure aware ---------------------------------------------------------------------------------------
    def structural(self, data: bytearray) -> bytearray:
        try:
            header, offset = decode_request_header(bytes(data))
            codec = request_codec(header.api_key, header.api_version)
            value = codec.decode(bytes(data[offset:]))
        except Exception:  # noqa: BLE001 - not decodable (any more): fall back to a byte-level change
            return self.set_int(data)
        slots = list(_slots(value))
        if not slots:
            return self.set_int(data)
        for _ in range(20):  # a choice that does not encode (an int out of range) is retried
            parent, key = self.rng.choice(slots)
            old = parent[key]
            parent[key] = self._extreme(old)
            try:
                body = codec.encode(value)
            except Exception:  # noqa: BLE001
                parent[key] = old
                continue
            if offset + len(body) <= MAX_GROW:
                return bytearray(data[:offset] + body)
            parent[key] = old
        return self.set_int(data)

    def _extreme(self, old: Any) -> Any:
        rng = self.rng
        if isinstance(old, bool):
            return not old
        if isinstance(old, int):
            return rng.choice((0, -1, 1, old + 1, old - 1, 0x7F, -0x80, 0x7FFF, -0x8000, 0x7FFFFFFF, -0x80000000,
                               (1 << 63) - 1, -(1 << 63), 10_000, 100_000))
        if isinstance(old, str) or old is None:
            return rng.choice(ODD_STRINGS + (None,))
        if isinstance(old, uuid.UUID):
            return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128)), old))
        if isinstance(old, bytes | bytearray | memoryview):
            raw = bytearray(old)
            return bytes(self.rng.choice((self.flip_bits, self.truncate, self.set_int, self.duplicate))(raw))
        if isinstance(old, list):
            choice = rng.randrange(4)
            if choice == 0:
                return []
            if choice == 1:
                return None
            if old:
                return old * rng.choice((2, 10, 100, 1000))  # duplicates: many copies of one name or partition
            return old
        return old


def _slots(value: Any, depth: int = 0):
    """(container, key) of every field below `value` (dict-like Containers and lists)."""
    if depth > 8:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and key.startswith("_"):
                continue
            yield value, key
            yield from _slots(item, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, dict):
                yield from _slots(item, depth + 1)
            else:
                yield value, i
