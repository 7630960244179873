"""Kafka wire primitives: readers/writers plus compilable construct classes wrapping them.

Readers take a `Reader` (a cursor over the frame that knows its end and copies nothing) and raise
DecodeError on short or invalid input; writers take any binary stream. The construct classes (`Prim`,
`KArray`, `KNullableStruct`) emit calls to these same functions from `_emitparse`/`_emitbuild`, so
compiled and interpreted codecs share one implementation of each encoding.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, cast

from construct import Construct

from protocol.errors import DecodeError, EncodeError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
MAX_STRING = 0x7FFF  # Kafka rejects longer strings (int16 length, and compact strings too)


class Reader:
    """A read cursor over one frame that never copies it: `read(n)` hands out slices of a read-only memoryview
    (bytes when given bytes), and the bytes/records field readers return copies of their field only, or, with
    `views=True`, slices of the frame (zero copy: a ShareFetch response's record batches stay in the buffer they
    were received into; such a slice keeps the whole frame alive). `end` lets length checks reject counts larger
    than what is left. Only what the codec uses of a stream is here: read, tell, seek."""

    __slots__ = ("buf", "pos", "end", "views")

    def __init__(self, data: bytes | bytearray | memoryview, views: bool = False) -> None:
        if type(data) is bytes and not views:
            self.buf: bytes | memoryview = data  # slices of small fields copy bytes anyway
        else:
            view = memoryview(data)
            if view.format != "B" or view.ndim != 1:
                view = view.cast("B")
            self.buf = view.toreadonly()
        self.pos = 0
        self.end = len(self.buf)
        self.views = views

    def read(self, n: int = -1) -> bytes | memoryview:
        """Up to `n` bytes (all that is left if n < 0): fewer only at the end, as a stream's read."""
        p = self.pos
        q = p + n
        if n < 0 or q > self.end:
            q = self.end
        self.pos = q
        return self.buf[p:q]

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 1:
            pos += self.pos
        elif whence == 2:
            pos += self.end
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self.pos = pos  # past the end reads nothing, as BytesIO
        return pos

    def remaining(self) -> int:
        return self.end - self.pos


def read_exact(r: Reader, n: int) -> bytes | memoryview:
    """The next `n` bytes as a slice of the frame (memoryview, or bytes for a bytes frame)."""
    p = r.pos
    q = p + n
    if q > r.end or n < 0:
        raise DecodeError(f"truncated: wanted {n} bytes, got {max(0, r.end - p)}")
    r.pos = q
    return r.buf[p:q]


def _read_field(r: Reader, n: int) -> bytes | memoryview:
    """A bytes field's value: its own copy, or with `views` a slice of the frame."""
    data = read_exact(r, n)
    if r.views or type(data) is bytes:
        return data
    return bytes(data)


# --- varints ---------------------------------------------------------------------------------

def read_uvarint_io(r: Reader) -> int:
    """Unsigned LEB128 from a Reader, at most 5 bytes (Kafka's 32-bit varint)."""
    p = r.pos
    if p >= r.end:
        raise DecodeError("truncated varint")
    buf = r.buf
    x = buf[p]
    if x < 0x80:
        r.pos = p + 1
        return x
    if p + 1 < r.end and buf[p + 1] < 0x80:  # two bytes: up to 16 383
        r.pos = p + 2
        return (x & 0x7F) | (buf[p + 1] << 7)
    value, r.pos = read_uvarint(buf, p)  # r.end is the buffer's end
    return value


def read_uvarint(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Unsigned varint from a buffer at `pos`; returns (value, position after it)."""
    result = 0
    shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        x = data[pos]
        pos += 1
        result |= (x & 0x7F) << shift
        if x < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise DecodeError("varint is too long")


_ONE_BYTE = tuple(bytes((n,)) for n in range(0x80))  # the varints of 0..127


def write_uvarint(n: int) -> bytes:
    """Unsigned varint bytes for n (0 <= n < 2**32)."""
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    if n < 0 or n >= 1 << 32:
        raise EncodeError(f"unsigned varint cannot encode {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# --- bool / uuid -----------------------------------------------------------------------------

def read_bool(r: Reader) -> bool:
    p = r.pos
    if p >= r.end:
        raise DecodeError("truncated bool")
    r.pos = p + 1
    return r.buf[p] != 0


def write_bool(w: BinaryIO, v: bool) -> None:
    if not isinstance(v, bool | int):
        raise EncodeError(f"bool field given {v!r}")
    w.write(b"\x01" if v else b"\x00")


# Decoded ids, one object per value: the same topic id arrives in every request (a UUID is built by a Python
# __init__), and dictionaries keyed by it compare an identical key without calling UUID.__eq__.
_UUIDS: dict[bytes, uuid.UUID] = {}
_UUIDS_MAX = 1 << 14  # cleared beyond this (ids are few: topics, mostly)


def read_uuid(r: Reader) -> uuid.UUID:
    raw = bytes(read_exact(r, 16))
    found = _UUIDS.get(raw)
    if found is None:
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        found = _UUIDS[raw] = uuid.UUID(bytes=raw)
    return found


def write_uuid(w: BinaryIO, v: uuid.UUID) -> None:
    w.write(v.bytes)


# --- strings ---------------------------------------------------------------------------------

def _decode_str(data: bytes | memoryview) -> str:
    # As Java's new String(bytes, UTF_8) in Kafka's readers: malformed UTF-8 becomes U+FFFD, never an error
    return str(data, "utf-8", "replace")


def read_nullable_string(r: Reader) -> str | None:
    p = r.pos
    if p + 2 > r.end:
        raise DecodeError("truncated string length")
    n = _I16.unpack_from(r.buf, p)[0]
    r.pos = p + 2
    if n < 0:
        return None  # any negative length is null, as in Kafka's readers
    return _decode_str(read_exact(r, n))


def read_string(r: Reader) -> str:
    s = read_nullable_string(r)
    if s is None:
        raise DecodeError("null in a non-nullable string field")
    return s


def read_compact_length(r: Reader) -> int:
    """A compact length (unsigned varint N+1) as Kafka's readers see it: the varint is a 32-bit Java int, so
    values of 2^31 and more are negative, and any negative length means null."""
    v = read_uvarint_io(r) & 0xFFFFFFFF
    return (v - (1 << 32) if v >= 1 << 31 else v) - 1


def read_compact_nullable_string(r: Reader) -> str | None:
    p = r.pos
    x = r.buf[p] if p < r.end else 0
    if 0 < x < 0x80 and p + x <= r.end:
        # a one-byte length (below 127), not null, and the bytes are there: the usual string, read without the
        # length and slice calls below (anything else takes them, and their errors)
        r.pos = p + x
        return _decode_str(r.buf[p + 1:p + x])
    n = read_compact_length(r)
    if n < 0:
        return None
    if n > MAX_STRING:
        raise DecodeError(f"string length {n} is too long")
    return _decode_str(read_exact(r, n))


def read_compact_string(r: Reader) -> str:
    s = read_compact_nullable_string(r)
    if s is None:
        raise DecodeError("null in a non-nullable string field")
    return s


def _encode_str(v: str) -> bytes:
    data = v.encode("utf-8")
    if len(data) > MAX_STRING:
        raise EncodeError(f"string of {len(data)} bytes is too long")
    return data


def _encode_message(v: str) -> bytes:
    """An informational message (a response's ErrorMessage, which may quote a client's 32 767-byte name) cut to
    the string limit, so the response carries its error code instead of failing to encode."""
    data = v.encode("utf-8")
    if len(data) > MAX_STRING:
        data = data[:MAX_STRING - 3].decode("utf-8", "ignore").encode("utf-8") + b"..."
    return data


def write_nullable_message(w: BinaryIO, v: str | None) -> None:
    if v is None:
        w.write(b"\xff\xff")
        return
    data = _encode_message(v)
    w.write(_I16.pack(len(data)))
    w.write(data)


def write_message(w: BinaryIO, v: str) -> None:
    if v is None:
        raise EncodeError("null given for a non-nullable string field")
    write_nullable_message(w, v)


def write_compact_nullable_message(w: BinaryIO, v: str | None) -> None:
    if v is None:
        w.write(b"\x00")
        return
    data = _encode_message(v)
    w.write(write_uvarint(len(data) + 1))
    w.write(data)


def write_compact_message(w: BinaryIO, v: str) -> None:
    if v is None:
        raise EncodeError("null given for a non-nullable string field")
    write_compact_nullable_message(w, v)


def write_nullable_string(w: BinaryIO, v: str | None) -> None:
    if v is None:
        w.write(b"\xff\xff")
        return
    data = _encode_str(v)
    w.write(_I16.pack(len(data)))
    w.write(data)


def write_string(w: BinaryIO, v: str) -> None:
    if v is None:
        raise EncodeError("null given for a non-nullable string field")
    write_nullable_string(w, v)


def write_compact_nullable_string(w: BinaryIO, v: str | None) -> None:
    if v is None:
        w.write(b"\x00")
        return
    data = _encode_str(v)
    w.write(write_uvarint(len(data) + 1))
    w.write(data)


def write_compact_string(w: BinaryIO, v: str) -> None:
    if v is None:
        raise EncodeError("null given for a non-nullable string field")
    write_compact_nullable_string(w, v)


# --- bytes (also records: bytes on the wire, decoded as bytes, or memoryview slices with views) --------

def read_nullable_bytes(r: Reader) -> bytes | memoryview | None:
    p = r.pos
    if p + 4 > r.end:
        raise DecodeError("truncated bytes length")
    n = _I32.unpack_from(r.buf, p)[0]
    r.pos = p + 4
    if n < 0:
        return None  # any negative length is null, as in Kafka's readers
    return _read_field(r, n)


def read_bytes(r: Reader) -> bytes | memoryview:
    v = read_nullable_bytes(r)
    if v is None:
        raise DecodeError("null in a non-nullable bytes field")
    return v


def read_compact_nullable_bytes(r: Reader) -> bytes | memoryview | None:
    n = read_compact_length(r)
    if n < 0:
        return None
    return _read_field(r, n)


def read_compact_bytes(r: Reader) -> bytes | memoryview:
    v = read_compact_nullable_bytes(r)
    if v is None:
        raise DecodeError("null in a non-nullable bytes field")
    return v


class BytesParts:
    """A bytes or records field's value given in parts (say, views of several log reads): encoded as their
    concatenation, each part written as it is, so that an encoding into chunks (see ChunkWriter)
    keeps the large ones by reference instead of joining them into a copy."""

    __slots__ = ("parts", "nbytes")

    def __init__(self, parts: Iterable[bytes | bytearray | memoryview]) -> None:
        self.parts = tuple(parts)
        self.nbytes = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in self.parts)

    def __len__(self) -> int:
        return self.nbytes

    def join(self) -> bytes:
        return b"".join(self.parts)


class ChunkWriter(io.BytesIO):
    """A write target for encoding that keeps large buffers by reference: every write goes into the BytesIO
    (C-level: an encoding makes dozens), while the bytes writers hand a value of at least `min_chunk` bytes (a
    partition's record batches) to `chunk`, which keeps it as a chunk of its own. A response can then be sent as
    the list of chunks (vectored write) without copying its records into one buffer."""

    __slots__ = ("_chunks", "min_chunk")

    def __init__(self, min_chunk: int) -> None:
        super().__init__()
        self._chunks: list[tuple[int, bytes | bytearray | memoryview]] = []  # (where in the small bytes, chunk)
        self.min_chunk = min_chunk

    def chunk(self, data: bytes | bytearray | memoryview) -> None:
        self._chunks.append((self.tell(), data))

    def chunks(self) -> list[bytes | bytearray | memoryview]:
        small = self.getvalue()
        out: list[bytes | bytearray | memoryview] = []
        at = 0
        for pos, data in self._chunks:
            if pos > at:
                out.append(small[at:pos])
                at = pos
            out.append(data)
        if at < len(small):
            out.append(small[at:])
        return out


def _blen(v: Any) -> int:
    if isinstance(v, memoryview):
        return v.nbytes
    if isinstance(v, bytes | bytearray | BytesParts):
        return len(v)
    raise EncodeError(f"bytes field given {type(v).__name__}")


def _write_value(w: BinaryIO, v: bytes | memoryview | BytesParts) -> None:
    parts = v.parts if isinstance(v, BytesParts) else (v,)
    if type(w) is ChunkWriter:
        for part in parts:
            if len(part) >= w.min_chunk:  # bytes-like of bytes: elements are bytes
                w.chunk(part)
            else:
                w.write(part)
    else:
        for part in parts:
            w.write(part)


def write_nullable_bytes(w: BinaryIO, v: bytes | memoryview | BytesParts | None) -> None:
    if v is None:
        w.write(b"\xff\xff\xff\xff")
        return
    w.write(_I32.pack(_blen(v)))
    _write_value(w, v)


def write_bytes(w: BinaryIO, v: bytes | memoryview) -> None:
    if v is None:
        raise EncodeError("null given for a non-nullable bytes field")
    write_nullable_bytes(w, v)


def write_compact_nullable_bytes(w: BinaryIO, v: bytes | memoryview | BytesParts | None) -> None:
    if v is None:
        w.write(b"\x00")
        return
    w.write(write_uvarint(_blen(v) + 1))
    _write_value(w, v)


def write_compact_bytes(w: BinaryIO, v: bytes | memoryview) -> None:
    if v is None:
        raise EncodeError("null given for a non-nullable bytes field")
    write_compact_nullable_bytes(w, v)


# --- array lengths -----------------------------------------------------------------------------

def read_array_len(r: Reader, min_element: int = 1) -> int:
    """int32 count; negative for null (as Kafka's readers). A count whose elements cannot fit in the bytes left
    is malformed before anything is allocated (Kafka checks one byte per element; `min_element` is the smallest
    encoding of one element, at least 1)."""
    p = r.pos
    if p + 4 > r.end:
        raise DecodeError("truncated array length")
    n: int = _I32.unpack_from(r.buf, p)[0]
    r.pos = p = p + 4
    if n > 0 and n * min_element > r.end - p:
        raise DecodeError(f"array of {n} elements but only {r.end - p} bytes left")
    return n


def read_compact_array_len(r: Reader, min_element: int = 1) -> int:
    n = read_compact_length(r)
    if n > 0 and n * min_element > r.end - r.pos:
        raise DecodeError(f"array of {n} elements but only {r.end - r.pos} bytes left")
    return n


def write_array_len(w: BinaryIO, n: int) -> None:
    w.write(_I32.pack(n))


def write_compact_array_len(w: BinaryIO, n: int) -> None:
    w.write(write_uvarint(n + 1))


# --- tagged fields -----------------------------------------------------------------------------

def write_tagged(w: BinaryIO, tagged: list[tuple[int, bytes]]) -> None:
    """Section = count, then (tag, size, payload) in ascending tag order."""
    w.write(write_uvarint(len(tagged)))
    for tag, payload in tagged:
        w.write(write_uvarint(tag))
        w.write(write_uvarint(len(payload)))
        w.write(payload)


def skip_tagged(r: Reader) -> None:
    for _ in range(read_uvarint_io(r)):
        read_uvarint_io(r)
        read_exact(r, read_uvarint_io(r))


def check_consumed(r: Reader, what: str) -> None:
    if r.pos != r.end:
        raise DecodeError(f"{r.end - r.pos} unread bytes in {what}")


# --- construct classes ---------------------------------------------------------------------------

# Names the generated (compiled) code needs from this module.
_EXPORTS = (
    "Reader", "DecodeError", "EncodeError", "read_exact", "read_uvarint_io", "write_uvarint",
    "read_bool", "write_bool", "read_uuid", "write_uuid", "read_string", "read_nullable_string",
    "read_compact_string", "read_compact_nullable_string", "write_string", "write_nullable_string",
    "write_compact_string", "write_compact_nullable_string", "read_bytes", "read_nullable_bytes",
    "read_compact_bytes", "read_compact_nullable_bytes", "write_bytes", "write_nullable_bytes",
    "write_compact_bytes", "write_compact_nullable_bytes", "read_array_len", "read_compact_array_len",
    "write_array_len", "write_compact_array_len", "write_tagged", "skip_tagged", "check_consumed",
    "read_compact_length", "write_message", "write_nullable_message", "write_compact_message",
    "write_compact_nullable_message",
)
_IMPORT = f"from protocol.primitives import {', '.join(_EXPORTS)}"


# The base of the construct classes here and in codec.py: construct's stubs make Construct generic (parsed and built
# types); at run time it is a plain class.
if TYPE_CHECKING:
    ConstructBase = Construct[Any, Any]
else:
    ConstructBase = Construct


class CodeGen(Protocol):
    """What the classes here use of construct's code generator (construct.core.CodeGen, which construct's stubs
    leave out): the generated module's source blocks, fresh ids for its function names, and the objects its
    source refers to by id."""

    linkedinstances: dict[int, Any]

    def append(self, block: str) -> None: ...

    def allocateId(self) -> int: ...


class _Compilable(Protocol):
    """construct's per-construct compiler entry points (cached `_emitparse`/`_emitbuild`), absent from its stubs."""

    def _compileparse(self, code: CodeGen) -> str: ...

    def _compilebuild(self, code: CodeGen) -> str: ...


def compile_parse(sub: Construct[Any, Any], code: CodeGen) -> str:
    """The source expression (on `io`, `this`) that parses one value of `sub` in the generated module."""
    return cast(_Compilable, sub)._compileparse(code)


def compile_build(sub: Construct[Any, Any], code: CodeGen) -> str:
    """The source statement (on `obj`, `io`, `this`) that writes `obj` as `sub` in the generated module."""
    return cast(_Compilable, sub)._compilebuild(code)


class Prim(ConstructBase):
    """A primitive encoded by a reader/writer pair from this module, by name; `min_size` is its shortest
    encoding (for array count checks)."""

    def __init__(self, reader: str, writer: str, min_size: int = 1) -> None:
        super().__init__()
        self.reader = reader
        self.writer = writer
        self.min_size = min_size
        self._read = globals()[reader]
        self._write = globals()[writer]

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        return self._read(stream)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        self._write(stream, obj)
        return obj

    def _emitparse(self, code: CodeGen) -> str:
        code.append(_IMPORT)
        return f"{self.reader}(io)"

    def _emitbuild(self, code: CodeGen) -> str:
        code.append(_IMPORT)
        return f"({self.writer}(io, obj), obj)[1]"


def string_prim(compact: bool, nullable: bool, message: bool = False) -> Prim:
    """message=True: written by the write_*message functions (cut to the string limit, never failing)."""
    prefix = ("compact_" if compact else "") + ("nullable_" if nullable else "")
    return Prim(f"read_{prefix}string", f"write_{prefix}{'message' if message else 'string'}", 1 if compact else 2)


def bytes_prim(compact: bool, nullable: bool) -> Prim:
    name = ("compact_" if compact else "") + ("nullable_" if nullable else "") + "bytes"
    return Prim("read_" + name, "write_" + name, 1 if compact else 4)


BOOL = Prim("read_bool", "write_bool", 1)
UUID = Prim("read_uuid", "write_uuid", 16)


class KArray(ConstructBase):
    """Kafka array: int32 count (or compact unsigned varint count+1); -1/0 means null."""

    def __init__(self, subcon: Construct[Any, Any], compact: bool, nullable: bool, min_element: int = 1) -> None:
        super().__init__()
        self.subcon = subcon
        self.compact = compact
        self.nullable = nullable
        self.min_element = max(1, min_element)

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        length = read_compact_array_len if self.compact else read_array_len
        n = length(stream, self.min_element)
        if n < 0:
            if not self.nullable:
                raise DecodeError("null in a non-nullable array field")
            return None
        return [self.subcon._parse(stream, context, path) for _ in range(n)]

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if obj is None:
            if not self.nullable:
                raise EncodeError("null given for a non-nullable array field")
            stream.write(b"\x00" if self.compact else b"\xff\xff\xff\xff")
            return obj
        (write_compact_array_len if self.compact else write_array_len)(stream, len(obj))
        for item in obj:
            self.subcon._build(item, stream, context, path)
        return obj

    def _emitparse(self, code: CodeGen) -> str:
        code.append(_IMPORT)
        fname = f"parse_karray_{code.allocateId()}"
        length = "read_compact_array_len" if self.compact else "read_array_len"
        null = "return None" if self.nullable else 'raise DecodeError("null in a non-nullable array field")'
        code.append(f"""
            def {fname}(io, this):
                n = {length}(io, {self.min_element})
                if n < 0:
                    {null}
                return [{compile_parse(self.subcon, code)} for _ in range(n)]
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code: CodeGen) -> str:
        code.append(_IMPORT)
        fname = f"build_karray_{code.allocateId()}"
        length = "write_compact_array_len" if self.compact else "write_array_len"
        nullbytes = repr(b"\x00" if self.compact else b"\xff\xff\xff\xff")
        null = (f"io.write({nullbytes})\n                    return None" if self.nullable
                else 'raise EncodeError("null given for a non-nullable array field")')
        code.append(f"""
            def {fname}(obj, io, this):
                if obj is None:
                    {null}
                {length}(io, len(obj))
                for obj in obj:
                    {compile_build(self.subcon, code)}
                return None
        """)
        return f"{fname}(obj, io, this)"


class KNullableStruct(ConstructBase):
    """A nullable (non-array) struct: int8 marker -1 for null, 1 then the struct."""

    def __init__(self, subcon: Construct[Any, Any]) -> None:
        super().__init__()
        self.subcon = subcon

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        marker = read_exact(stream, 1)
        if _I8.unpack(marker)[0] < 0:
            return None
        return self.subcon._parse(stream, context, path)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if obj is None:
            stream.write(b"\xff")
        else:
            stream.write(b"\x01")
            self.subcon._build(obj, stream, context, path)
        return obj

    def _emitparse(self, code: CodeGen) -> str:
        code.append(_IMPORT)
        fname = f"parse_knullable_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                if read_exact(io, 1)[0] >= 0x80:
                    return None
                return {compile_parse(self.subcon, code)}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code: CodeGen) -> str:
        code.append(_IMPORT)
        fname = f"build_knullable_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                if obj is None:
                    io.write(b"\\xff")
                    return None
                io.write(b"\\x01")
                {compile_build(self.subcon, code)}
        """)
        return f"{fname}(obj, io, this)"
