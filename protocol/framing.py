"""Framing: 4-byte size prefix, request header v1/v2, response header v0/v1.

Headers use the schema-generated codecs for schemas/messages/RequestHeader.json and
ResponseHeader.json. A frame passed here excludes the size prefix.
"""

from __future__ import annotations

import functools
import struct
from typing import NamedTuple

from protocol import schema
from protocol.codec import message_codec
from protocol.errors import DecodeError

API_VERSIONS = 18
_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_SIZE_CORR = struct.Struct(">ii")
_FIXED_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _flexible(api_key: int, api_version: int) -> bool:
    # flexibleVersions stay open-ended ("9+") in our schemas, so this is also right for versions
    # above the ones we serve (e.g. ApiVersions v5 from a newer client): it knows the header shape.
    try:
        return schema.request_message(api_key).flexible(api_version)
    except KeyError:
        return False


@functools.lru_cache(maxsize=4096)
def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible request versions, else 1 (v0 only served ControlledShutdown v0, gone in Kafka 4)."""
    return 2 if _flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions responses always use v0 (clients parse them
    before they know what the broker supports)."""
    if api_key == API_VERSIONS:
        return 0
    return 1 if _flexible(api_key, api_version) else 0


def decode_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Decode the header at the start of `frame`; return it and the offset of the body.

    An unknown api key is decoded as header v1 (its tagged fields, if any, are not parsed); the
    four fields are readable in every header version.
    """
    if len(frame) < 8:
        raise DecodeError(f"request frame of {len(frame)} bytes is too short for a header")
    fast = _decode_common_header(frame)
    if fast is not None:
        return fast
    api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    value, offset = message_codec("RequestHeader", request_header_version(api_key, api_version)).decode_prefix(frame)
    header = RequestHeader(value.request_api_key, value.request_api_version, value.correlation_id, value.client_id)
    return header, offset


def _decode_common_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int] | None:
    """The header every request on the hot path has (a client id, no header tags), read with one struct call.

    The generated codec costs several microseconds per request; anything unusual (null client id, header
    tagged fields, short frames) returns None and goes through the codec, which stays the reference.
    """
    if len(frame) < 10:
        return None
    api_key, api_version, correlation_id, id_len = _FIXED_HEADER.unpack_from(frame, 0)
    end = 10 + id_len
    if id_len < 0 or end > len(frame):
        return None
    client_id = bytes(frame[10:end]).decode("utf-8", "replace")  # lenient, as Kafka's (Java's) decoding
    if request_header_version(api_key, api_version) == 2:
        if end >= len(frame) or frame[end] != 0:
            return None  # header tagged fields present (or missing): let the codec handle it
        end += 1
    return RequestHeader(api_key, api_version, correlation_id, client_id), end


def encode_request_header(header: RequestHeader) -> bytes:
    version = request_header_version(header.api_key, header.api_version)
    return message_codec("RequestHeader", version).encode({
        "request_api_key": header.api_key,
        "request_api_version": header.api_version,
        "correlation_id": header.correlation_id,
        "client_id": header.client_id,
    })


def encode_request(header: RequestHeader, body: bytes) -> bytes:
    """A whole request frame, size prefix included (for tests, tools and benchmarks)."""
    head = encode_request_header(header)
    return _SIZE.pack(len(head) + len(body)) + head + body


def encode_response(correlation_id: int, header_version: int, body: bytes | bytearray | memoryview) -> bytes:
    """A whole response frame: size prefix, header v0 (correlation id) or v1 (+ empty tagged fields)."""
    if header_version == 0:
        return _SIZE_CORR.pack(4 + len(body), correlation_id) + body
    if header_version == 1:
        return _SIZE_CORR.pack(5 + len(body), correlation_id) + b"\x00" + body
    raise ValueError(f"no response header version {header_version}")


def encode_response_chunks(correlation_id: int, header_version: int, body: list[bytes | bytearray | memoryview]
                           ) -> list[bytes | bytearray | memoryview]:
    """A whole response frame as a list of buffers (see Codec.encode_chunks): size prefix and header, then the
    body's chunks as they are (a vectored write sends them; nothing is joined)."""
    return [encode_response_header(correlation_id, header_version, sum(len(c) for c in body)), *body]


def encode_response_header(correlation_id: int, header_version: int, body_size: int) -> bytes:
    """Size prefix and header only, for responses whose body is sent separately (sendfile)."""
    if header_version == 0:
        return _SIZE_CORR.pack(4 + body_size, correlation_id)
    if header_version == 1:
        return _SIZE_CORR.pack(5 + body_size, correlation_id) + b"\x00"
    raise ValueError(f"no response header version {header_version}")


def decode_response_header(frame: bytes | bytearray | memoryview, header_version: int) -> tuple[int, int]:
    """(correlation_id, body offset) of a response frame without its size prefix."""
    value, offset = message_codec("ResponseHeader", header_version).decode_prefix(frame)
    return value.correlation_id, offset


class FrameSizeError(DecodeError):
    """A size prefix below 0 or above the frame size limit (the connection cannot be read further)."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"invalid frame size {size}")
        self.size = size
        self.max_size = max_size


def frame_size(buffer: bytes | bytearray | memoryview, max_size: int, pos: int = 0) -> int | None:
    """The size of the frame whose prefix starts at `pos`, None until the 4 prefix bytes are there;
    FrameSizeError for a size below 0 or above `max_size`."""
    if len(buffer) - pos < 4:
        return None
    size: int = _SIZE.unpack_from(buffer, pos)[0]
    if size < 0 or size > max_size:
        raise FrameSizeError(size, max_size)
    return size


def lone_frame_size(data: bytes | bytearray | memoryview, max_size: int) -> int | None:
    """The frame size when `data` is exactly one valid frame (the common read: the caller takes the frame
    from `data` itself, uncopied), else None (incomplete, several frames, or an invalid size)."""
    if len(data) < 4:
        return None
    (size,) = _SIZE.unpack_from(data, 0)
    return size if size + 4 == len(data) and 0 <= size <= max_size else None


class FrameSplitter:
    """Size-prefixed frames out of a byte stream (sans-IO): `feed()` received bytes, then take whole frames with
    `pop()` once `frame_size()` says the first one is whole. The limit is passed per call because a
    connection's may change (SASL: smaller until authenticated). Bytes stay buffered until popped, so the
    caller decides when a frame may be taken (connection bounds) and `len()` is what the connection holds."""

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = bytearray()  # whole frames and at most one partial frame; read-only for callers

    def __len__(self) -> int:
        return len(self.buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self.buffer += data

    def frame_size(self, max_size: int) -> int | None:
        """The size of the first frame once it is whole, None until then; FrameSizeError for an invalid size
        (as soon as the prefix is in)."""
        buf = self.buffer
        if len(buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, 0)
        if size < 0 or size > max_size:  # frame_size()'s check, inlined: this runs once per request
            raise FrameSizeError(size, max_size)
        return size if len(buf) - 4 >= size else None

    def has_frame(self) -> bool:
        """The first frame is whole (its size not checked against any limit)."""
        buf = self.buffer
        return len(buf) >= 4 and len(buf) - 4 >= _SIZE.unpack_from(buf, 0)[0]

    def missing(self) -> int:
        """Bytes still to come of the first frame: its declared size (prefix included) less what is buffered; 0
        when it is whole or its prefix is not in yet. A negative size counts as 0 (frame_size() refuses it)."""
        buf = self.buffer
        if len(buf) < 4:
            return 0
        size: int = _SIZE.unpack_from(buf, 0)[0]
        return max(0, 4 + size - len(buf))

    def pop(self, size: int) -> bytes | memoryview:
        """Remove the first frame (of `size` bytes, whole) and return it without its prefix: the buffer itself
        when the frame is all it holds (no copy), else a copy."""
        buf = self.buffer
        if len(buf) == size + 4:
            self.buffer = bytearray()
            return memoryview(buf)[4:]
        frame = bytes(memoryview(buf)[4:4 + size])
        del buf[:4 + size]
        return frame

    def clear(self) -> None:
        self.buffer = bytearray()


def split_frames(buffer: bytes | bytearray | memoryview, max_size: int = 100 * 1024 * 1024) -> tuple[list[memoryview], int]:
    """Complete size-prefixed frames at the start of `buffer` and the number of bytes they used."""
    view = memoryview(buffer)
    frames = []
    pos = 0
    while (size := frame_size(view, max_size, pos)) is not None and len(view) - pos - 4 >= size:
        frames.append(view[pos + 4:pos + 4 + size])
        pos += 4 + size
    return frames, pos
