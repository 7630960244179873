"""Shoal installs as users install it: a wheel (not an editable checkout) gives a working broker.

The wheel is built from a copy of the source tree, installed into a fresh venv outside the checkout and started
as `shoal-broker` with its working directory outside the checkout; a record then goes through it and back.
To stay fast the venv is made with --no-deps and sees the test venv's site-packages through a .pth line (the
dependencies, not shoal: the test venv's editable hook is not loaded that way, and the fresh venv's own
site-packages comes first on sys.path); `pip check` then proves the wheel's declared dependencies are met.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest

from tests.helpers.broker_process import REPO
from tests.helpers.confluent_clients import consume_all, create_topic, produce_all
from tests.helpers.wheel_install import IGNORE, installed_broker, run, wheel_in_venv

pytestmark = pytest.mark.integration

# Not part of a source tree a user would build from (and large, or stale build output). What the suite's other
# workers write while this copies (test-artifacts: the console test's screenshot) is left out too: a file they
# replace between copytree's listing and its copy would fail the copy.


def _kafka_tool_help(script: Path, cwd: Path) -> str:
    """`script --help`'s text (standard output and error): a tool mirroring Kafka's exits 1 after its help."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run([str(script), "--help"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, f"{script} --help exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(wheel, venv) for a wheel built from a copy of the checkout and installed into a fresh venv."""
    tmp = tmp_path_factory.mktemp("wheel")
    return wheel_in_venv(tmp)


def test_wheel_contents(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert {"broker", "protocol", "shoal_client", "shoal_spark"} <= tops
    assert not tops & {"bench", "tests", "tools", "schemas"}, tops
    # the default build is pure Python (SHOAL_COMPILE=1 compiles: tests/packaging/test_compiled_wheel.py)
    assert wheel.name.endswith("-py3-none-any.whl") and not [n for n in names if n.endswith(".so")], wheel.name
    schemas = [n for n in names if n.startswith("protocol/schemas/")]
    assert any(n.endswith("/messages/ProduceRequest.json") for n in schemas)
    assert any(n.endswith("/records/TopicRecord.json") for n in schemas)
    expected = len(list((REPO / "protocol" / "schemas").rglob("*.json")))
    assert len(schemas) == expected
    # The console's page, script and stylesheet (package data: no build step, nothing fetched at run time).
    assert {"broker/console/static/index.html", "broker/console/static/console.js",
            "broker/console/static/console.css"} <= set(names)


def test_installed_package_is_used_and_complete(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, venv = installed
    py = str(venv / "bin" / "python")
    code = ("import broker, protocol.schema as s, shoal_spark; print(broker.__file__); "
            "print(len(s.messages()), len(s.records()), s.records()['TopicRecord'].name); "
            "print(shoal_spark.__file__, shoal_spark.ShareSource.name())")
    out = run([py, "-c", code], cwd=tmp_path).splitlines()
    assert out[0].startswith(str(venv)), out  # the wheel's copy, not the checkout
    assert out[2].startswith(str(venv)) and out[2].endswith(" shoal"), out
    messages, records, name = out[1].split()
    assert int(messages) > 0 and int(records) > 0 and name == "TopicRecord"
    run([py, "-m", "pip", "check"], cwd=tmp_path)  # the wheel's declared dependencies are all satisfied


def test_installed_console_scriptsrun(installed: tuple[Path, Path], tmp_path: Path) -> None:
    """Every console script in pyproject.toml is installed from the wheel and starts (the operator tools answer
    --help with their commands and exit 1 after it, as kafka-share-groups and kafka-transactions do)."""
    _, venv = installed
    bin_dir = venv / "bin"
    assert (bin_dir / "shoal-broker").exists()
    assert "--reset-offsets" in _kafka_tool_help(bin_dir / "shoal-share-groups", tmp_path)
    help_text = _kafka_tool_help(bin_dir / "shoal-transactions", tmp_path)
    assert all(c in help_text for c in ("list", "describe-producers", "abort", "find-hanging")), help_text


def test_installed_broker_round_trips_a_record(installed: tuple[Path, Path], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _, venv = installed
    monkeypatch.delenv("PYTHONPATH", raising=False)
    proc = installed_broker(venv, tmp_path, {"metrics.prometheus.listener": "127.0.0.1:0"})
    proc.start()
    try:
        topic = f"wheel-{uuid.uuid4().hex[:8]}"
        create_topic(proc.bootstrap, topic)
        produce_all(proc.bootstrap, topic, [b"from an installed wheel"])
        records = consume_all(proc.bootstrap, topic, 1)
        assert [value for _, value, _ in records] == [b"from an installed wheel"]
        for path, text in (("/", b"/static/console.js"), ("/static/console.js", b"/api/groups")):
            with urllib.request.urlopen(f"http://127.0.0.1:{proc.ports['prometheus']}{path}", timeout=30) as r:
                assert text in r.read(), path  # the console served from the wheel's package data
        assert proc.alive()
    finally:
        code = proc.stop()
    assert code == 0, proc.tail()


def test_missing_or_empty_schema_set_fails_at_import(tmp_path: Path) -> None:
    """A protocol package whose schemas are gone (or empty) refuses to import, with a clear message."""
    for case in ("missing", "empty"):
        root = tmp_path / case
        shutil.copytree(REPO / "protocol", root / "protocol", ignore=IGNORE)
        schemas = root / "protocol" / "schemas"
        shutil.rmtree(schemas)
        if case == "empty":
            (schemas / "messages").mkdir(parents=True)
            (schemas / "records").mkdir()
        env = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run([sys.executable, "-c", "import protocol.schema"], cwd=root, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0
        assert "SchemaSetError" in done.stderr and "reinstall shoal" in done.stderr, done.stderr
