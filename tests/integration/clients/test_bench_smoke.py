"""`python -m bench --size quick` with tiny counts: the harness runs end to end against a real broker process
(the bench starts and stops it), writes JSON with every part and draws the PNG charts. Never asserts speed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.broker_process import REPO

pytestmark = pytest.mark.integration

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--size", "quick", "--no-peers", "--records", "300", "--seconds", "0.5",
         "--rates", "400", "--members", "2", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    return proc, out


def test_bench_exits_cleanly_and_shows_progress(bench_run):
    proc, _out = bench_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "[ 16/16]" in proc.stdout  # quick matrix on Shoal alone: 2 partitions x 2 sizes x 4 operations
    assert "ETA" in proc.stdout
    assert "FAILED" not in proc.stdout, proc.stdout


def test_bench_writes_every_part(bench_run):
    _proc, out = bench_run
    [report] = [json.loads(p.read_text()) for p in out.glob("bench-*.json")]
    assert report["machine"]["nproc"] >= 1 and "load_after" in report["machine"]
    cells = report["matrix"]
    assert {(c["operation"], c["partitions"], c["record_bytes"]) for c in cells} == {
        (op, p, size) for op in ("produce", "txn-produce", "consume", "share-consume")
        for p in (1, 4) for size in (100, 1024)}
    assert all(c["error"] is None and c["records"] == 300 and c["records_s"] > 0 for c in cells), cells
    kinds = {(r["kind"], r["max_wait_ms"]) for r in report["latency"]}
    assert kinds == {("assign", 500), ("share", 500), ("shoal-share", 500), ("shoal-share", 30_000)}
    for row in report["latency"]:
        assert row["received"] >= 1 and 0 <= row["p50_ms"] <= row["p99_ms"] <= row["p999_ms"] <= row["max_ms"]
    # The long-polling ShareFetch is woken by each record: far sooner than its MaxWaitMs.
    [long_poll] = [r for r in report["latency"] if r["max_wait_ms"] == 30_000]
    assert long_poll["max_ms"] < 10_000
    members = report["members"]
    assert {(r["kind"], r["members"], "records_s" in r) for r in members} == {
        (kind, 2, drained) for kind in ("group", "share", "shoal-share") for drained in (True, False)}


def test_bench_draws_charts(bench_run):
    _proc, out = bench_run
    charts = sorted(p.name.split("-")[0] for p in out.glob("*.png"))
    assert charts == ["latency", "members", "throughput"]
    for path in out.glob("*.png"):
        assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 5_000
