"""Compact strings (read by a one-byte fast path for lengths below 127, the usual case) and array lengths, against
the general varint path, at the boundary and on malformed input."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import DecodeError, EncodeError
from protocol.primitives import (
    Reader,
    read_compact_array_len,
    read_compact_length,
    read_compact_nullable_string,
    read_compact_string,
    read_uvarint,
    write_compact_array_len,
    write_compact_nullable_string,
    write_compact_string,
    write_uvarint,
)


def _written(write, value) -> bytes:
    out = io.BytesIO()
    write(out, value)
    return out.getvalue()


@given(st.one_of(st.none(), st.text(max_size=300)))
def test_compact_strings_round_trip_across_the_one_byte_boundary(value: str | None) -> None:
    data = _written(write_compact_nullable_string, value)
    expected_len = 0 if value is None else len(value.encode()) + 1
    assert read_uvarint(data) == (expected_len, len(write_uvarint(expected_len)))
    r = Reader(data + b"!")
    assert read_compact_nullable_string(r) == value and r.pos == len(data)
    if value is not None:
        assert _written(write_compact_string, value) == data
        assert read_compact_string(Reader(data)) == value


@given(st.integers(-1, 5000))
def test_compact_array_lengths_round_trip(n: int) -> None:
    data = _written(write_compact_array_len, n)
    assert data == write_uvarint(n + 1)
    r = Reader(data + b"\x00" * max(n, 0))
    assert read_compact_array_len(r) == n and r.pos == len(data)
    assert read_compact_length(Reader(data)) == n


@pytest.mark.parametrize("data", [
    b"\x05abc",  # one-byte length 4, three bytes left
    b"\x80\x01" + b"a" * 10,  # two-byte length 127, ten bytes left
])
def test_malformed_compact_strings(data: bytes) -> None:
    with pytest.raises(DecodeError):
        read_compact_nullable_string(Reader(data))


def test_invalid_utf8_is_replaced_as_java_decodes_it() -> None:
    assert read_compact_nullable_string(Reader(b"\x03\xff\xfe")) == "\ufffd\ufffd"


def test_null_and_oversized() -> None:
    assert read_compact_nullable_string(Reader(b"\x00")) is None
    with pytest.raises(DecodeError):
        read_compact_string(Reader(b"\x00"))
    with pytest.raises(EncodeError):
        write_compact_string(io.BytesIO(), "x" * 0x8000)
    with pytest.raises(DecodeError):
        read_compact_array_len(Reader(b"\x05\x00"), 1)  # 4 elements, 1 byte left
