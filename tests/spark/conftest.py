"""Spark fixtures: one local[2] SparkSession per test module (start-up costs 5-8 s and ~1 GB), made by
`new_session` (tests/helpers/spark_session.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.spark_session import new_session


@pytest.fixture(scope="module")
def spark(request):
    session = new_session(f"shoal-tests-{Path(str(request.path)).stem}")
    try:
        yield session
    finally:
        for q in session.streams.active:
            q.stop()
        session.stop()
