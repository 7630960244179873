"""What a broker loads to start (issue 37, start-up time): aiohttp, with the TLS contexts its client module builds
at import, is loaded only by a broker whose metrics listener (`metrics.prometheus.listener`, which also serves the
console) is on. Read from the running process's memory map (/proc/PID/maps lists aiohttp's C extensions once
imported), after a produce a real client had acknowledged; never timed."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.confluent_clients import create_topic, produce_all

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def mapped_aiohttp(pid: int) -> bool:
    return "/aiohttp/" in Path(f"/proc/{pid}/maps").read_text()


def test_broker_without_metrics_listener_never_loads_aiohttp(broker_factory):
    off = broker_factory()
    on = broker_factory({"metrics.prometheus.listener": "127.0.0.1:0"})
    for broker in (off, on):
        create_topic(broker.bootstrap, "t")
        assert produce_all(broker.bootstrap, "t", [b"a", b"b"]) == [(0, 0), (0, 1)]
    with urllib.request.urlopen(f"http://127.0.0.1:{on.ports['prometheus']}/api/topics", timeout=30) as response:
        assert response.status == 200
    assert not mapped_aiohttp(off.pid)
    assert mapped_aiohttp(on.pid)  # the check sees aiohttp where it is loaded


def test_start_path_imports_leave_aiohttp_out():
    """The modules `python -m broker` imports before it builds the broker (broker/__main__.py's serve)."""
    code = ("import sys, broker.__main__, broker.app, broker.cluster.journal, broker.cluster.topics, "
            "broker.log.dir_failure, broker.log.segment, broker.security.manager\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'yarl', 'multidict')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert out.strip() == "[]"
