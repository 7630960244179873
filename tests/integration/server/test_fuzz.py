"""A short fuzz campaign in the suite: mutated real-client frames (tests/fuzz) over several pipelining
connections against a real broker process, which must stay up, keep serving a normal client afterwards, keep its
memory and descriptors bounded, and log every problem as one structured line (no plain-text tracebacks, no
errors). `make fuzz` runs the same harness for long campaigns; FUZZ_SEED and FUZZ_FRAMES change this one."""

from __future__ import annotations

import os

import pytest

from tests.fuzz.harness import FuzzRun

pytestmark = pytest.mark.integration

FRAMES = int(os.environ.get("FUZZ_FRAMES", "3000"))
SEED = int(os.environ.get("FUZZ_SEED", "20261123"))
RSS_BOUND_MIB = 768


def test_fuzzed_frames_do_not_hurt_the_broker(tmp_path):
    from tests.helpers.broker_process import venv_python

    run = FuzzRun(tmp_path, python=venv_python())
    try:
        report = run.run(FRAMES, connections=8, seed=SEED)
    finally:
        run.close(keep=True)
    print(report)
    assert report["crashes"] == 0, run.broker.tail()
    assert report["frames"] == FRAMES
    assert report["responses"] > FRAMES // 2  # most frames were handled, not just refused
    assert report["normal_client_ok"]
    assert report["rss_mib"]["peak"] < RSS_BOUND_MIB
    fds = report["fds"]
    assert fds["peak"] < fds["limit"]
    assert fds["end"] is not None and fds["end"] <= fds["limit"] // 2 + 16  # file cache + a few sockets
    assert fds["sockets_at_end"] <= fds["sockets_at_start"]  # no connection outlived its client
    assert report["log_problems"] == []
