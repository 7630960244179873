"""Schema model: parse protocol/schemas/messages and protocol/schemas/records (Kafka's JSON shape) into objects.

A Message has a top-level Struct; Structs hold Fields; a Field's type is a primitive name, a
struct (inline or from commonStructs) or an array of either. Version ranges are kept as
`Versions` so codecs can ask "is this field present / nullable / tagged at version v?".

The JSON files are package data of `protocol` and are read with importlib.resources, so an installed
wheel works wherever it is (no checkout layout assumed). A missing or empty schema set fails at import
with SchemaSetError rather than later as a KeyError deep inside the broker.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

SCHEMA_KINDS = ("messages", "records")


class SchemaSetError(RuntimeError):
    """The JSON schema definitions are missing or empty (a broken install)."""


def _json_files(directory: Traversable) -> list[Traversable]:
    return sorted((p for p in directory.iterdir() if p.is_file() and p.name.endswith(".json")),
                  key=lambda p: p.name)


def check_schema_set(root: Traversable) -> Traversable:
    """Return `root` if it holds messages/*.json and records/*.json; raise SchemaSetError otherwise."""
    for kind in SCHEMA_KINDS:
        directory = root / kind
        if not directory.is_dir():
            raise SchemaSetError(f"schema directory {directory} is missing: the installation of the "
                                 "'protocol' package is incomplete (reinstall shoal)")
        if not _json_files(directory):
            raise SchemaSetError(f"schema directory {directory} holds no *.json definitions: the "
                                 "installation of the 'protocol' package is incomplete (reinstall shoal)")
    return root


# protocol/schemas/ as package data; checked here so a broken install fails at import, loudly.
SCHEMA_DIR: Traversable = check_schema_set(resources.files("protocol") / "schemas")

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
     "string", "uuid", "bytes", "records"}
)
INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class Versions:
    """Inclusive version range; hi=None means open-ended ("3+"); empty() is "none"."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text.strip() == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)

    def empty(self) -> bool:
        return self.hi is not None and self.hi < self.lo

    def __str__(self) -> str:
        if self.empty():
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


NONE = Versions(0, -1)

_SNAKE_1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SNAKE_2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


@functools.cache
def snake_case(name: str) -> str:
    """Kafka field name to Python key: ThrottleTimeMs -> throttle_time_ms, ISRNodes -> isr_nodes."""
    return _SNAKE_1.sub("_", _SNAKE_2.sub("_", name)).lower()


@dataclass
class Field:
    name: str
    type: str  # as written: "int32", "[]string", "[]Topic", "LeaderIdAndEpoch"
    versions: Versions
    nullable_versions: Versions = NONE
    tagged_versions: Versions = NONE
    tag: int | None = None
    default: Any = None  # raw JSON "default", None if absent
    map_key: bool = False
    entity_type: str | None = None
    ignorable: bool = False
    # Field-level override of the message's flexibleVersions (only RequestHeader.ClientId uses it).
    flexible_versions: Versions | None = None
    struct: Struct | None = None  # resolved for struct and []struct types

    @property
    def key(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.struct is not None

    def present(self, version: int) -> bool:
        return version in self.versions

    def nullable(self, version: int) -> bool:
        return version in self.nullable_versions

    def tagged(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions

    def default_value(self, version: int) -> Any:
        """Kafka's default for this field: explicit "default", else zero/empty/null-for-structs."""
        raw = self.default
        if self.is_array:
            return None if raw == "null" else []
        if self.struct is not None:
            if raw == "null" or self.nullable(version):
                return None if raw == "null" else self.struct.default_value(version)
            return self.struct.default_value(version)
        t = self.type
        if raw == "null":
            return None
        if t in INT_RANGES:
            if raw is None or raw == "":
                return 0
            return int(raw, 0) if isinstance(raw, str) else int(raw)
        if t == "float64":
            return float(raw) if raw not in (None, "") else 0.0
        if t == "bool":
            return raw is True or raw == "true"
        if t == "string":
            return "" if raw is None else str(raw)
        if t == "uuid":
            return ZERO_UUID if raw in (None, "") else uuid.UUID(raw)
        if t == "bytes":
            return b""
        if t == "records":
            return None
        raise ValueError(f"unknown type {t!r} for field {self.name}")


@dataclass
class Struct:
    name: str
    fields: list[Field] = field(default_factory=list)

    def default_value(self, version: int) -> dict[str, Any]:
        return {f.key: f.default_value(version) for f in self.fields}


@dataclass
class Message:
    name: str
    type: str  # request, response, header, coordinator-key, coordinator-value, metadata
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    struct: Struct
    common_structs: dict[str, Struct]

    @property
    def min_version(self) -> int:
        return self.valid_versions.lo

    @property
    def max_version(self) -> int:
        hi = self.valid_versions.hi
        assert hi is not None, f"{self.name} validVersions must be closed"
        return hi

    def versions(self) -> range:
        return range(self.min_version, self.max_version + 1)

    def flexible(self, version: int) -> bool:
        return version in self.flexible_versions


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None  # first flexible version, None if no version is flexible


def _parse_fields(raw: list[dict[str, Any]], commons: dict[str, Struct],
                  pending: list[tuple[Field, str]]) -> list[Field]:
    out = []
    for f in raw:
        fld = Field(
            name=f["name"],
            type=f["type"],
            versions=Versions.parse(f["versions"]),
            nullable_versions=Versions.parse(f.get("nullableVersions")),
            tagged_versions=Versions.parse(f.get("taggedVersions")),
            tag=f.get("tag"),
            # JSON null and the string "null" both mean a null default.
            default="null" if "default" in f and f["default"] is None else f.get("default"),
            map_key=bool(f.get("mapKey", False)),
            entity_type=f.get("entityType"),
            ignorable=bool(f.get("ignorable", False)),
            flexible_versions=Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None,
        )
        element = fld.element_type
        if "fields" in f:
            fld.struct = Struct(element, _parse_fields(f["fields"], commons, pending))
        elif element not in PRIMITIVES:
            pending.append((fld, element))  # common struct, resolved once all are parsed
        out.append(fld)
    return out


def parse_message(data: dict[str, Any]) -> Message:
    """Build a Message from one schema file's JSON object."""
    commons: dict[str, Struct] = {}
    pending: list[tuple[Field, str]] = []
    for raw in data.get("commonStructs", []):
        commons[raw["name"]] = Struct(raw["name"])
    for raw in data.get("commonStructs", []):
        commons[raw["name"]].fields = _parse_fields(raw["fields"], commons, pending)
    top = Struct(data["name"], _parse_fields(data["fields"], commons, pending))
    for fld, name in pending:
        if name not in commons:
            raise ValueError(f"{data['name']}: field {fld.name} has unknown type {fld.type!r}")
        fld.struct = commons[name]
    _check_keys(top, data["name"])
    return Message(
        name=data["name"],
        type=data["type"],
        api_key=data.get("apiKey"),
        valid_versions=Versions.parse(data["validVersions"]),
        flexible_versions=Versions.parse(data.get("flexibleVersions", "none")),
        struct=top,
        common_structs=commons,
    )


def _check_keys(struct: Struct, where: str, seen: set[int] | None = None) -> None:
    seen = set() if seen is None else seen
    if id(struct) in seen:
        return
    seen.add(id(struct))
    keys = [f.key for f in struct.fields]
    if len(keys) != len(set(keys)):
        raise ValueError(f"{where}.{struct.name}: field names collide after snake_case: {keys}")
    for f in struct.fields:
        if f.struct is not None:
            _check_keys(f.struct, where, seen)


def load_message(path: Traversable) -> Message:
    return parse_message(json.loads(path.read_text(encoding="utf-8")))


def schema_files(kind: str) -> list[Traversable]:
    """The JSON files of one kind ("messages" or "records"), sorted by name."""
    return _json_files(SCHEMA_DIR / kind)


@functools.cache
def messages() -> dict[str, Message]:
    """All schemas/messages/*.json by name (e.g. "ProduceRequest", "RequestHeader")."""
    return {p.name.removesuffix(".json"): load_message(p) for p in schema_files("messages")}


@functools.cache
def records() -> dict[str, Message]:
    """All schemas/records/*.json by name (e.g. "ShareSnapshotValue", "TopicRecord")."""
    return {p.name.removesuffix(".json"): load_message(p) for p in schema_files("records")}


@functools.cache
def _by_api_key() -> dict[tuple[int, str], Message]:
    return {(m.api_key, m.type): m for m in messages().values()
            if m.type in ("request", "response") and m.api_key is not None}


def request_message(api_key: int) -> Message:
    """The request schema for api_key; KeyError if we have none."""
    return _by_api_key()[(api_key, "request")]


def response_message(api_key: int) -> Message:
    return _by_api_key()[(api_key, "response")]


@functools.cache
def api_specs() -> dict[int, ApiSpec]:
    """api_key -> ApiSpec for every API with request and response schemas (the versions we serve)."""
    specs = {}
    for (api_key, kind), req in sorted(_by_api_key().items()):
        if kind != "request":
            continue
        resp = response_message(api_key)
        if (req.min_version, req.max_version) != (resp.min_version, resp.max_version):
            raise ValueError(f"{req.name} and {resp.name} disagree on validVersions")
        flex = req.flexible_versions
        specs[api_key] = ApiSpec(
            api_key=api_key,
            name=req.name.removesuffix("Request"),
            min_version=req.min_version,
            max_version=req.max_version,
            flexible_from=None if flex.empty() else max(flex.lo, req.min_version),
        )
    return specs
