"""kcat 1.7.1 (librdkafka 2.0.2, from Debian) lists metadata, produces and consumes."""

from __future__ import annotations

import pytest

from tests.helpers.kcat import kcat

pytestmark = pytest.mark.integration


def test_kcat_list_produce_consume(broker):
    lines = b"".join(f"line-{i}\n".encode() for i in range(500))
    produced = kcat("-b", broker.bootstrap, "-P", "-t", "kcat-topic", "-p", "0", stdin=lines)
    assert produced.returncode == 0, produced.stderr.decode()

    listing = kcat("-b", broker.bootstrap, "-L")
    assert listing.returncode == 0, listing.stderr.decode()
    out = listing.stdout.decode()
    assert 'topic "kcat-topic" with 1 partitions' in out
    assert "1 brokers:" in out

    consumed = kcat("-b", broker.bootstrap, "-C", "-t", "kcat-topic", "-p", "0", "-o", "beginning", "-e",
                    "-f", "%o:%s\n")
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().splitlines() == [f"{i}:line-{i}" for i in range(500)]
