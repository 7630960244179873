"""Round-trip every (api, version) we serve, requests and responses, plus every record schema."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import schema
from protocol.codec import Codec, record_codec, request_codec, response_codec
from tests.unit.protocol.schema_strategies import assert_matches, value_strategy

CASES = [
    pytest.param(kind, spec.api_key, v, id=f"{spec.name}{kind.capitalize()}-v{v}")
    for spec in schema.api_specs().values()
    for v in range(spec.min_version, spec.max_version + 1)
    for kind in ("request", "response")
]
RECORD_CASES = [
    pytest.param(name, v, id=f"{name}-v{v}")
    for name, message in schema.records().items()
    for v in message.versions()
]

SETTINGS = settings(max_examples=6, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _roundtrip(codec: Codec, data: st.DataObject) -> None:
    value = data.draw(value_strategy(codec.message, codec.version))
    encoded = codec.encode(value)
    decoded = codec.decode(encoded)
    assert_matches(decoded, value)
    # decode -> encode is byte-identical (decoded values carry every field, some absent ones)
    assert codec.encode(decoded) == encoded
    # as chunks (vectored responses): the same bytes, whatever the size at which fields are kept whole
    assert b"".join(codec.encode_chunks(value, min_chunk=1)) == encoded
    assert b"".join(codec.encode_chunks(value)) == encoded


@pytest.mark.parametrize(("kind", "api_key", "version"), CASES)
@SETTINGS
@given(data=st.data())
def test_api_roundtrip(kind: str, api_key: int, version: int, data: st.DataObject) -> None:
    codec = (request_codec if kind == "request" else response_codec)(api_key, version)
    _roundtrip(codec, data)


@pytest.mark.parametrize(("name", "version"), RECORD_CASES)
@SETTINGS
@given(data=st.data())
def test_record_roundtrip(name: str, version: int, data: st.DataObject) -> None:
    _roundtrip(record_codec(name, version), data)


@pytest.mark.parametrize(("kind", "api_key", "version"), CASES)
def test_defaults_encode_and_decode(kind: str, api_key: int, version: int) -> None:
    """An empty dict encodes (every field defaulted) and every truncation of it is a DecodeError."""
    from protocol.errors import DecodeError

    codec = (request_codec if kind == "request" else response_codec)(api_key, version)
    encoded = codec.encode({})
    decoded = codec.decode(encoded)
    assert codec.encode(decoded) == encoded
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            codec.decode(encoded[:cut])
