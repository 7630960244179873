"""`python -m bench.spark_yardstick --quick` end to end, so the bench cannot rot: Spark's own Kafka source (the
jars `make spark-kafka` installs, handed over with spark.jars), the share source and the Arrow source each drain
their topic on a Shoal broker and on Kafka 4.4 in one local[2] application (the bench checks that every query
read every record), and the JSON, table and chart are written. Never asserts speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.broker_process import REPO
from tests.helpers.spark_session import spark_env

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_yardstick_quick_run(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bench.spark_yardstick", "--quick", "--executors", "2", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=1200, env={**os.environ, **spark_env()})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    [report] = [json.loads(p.read_text()) for p in tmp_path.glob("spark-yardstick-*.json")]
    assert any(j.startswith("spark-sql-kafka-0-10_2.13-") for j in report["spark_kafka_jars"])
    runs = [r for r in report["runs"] if not r["warmup"]]
    assert {(r["source"], r["broker"], r["record_bytes"]) for r in runs if r["source"] != "arrow"} == {
        (source, broker, size) for source in ("kafka", "share") for broker in ("shoal", "kafka")
        for size in (100, 1024)}
    assert {r["record_bytes"] for r in runs if r["source"] == "arrow"} == {100, 1024}
    for r in runs:
        assert r["executors"] == 2 and r["records"] in (60_000, 20_000)
        assert r["steady_rows_s"] and r["steady_rows_s"] > 0, r
        assert r["cpu"] > 0 and len(r["load_before"]) == 3, r
    for row in report["summary"]:
        if row["source"] == "share":
            assert row["vs_kafka_rows_s"] and row["vs_arrow_rows_s"], row
    assert "| share |" in proc.stdout and "Spark's Kafka source rows/s" in proc.stdout
    [png] = list(tmp_path.glob("spark-yardstick-*.png"))
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5_000
