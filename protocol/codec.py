"""Codec generator: (schema message, version) -> compiled construct codec.

`build_construct` turns a Message at one version into a tree of construct objects (construct's own
FormatField for fixed-size numbers, our compilable classes for Kafka's variable-length types and
`KStruct` for structs with their tagged-field section). `Codec` compiles that tree once with
construct's `.compile()` and wraps it: decode errors become DecodeError, encode errors EncodeError.
"""

from __future__ import annotations

import copy
import functools
import io
import operator
import uuid
from collections.abc import Callable, Mapping
from typing import IO, Any, BinaryIO, cast

from construct import (
    Compiled,
    Construct,
    Container,
    Float64b,
    FormatField,
    Int8sb,
    Int16sb,
    Int16ub,
    Int32sb,
    Int32ub,
    Int64sb,
)

from protocol import schema
from protocol.errors import DecodeError, EncodeError
from protocol.primitives import (
    _IMPORT,
    BOOL,
    UUID,
    ChunkWriter,
    CodeGen,
    ConstructBase,
    KArray,
    KNullableStruct,
    Prim,
    Reader,
    bytes_prim,
    check_consumed,
    compile_build,
    compile_parse,
    read_exact,
    read_uvarint_io,
    string_prim,
    write_tagged,
)
from protocol.schema import Field, Message, Struct

_FIXED: dict[str, FormatField[Any, Any]] = {
    "int8": Int8sb, "int16": Int16sb, "uint16": Int16ub, "int32": Int32sb, "uint32": Int32ub,
    "int64": Int64sb, "float64": Float64b,
}


def to_container(value: Any) -> Any:
    """Recursively turn dicts into Containers (decoded values are Containers)."""
    if isinstance(value, dict):
        return Container((k, to_container(v)) for k, v in value.items())
    if isinstance(value, list):
        return [to_container(v) for v in value]
    return value


def _as_container(msg: Container[Any]) -> tuple[Any, ...]:
    return Container, (), None, None, iter(msg.items())


@functools.cache
def message_class(keys: tuple[str, ...]) -> type[Container[Any]]:
    """The Container subclass that decoded structs with these keys are: each key is a class-level property, so
    `msg.field` is one item lookup done in C. On a plain Container it first fails Python's attribute lookup (which
    formats an AttributeError message) and then runs construct's `__getattr__` in Python, several thousand
    instructions a field. Keys that name a Container method stay reachable only by `msg[key]`, as before. Such
    values repr, compare, copy and pickle as plain Containers."""
    attrs: dict[str, Any] = {"__slots__": (), "__reduce__": _as_container}
    for key in keys:
        if key.isidentifier() and not key.startswith("_") and not hasattr(Container, key):
            attrs[key] = property(operator.itemgetter(key))
    return type("Message", (Container,), attrs)


def _literal(code: CodeGen, value: Any, fresh: bool) -> str:
    """Source expression for a default value. fresh=True: a new object per evaluation (decode)."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return repr(value)
    if isinstance(value, list):
        return "[]" if fresh else "()"
    if isinstance(value, uuid.UUID):
        code.linkedinstances[id(value)] = value
        return f"linkedinstances[{id(value)}]"
    if isinstance(value, dict):
        if not fresh:
            return "{}"  # building a struct from {} yields its defaults
        items = ", ".join(f"({k!r}, {_literal(code, v, fresh)})" for k, v in value.items())
        return f"Container(({items},))" if value else "Container()"
    raise TypeError(f"no literal for default {value!r}")


def _not_default(code: CodeGen, value: Any) -> str:
    """Condition (on `obj`) under which a tagged field is written: it differs from its default."""
    if value is None:
        return "obj is not None"
    if isinstance(value, list):
        return "obj is None or obj"  # null or non-empty (null differs from an empty default)
    if isinstance(value, dict):
        defaults = value

        def is_default(obj: Any, defaults: dict[str, Any] = defaults) -> bool:
            return obj is None or all(obj.get(k, d) == d for k, d in defaults.items())

        code.linkedinstances[id(is_default)] = is_default
        # an empty mapping (the usual: the key not given) is the default without a call to check it
        return f"obj and not linkedinstances[{id(is_default)}](obj)"
    return f"obj != {_literal(code, value, fresh=False)}"


class KStruct(ConstructBase):
    """A Kafka struct at one version: regular fields in order, then (if flexible) tagged fields.

    Fields absent at this version decode to their defaults, so handlers see every key. On encode
    missing keys take their defaults and tagged fields are written only when not default.
    """

    def __init__(self, name: str, flexible: bool) -> None:
        super().__init__()
        self.struct_name = name
        self.flexible = flexible
        self.regular: list[tuple[str, Construct[Any, Any], Any]] = []  # key, construct, default
        self.absent: list[tuple[str, Any]] = []  # key, default
        self.tagged: list[tuple[int, str, Construct[Any, Any], Any]] = []  # tag, key, construct, default

    def message_class(self) -> type[Container[Any]]:
        """What this struct decodes to (every key set: regular, absent and tagged fields)."""
        return message_class(tuple(k for k, *_ in self.regular) + tuple(k for k, _ in self.absent)
                             + tuple(k for _, k, *_ in self.tagged))

    # Interpreted path (construct's parse()/build() without compile); same semantics.
    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        result = self.message_class()()
        for key, sub, _ in self.regular:
            result[key] = sub._parse(stream, context, path)
        for key, default in self.absent:
            result[key] = to_container(copy.deepcopy(default))
        if self.flexible:
            for _, key, _, default in self.tagged:
                result[key] = to_container(copy.deepcopy(default))
            by_tag = {tag: (key, sub) for tag, key, sub, _ in self.tagged}
            for _ in range(read_uvarint_io(stream)):
                tag = read_uvarint_io(stream)
                data = read_exact(stream, read_uvarint_io(stream))
                if tag in by_tag:
                    key, sub = by_tag[tag]
                    r = Reader(data, stream.views)
                    # a Reader has all of a stream that a sub-construct reads (read, tell, seek)
                    result[key] = sub._parse(cast(IO[bytes], r), context, path)
                    check_consumed(r, f"tag {tag} of {self.struct_name}")
        return result

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        for key, sub, default in self.regular:
            sub._build(obj.get(key, _fresh(default)), stream, context, path)
        if self.flexible:
            tagged = []
            for tag, key, sub, default in self.tagged:
                value = obj.get(key, default)
                if _differs(value, default):
                    buf = io.BytesIO()
                    sub._build(value, buf, context, path)
                    tagged.append((tag, buf.getvalue()))
            write_tagged(stream, tagged)
        return obj

    def _emitparse(self, code: CodeGen) -> str:
        code.append(_IMPORT)
        n = code.allocateId()
        fname = f"parse_kstruct_{n}"
        cls = self.message_class()
        code.linkedinstances[id(cls)] = cls  # bound after the generated module runs: looked up per call
        lines = [f"def {fname}(io, this):", f"    result = linkedinstances[{id(cls)}]()"]
        for i, run in enumerate(_runs(self.regular)):
            if isinstance(run[0][1], FormatField):
                # consecutive fixed-size numbers: one bounds check and one unpack for all of them
                fmt, size = _run_format(run)
                code.append(f"run_{n}_{i} = struct.Struct({fmt!r})")
                targets = ", ".join(f"result[{key!r}]" for key, _, _ in run)
                lines += ["    p = io.pos",
                          f"    if p + {size} > io.end:",
                          f"        raise DecodeError({f'truncated: {self.struct_name} wanted {size} bytes'!r})",
                          f"    {targets}{',' if len(run) == 1 else ''} = run_{n}_{i}.unpack_from(io.buf, p)",
                          f"    io.pos = p + {size}"]
            else:
                (key, sub, _), = run
                lines.append(f"    result[{key!r}] = {compile_parse(sub, code)}")
        for key, default in self.absent:
            lines.append(f"    result[{key!r}] = {_literal(code, default, fresh=True)}")
        if self.flexible:
            for _, key, _, default in self.tagged:
                lines.append(f"    result[{key!r}] = {_literal(code, default, fresh=True)}")
            if self.tagged:
                lines.append(f"    parse_tags_{n}(io, this, result)")
                self._emit_tag_parser(code, n)
            else:
                lines.append("    skip_tagged(io)")
        lines.append("    return result")
        code.append("\n".join(lines))
        return f"{fname}(io, this)"

    def _emit_tag_parser(self, code: CodeGen, n: int) -> None:
        lines = [
            f"def parse_tags_{n}(io, this, result):",
            "    for _ in range(read_uvarint_io(io)):",
            "        tag = read_uvarint_io(io)",
            "        data = read_exact(io, read_uvarint_io(io))",
        ]
        for i, (tag, key, sub, _) in enumerate(self.tagged):
            code.append(f"def parse_tag_{n}_{tag}(io, this):\n    return {compile_parse(sub, code)}")
            lines += [
                f"        {'if' if i == 0 else 'elif'} tag == {tag}:",
                "            sub = Reader(data, io.views)",
                f"            result[{key!r}] = parse_tag_{n}_{tag}(sub, this)",
                f"            check_consumed(sub, {f'tag {tag} of {self.struct_name}'!r})",
            ]
        code.append("\n".join(lines))

    def _emitbuild(self, code: CodeGen) -> str:
        code.append(_IMPORT)
        n = code.allocateId()
        fname = f"build_kstruct_{n}"
        lines = [f"def {fname}(obj, io, this):", "    objdict = obj"]
        for i, run in enumerate(_runs(self.regular)):
            if isinstance(run[0][1], FormatField):
                fmt, _ = _run_format(run)
                code.append(f"brun_{n}_{i} = struct.Struct({fmt!r})")
                values = ", ".join(f"objdict.get({key!r}, {_literal(code, default, fresh=False)})"
                                   for key, _, default in run)
                lines.append(f"    io.write(brun_{n}_{i}.pack({values}))")
            else:
                (key, sub, default), = run
                lines.append(f"    obj = objdict.get({key!r}, {_literal(code, default, fresh=False)})")
                lines.append(f"    {compile_build(sub, code)}")
        if self.flexible:
            if self.tagged:
                lines.append("    tagged = []")
                for tag, key, sub, default in sorted(self.tagged, key=lambda t: t[0]):
                    code.append(f"def build_tag_{n}_{tag}(obj, io, this):\n    {compile_build(sub, code)}")
                    lines += [
                        f"    obj = objdict.get({key!r}, {_literal(code, default, fresh=False)})",
                        f"    if {_not_default(code, default)}:",
                        "        sub = BytesIO()",
                        f"        build_tag_{n}_{tag}(obj, sub, this)",
                        f"        tagged.append(({tag}, sub.getvalue()))",
                    ]
                lines.append("    write_tagged(io, tagged) if tagged else io.write(b'\\x00')")
            else:
                lines.append("    io.write(b'\\x00')")
        lines.append("    return objdict")
        code.append("\n".join(lines))
        return f"{fname}(obj, io, this)"


def _runs(regular: list[tuple[str, Construct[Any, Any], Any]]) -> list[list[tuple[str, Construct[Any, Any], Any]]]:
    """Regular fields in order, grouped: each run of consecutive fixed-size numbers together (read and written with
    one struct), every other field alone."""
    runs: list[list[tuple[str, Construct[Any, Any], Any]]] = []
    for field in regular:
        if isinstance(field[1], FormatField) and runs and isinstance(runs[-1][-1][1], FormatField):
            runs[-1].append(field)
        else:
            runs.append([field])
    return runs


def _run_format(run: list[tuple[str, Construct[Any, Any], Any]]) -> tuple[str, int]:
    """The struct format (big-endian, as each number's own) and byte size of a run of fixed-size numbers."""
    numbers = [cast("FormatField[Any, Any]", sub) for _, sub, _ in run]  # _runs put only FormatFields in a run
    return ">" + "".join(sub.fmtstr.lstrip(">") for sub in numbers), sum(sub.length for sub in numbers)


def _fresh(default: Any) -> Any:
    return {} if isinstance(default, dict) else default


def _differs(value: Any, default: Any) -> bool:
    if default is None:
        return value is not None
    if isinstance(default, list):
        return value is None or bool(value)
    if isinstance(default, dict):
        return value is not None and any(value.get(k, d) != d for k, d in default.items())
    return bool(value != default)


class _Builder:
    """Builds the construct tree for one (message, version); shares one KStruct per struct."""

    def __init__(self, message: Message, version: int) -> None:
        self.message = message
        self.version = version
        self.flexible = message.flexible(version)
        self.structs: dict[int, KStruct] = {}

    def struct(self, struct: Struct) -> KStruct:
        if id(struct) in self.structs:
            return self.structs[id(struct)]
        v = self.version
        k = KStruct(struct.name, self.flexible)
        self.structs[id(struct)] = k
        for f in struct.fields:
            default = f.default_value(v)
            if not f.present(v):
                k.absent.append((f.key, default))
            elif self.flexible and f.tagged(v):
                if f.tag is None:
                    raise ValueError(f"{self.message.name}.{f.name}: taggedVersions without tag")
                k.tagged.append((f.tag, f.key, self.field(f), default))
            else:
                k.regular.append((f.key, self.field(f), default))
        tags = [t for t, *_ in k.tagged]
        if len(tags) != len(set(tags)):
            raise ValueError(f"{self.message.name}.{struct.name}: duplicate tags {tags}")
        return k

    def field(self, f: Field) -> Construct[Any, Any]:
        v = self.version
        flexible = self.flexible
        if f.flexible_versions is not None:
            flexible = v in f.flexible_versions
        nullable = f.nullable(v)
        if f.is_array:
            element = self.element(f, flexible)
            return KArray(element, compact=flexible, nullable=nullable, min_element=min_size(element))
        if f.struct is not None:
            k = self.struct(f.struct)
            return KNullableStruct(k) if nullable else k
        if f.type == "string" and f.name == "ErrorMessage" and self.message.type == "response":
            return string_prim(flexible, nullable, message=True)
        return self.scalar(f.type, flexible, nullable)

    def element(self, f: Field, flexible: bool) -> Construct[Any, Any]:
        if f.struct is not None:
            return self.struct(f.struct)
        return self.scalar(f.element_type, flexible, nullable=False)

    @staticmethod
    def scalar(t: str, flexible: bool, nullable: bool) -> Construct[Any, Any]:
        if t in _FIXED:
            return _FIXED[t]
        if t == "bool":
            return BOOL
        if t == "uuid":
            return UUID
        if t == "string":
            return string_prim(flexible, nullable)
        if t in ("bytes", "records"):
            return bytes_prim(flexible, nullable)
        raise ValueError(f"unsupported type {t!r}")


def min_size(construct: Construct[Any, Any]) -> int:
    """Bytes of the shortest encoding of one value of `construct` (array counts are checked against it)."""
    if isinstance(construct, KStruct):
        return sum(min_size(sub) for _, sub, _ in construct.regular) + (1 if construct.flexible else 0)
    if isinstance(construct, KArray):
        return 1 if construct.compact else 4
    if isinstance(construct, KNullableStruct):
        return 1
    if isinstance(construct, Prim):
        return construct.min_size
    return construct.sizeof()  # fixed-size numbers


def build_construct(message: Message, version: int) -> KStruct:
    """The (uncompiled) construct for `message` at `version`."""
    if version not in message.valid_versions:
        raise ValueError(f"{message.name} has no version {version} (valid {message.valid_versions})")
    return _Builder(message, version).struct(message.struct)


class Codec:
    """Decoder/encoder for one message at one version."""

    __slots__ = ("message", "version", "construct", "compiled", "_parse", "_build")

    def __init__(self, message: Message, version: int) -> None:
        self.message = message
        self.version = version
        self.construct = build_construct(message, version)
        self.compiled = cast(Compiled, self.construct.compile())
        # Call the compiled functions directly: our code needs no construct context (`this` is None), and this
        # lets us pass a Reader (a stream with a known end) for length sanity checks.
        self._parse = cast("Callable[[Reader, None], Container[Any]]", self.compiled.parsefunc)
        self._build = cast("Callable[[Mapping[str, Any], BinaryIO, None], object]", self.compiled.buildfunc)

    def __repr__(self) -> str:
        return f"<Codec {self.message.name} v{self.version}>"

    def decode(self, data: bytes | bytearray | memoryview, *, views: bool = False) -> Container[Any]:
        """Decode exactly `data` (trailing bytes are an error). `views`: bytes and records fields are read-only
        memoryview slices of `data` instead of copies (see primitives.Reader)."""
        value, end = self.decode_prefix(data, views=views)
        if end != len(data):
            raise DecodeError(f"{self.message.name} v{self.version}: {len(data) - end} trailing bytes")
        return value

    def decode_prefix(self, data: bytes | bytearray | memoryview, offset: int = 0, *, views: bool = False
                      ) -> tuple[Container[Any], int]:
        """Decode one value starting at `offset`; returns it and the offset just past it."""
        r = Reader(data, views)
        if offset:
            r.seek(offset)
        try:
            value = self._parse(r, None)
        except DecodeError as e:
            raise DecodeError(f"{self.message.name} v{self.version}: {e}") from None
        except Exception as e:  # struct.error, ValueError, ...: all mean malformed input
            raise DecodeError(f"{self.message.name} v{self.version}: {type(e).__name__}: {e}") from None
        return value, r.tell()

    def encode(self, value: Mapping[str, Any]) -> bytes:
        out = io.BytesIO()
        self.encode_into(value, out)
        return out.getvalue()

    def encode_chunks(self, value: Mapping[str, Any], min_chunk: int = 16384
                      ) -> list[bytes | bytearray | memoryview]:
        """The encoding as a list of buffers whose concatenation is `encode(value)`: fields of at least
        `min_chunk` bytes (record batches) are in it as they were given, not copied (see ChunkWriter)."""
        out = ChunkWriter(min_chunk)
        self.encode_into(value, out)
        return out.chunks()

    def encode_into(self, value: Mapping[str, Any], out: io.BytesIO) -> None:
        try:
            self._build(value, out, None)
        except EncodeError as e:
            raise EncodeError(f"{self.message.name} v{self.version}: {e}") from None
        except Exception as e:
            raise EncodeError(f"{self.message.name} v{self.version}: {type(e).__name__}: {e}") from e


@functools.cache
def request_codec(api_key: int, version: int) -> Codec:
    """Codec for the request body; KeyError for an unknown api key, ValueError for a bad version."""
    return Codec(schema.request_message(api_key), version)


@functools.cache
def response_codec(api_key: int, version: int) -> Codec:
    return Codec(schema.response_message(api_key), version)


@functools.cache
def record_codec(name: str, version: int) -> Codec:
    """Codec for a coordinator/metadata record key or value by schema name (e.g. "ShareUpdateValue")."""
    return Codec(schema.records()[name], version)


@functools.cache
def message_codec(name: str, version: int) -> Codec:
    """Codec for any schemas/messages file by name (e.g. "RequestHeader")."""
    return Codec(schema.messages()[name], version)
