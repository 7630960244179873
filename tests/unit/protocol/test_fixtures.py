"""Requests captured from real clients (tools/capture_requests.py) decode and re-encode byte-identically."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.codec import request_codec
from protocol.framing import decode_request_header, encode_request_header

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.hex"))


def test_fixtures_exist() -> None:
    names = {p.stem for p in FIXTURES}
    assert any(n.startswith("confluent-ApiVersions") for n in names)
    assert any(n.startswith("kafka-python-Produce") for n in names)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_roundtrip(path: Path) -> None:
    frame = bytes.fromhex(path.read_text().strip())
    header, offset = decode_request_header(frame)
    assert header.client_id and header.client_id.startswith("capture-")
    assert path.stem.endswith(f"-v{header.api_version}")
    assert encode_request_header(header) == frame[:offset]
    codec = request_codec(header.api_key, header.api_version)
    body = codec.decode(frame[offset:])
    assert codec.encode(body) == frame[offset:]
    if header.api_key == 0:  # Produce: one RecordBatch v2 (magic byte at offset 16)
        records = body.topic_data[0].partition_data[0].records
        assert records[16] == 2
