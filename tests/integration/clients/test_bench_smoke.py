"""`python -m bench --size quick` with tiny counts: the harness runs end to end against a real broker process
(the bench starts and stops it), writes JSON with every part and draws the PNG charts; the same with Apache
Kafka as a peer (Kafka's jars from `make kafka`); and `python -m bench.compare` runs one round of this checkout
against its own HEAD. Never asserts speed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.broker_process import REPO

MATRIX_OPERATIONS = ("produce", "txn-produce", "consume", "share-consume", "perf-produce", "perf-consume",
                     "perf-share-consume")

pytestmark = pytest.mark.integration

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--size", "quick", "--no-peers", "--partitions", "4", "--records", "300",
         "--seconds", "0.5", "--rates", "400", "--ladder", "800", "--members", "2", "--txn-producers", "1,2",
         "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    return proc, out


def test_bench_exits_cleanly_and_shows_progress(bench_run):
    proc, _out = bench_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "[ 14/14]" in proc.stdout  # the matrix on Shoal alone: 1 partition count x 2 sizes x 7 operations
    assert "ETA" in proc.stdout
    assert "FAILED" not in proc.stdout, proc.stdout
    assert re.search(r"\| txn-1000 / idempotent \(target >= 0.80x\) \| 2 \| \d+\.\d\dx \|", proc.stdout), proc.stdout


def test_bench_writes_every_part(bench_run):
    _proc, out = bench_run
    [report] = [json.loads(p.read_text()) for p in out.glob("bench-*.json")]
    assert report["machine"]["nproc"] >= 1 and "load_after" in report["machine"]
    cells = report["matrix"]
    assert {(c["operation"], c["partitions"], c["record_bytes"]) for c in cells} == {
        (op, 4, size) for op in MATRIX_OPERATIONS for size in (100, 1024)}
    assert all(c["error"] is None and c["records"] == 300 and c["records_s"] > 0 for c in cells), cells
    assert all(c["server_cpu_s"] is not None and c["load"] is not None for c in cells), cells
    kinds = {(r["kind"], r["max_wait_ms"], r["rate"]) for r in report["latency"]}
    assert kinds == {("assign", 500, 400), ("share", 500, 400), ("shoal-share", 500, 400),
                     ("shoal-share", 30_000, 5), ("assign", 500, 800)}
    for row in report["latency"]:
        assert row["received"] >= 1 and 0 <= row["p50_ms"] <= row["p99_ms"] <= row["p999_ms"] <= row["max_ms"]
    # The long-polling ShareFetch is woken by each record: far sooner than its MaxWaitMs.
    [long_poll] = [r for r in report["latency"] if r["max_wait_ms"] == 30_000]
    assert long_poll["max_ms"] < 10_000
    members = report["members"]
    assert {(r["kind"], r["members"], "records_s" in r) for r in members} == {
        (kind, 2, drained) for kind in ("group", "share", "shoal-share") for drained in (True, False)} | {
        ("perf-share", 2, True)}
    txns = report["transactions"]
    assert {(r["variant"], r.get("producers")) for r in txns} == {
        (f"txn-{n}", p) for n in (1, 100, 1000) for p in (1, 2)} | {("read_uncommitted", None),
                                                                   ("read_committed", None)} | {
        ("idempotent", p) for p in (1, 2)}
    assert all("error" not in r and r["records_s"] > 0 for r in txns), txns
    # the idempotent baseline writes as many records as the transactions of 1 000 it is compared with
    assert {r["records"] for r in txns if r["variant"] in ("idempotent", "txn-1000") and r["producers"] == 2} == {
        2000}
    [resources] = report["resources"]
    assert resources["server"] == "shoal" and resources["first_ack_s"] > 0
    assert 0 < resources["rss_idle_mib"] <= resources["rss_peak_mib"]
    assert all(resources[f"cpu_s_per_gib_{kind}"] > 0 for kind in ("produce", "consume", "share_consume"))


def test_bench_draws_charts(bench_run):
    _proc, out = bench_run
    charts = sorted(p.name.split("-")[0] for p in out.glob("*.png"))
    assert charts == ["latency", "members", "resources", "throughput", "transactions"]
    for path in out.glob("*.png"):
        assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 5_000


def test_bench_with_kafka_peer(tmp_path):
    """Apache Kafka (its defaults) started as the bench's peer: every matrix cell runs on it too, and its
    start-up, memory and CPU figures are recorded; the JVM is stopped at the end."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--size", "quick", "--peers", "kafka", "--only", "matrix,resources",
         "--partitions", "1", "--record-sizes", "1024", "--records", "300", "--no-charts", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [report] = [json.loads(p.read_text()) for p in tmp_path.glob("bench-*.json")]
    cells = report["matrix"]
    assert {(c["server"], c["operation"]) for c in cells} == {
        (server, op) for server in ("shoal", "kafka") for op in MATRIX_OPERATIONS}
    assert all(c["error"] is None and c["records_s"] > 0 for c in cells), cells
    # the servers alternate: Shoal's cells of a (partitions, size) pair, then Kafka's
    assert [c["server"] for c in cells] == ["shoal"] * 7 + ["kafka"] * 7
    resources = {r["server"]: r for r in report["resources"]}
    assert set(resources) == {"shoal", "kafka"}
    kafka = resources["kafka"]
    assert kafka["format_s"] > 0 and kafka["first_ack_s"] > 0
    assert 50 < kafka["rss_idle_mib"] <= kafka["rss_peak_mib"] and kafka["cpu_s_per_gib_produce"] > 0
    assert "| 1 | 1 KiB | perf-share-consume |" in proc.stdout  # the table is printed
    [pid] = re.findall(r"^  kafka +\S+ +pid +(\d+)", proc.stdout, re.MULTILINE)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        cmdline = b""
    assert b"kafka.Kafka" not in cmdline  # the bench stopped its JVM


def test_compare_against_head(tmp_path):
    """One quick round of this checkout's broker against HEAD's, checked out in a worktree that is removed."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.compare", "--base", "HEAD", "--rounds", "1", "--quick", "--out",
         str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "base: broker from /" in proc.stdout and "shoal-compare-" in proc.stdout
    [result] = [json.loads(p.read_text())["results"] for p in tmp_path.glob("compare-*.json")]
    assert [r["step"] for r in result["rows"]] == ["produce", "fetch", "sharefetch", "transaction"]
    assert all(r["ratio"] > 0 and len(r["ratios"]) == 1 for r in result["rows"]), result["rows"]
    for row in result["rows"]:
        assert f"{row['step']:12}" in proc.stdout
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout
    assert "shoal-compare-" not in worktrees
