"""The fuzz mutator is reproducible from its seed, and its well-formed frames mostly still decode."""

from __future__ import annotations

from protocol.codec import request_codec
from protocol.framing import decode_request_header
from tests.fuzz.campaign import load_corpus
from tests.fuzz.mutator import Mutator


def corpus() -> list[bytes]:
    return [frame for _, frame in load_corpus()]


def test_corpus_covers_the_client_apis():
    apis = {decode_request_header(frame)[0].api_key for frame in corpus()}
    # Produce, Fetch, ListOffsets, Metadata, FindCoordinator, ApiVersions, admin, producer ids, share groups.
    assert {0, 1, 2, 3, 10, 18, 19, 20, 22, 32, 37, 44, 76, 78, 79} <= apis
    clients = {client for client, _ in load_corpus()}
    assert {"confluent", "kafka-python", "aiokafka"} <= clients


def test_corpus_has_frames_of_every_served_api():
    """Every API a default broker serves has a seed (captured from a client, or synthetic: tools/capture_corpus.py),
    so the campaign's structure-aware mutations reach its decoder and handler."""
    from broker.handlers import served_api_keys
    from protocol import schema

    served = {api_key: schema.api_specs()[api_key].name for api_key in served_api_keys()}
    seeded = {decode_request_header(frame)[0].api_key for frame in corpus()}
    assert {k: name for k, name in served.items() if k not in seeded} == {}


def test_same_seed_same_frames():
    a, b = Mutator(7, corpus()), Mutator(7, corpus())
    assert [a.mutate() for _ in range(300)] == [b.mutate() for _ in range(300)]
    assert [Mutator(8, corpus()).mutate() for _ in range(50)] != [Mutator(7, corpus()).mutate() for _ in range(50)]


def test_wellformed_frames_mostly_decode_and_malformed_ones_mostly_do_not():
    m = Mutator(3, corpus())

    def decodes(frame: bytes) -> bool:
        try:
            header, offset = decode_request_header(frame)
            request_codec(header.api_key, header.api_version).decode_prefix(frame, offset)
            return True
        except Exception:  # noqa: BLE001
            return False

    good = sum(decodes(m.wellformed()) for _ in range(300))
    bad = sum(decodes(m.malformed()) for _ in range(300))
    assert good > 250 and bad < 250
