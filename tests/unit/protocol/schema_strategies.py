"""Hypothesis strategies generated from the schema model: a valid value for (message, version)."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from protocol.schema import INT_RANGES, Field, Message, Struct

_SMALL_TEXT = st.text(max_size=12)
_SMALL_BYTES = st.binary(max_size=24)
_UUIDS = st.builds(uuid.UUID, int=st.integers(0, (1 << 128) - 1))


def _scalar(t: str) -> st.SearchStrategy[Any]:
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]))
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return _SMALL_TEXT
    if t == "uuid":
        return _UUIDS
    if t in ("bytes", "records"):
        return _SMALL_BYTES
    raise ValueError(t)


class _Gen:
    def __init__(self, message: Message, version: int) -> None:
        self.version = version

    def struct(self, struct: Struct, depth: int) -> st.SearchStrategy[dict[str, Any]]:
        fields = {f.key: self.field(f, depth) for f in struct.fields if f.present(self.version)}
        return st.fixed_dictionaries(fields)

    def field(self, f: Field, depth: int) -> st.SearchStrategy[Any]:
        if f.is_array:
            elem = self.struct(f.struct, depth + 1) if f.struct is not None else _scalar(f.element_type)
            s: st.SearchStrategy[Any] = st.lists(elem, max_size=3 if depth < 2 else 1)
        elif f.struct is not None:
            s = self.struct(f.struct, depth + 1)
        else:
            s = _scalar(f.type)
        if f.nullable(self.version):
            s = st.one_of(st.none(), s)
        return s


_CACHE: dict[tuple[int, int], st.SearchStrategy[dict[str, Any]]] = {}


def value_strategy(message: Message, version: int) -> st.SearchStrategy[dict[str, Any]]:
    key = (id(message), version)
    if key not in _CACHE:
        _CACHE[key] = _Gen(message, version).struct(message.struct, 0)
    return _CACHE[key]


def assert_matches(decoded: Any, expected: Any, path: str = "") -> None:
    """decoded (which also carries absent-at-this-version fields) agrees with expected on its keys."""
    if isinstance(expected, dict):
        assert isinstance(decoded, dict), f"{path}: {decoded!r} is not a struct"
        for k, v in expected.items():
            assert k in decoded, f"{path}.{k} missing"
            assert_matches(decoded[k], v, f"{path}.{k}")
    elif isinstance(expected, list):
        assert isinstance(decoded, list) and len(decoded) == len(expected), f"{path}: {decoded!r} != {expected!r}"
        for i, (d, e) in enumerate(zip(decoded, expected, strict=True)):
            assert_matches(d, e, f"{path}[{i}]")
    else:
        assert decoded == expected, f"{path}: {decoded!r} != {expected!r}"
