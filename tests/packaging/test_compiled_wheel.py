"""The compiled build (SHOAL_COMPILE=1: setup.py compiles pyproject's `[tool.shoal.mypyc] modules` with mypyc) as
users would install it: a wheel built from a copy of the source tree, installed into a fresh venv outside the
checkout (as tests/packaging/test_wheel.py does for the pure wheel, whose path the rest of the suite runs).

Checked: the wheel holds an extension module for every listed module; the installed modules are those extension
modules; the unit tests of the compiled modules pass against them (a copy of tests/ run outside the checkout, so
that `protocol` and `broker` come from the venv); and a broker process from the wheel, with the extension modules
mapped, serves produce, fetch and share-fetch (with acknowledgements) to confluent-kafka clients.
"""

from __future__ import annotations

import shutil
import time
import tomllib
import uuid
import zipfile
from pathlib import Path

import pytest
from confluent_kafka import ShareConsumer

from tests.helpers.bounded_close import close_within
from tests.helpers.broker_process import REPO
from tests.helpers.confluent_clients import consume_all, create_topic, produce_all, share_from_earliest
from tests.helpers.share_consumers import messages
from tests.helpers.wheel_install import IGNORE, installed_broker, run, wheel_in_venv

pytestmark = pytest.mark.integration

# The unit tests of each compiled module (a module added to the list needs its entry here).
UNIT_TESTS = {
    "protocol/record_check.py": ["tests/unit/protocol/test_record_framing.py",
                                 "tests/unit/protocol/test_keyless_records.py"],
    "protocol/records.py": ["tests/unit/protocol/test_records.py", "tests/unit/protocol/test_produce_records.py",
                            "tests/unit/protocol/test_keyed_batch.py"],
}


def _modules() -> list[str]:
    with open(REPO / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["tool"]["shoal"]["mypyc"]["modules"])



@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(wheel, venv): SHOAL_COMPILE=1's wheel, built from a copy of the checkout (pip's isolated build environment
    installs setup_requires' mypy) and installed into a fresh venv."""
    tmp = tmp_path_factory.mktemp("compiled")
    return wheel_in_venv(tmp, {"SHOAL_COMPILE": "1"})


def test_wheel_holds_an_extension_module_per_listed_module(compiled: tuple[Path, Path]) -> None:
    wheel, _ = compiled
    assert "-py3-none-any" not in wheel.name, wheel.name  # a platform wheel
    names = zipfile.ZipFile(wheel).namelist()
    for module in _modules():
        stem = module.removesuffix(".py")
        assert any(n.startswith(stem + ".cpython-") and n.endswith(".so") for n in names), (module, names)
        assert module in names  # the source ships too (tracebacks, inspection)
    assert any("__mypyc" in n and n.endswith(".so") for n in names)  # mypyc's runtime library


def test_installed_modules_are_the_extension_modules(compiled: tuple[Path, Path], tmp_path: Path) -> None:
    _, venv = compiled
    dotted = [m.removesuffix(".py").replace("/", ".") for m in _modules()]
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    print(importlib.import_module(name).__file__)"
    files = run([str(venv / "bin" / "python"), "-c", code, *dotted], cwd=tmp_path).split()
    assert len(files) == len(dotted)
    for name, file in zip(dotted, files, strict=True):
        assert file.startswith(str(venv)) and file.endswith(".so"), (name, file)


def test_compiled_modules_pass_their_unit_tests(compiled: tuple[Path, Path], tmp_path: Path) -> None:
    """The listed modules' unit tests, run by the venv's Python on a copy of tests/ outside the checkout (the
    copy's root, tests/ and the bench/ its helpers import, holds no `protocol` or `broker`, so the venv's compiled
    modules are imported: checked first)."""
    _, venv = compiled
    modules = _modules()
    assert set(modules) <= set(UNIT_TESTS), "a compiled module without its unit tests in UNIT_TESTS"
    suite = tmp_path / "suite"
    shutil.copytree(REPO / "tests", suite / "tests", ignore=IGNORE)
    shutil.copytree(REPO / "bench", suite / "bench", ignore=IGNORE)  # tests/helpers imports some of it
    shutil.copy2(REPO / "pyproject.toml", suite / "pyproject.toml")  # pytest's settings
    files = [f for m in modules for f in UNIT_TESTS[m]]
    dotted = [m.removesuffix(".py").replace("/", ".") for m in modules]
    code = ("import importlib, sys, pytest\n"
            f"for name in {dotted!r}:\n"
            "    f = importlib.import_module(name).__file__\n"
            "    assert f.endswith('.so') and 'suite' not in f, (name, f)\n"
            "sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', *sys.argv[1:]]))")
    out = run([str(venv / "bin" / "python"), "-c", code, *files], cwd=suite)
    assert " passed" in out and "failed" not in out, out[-2000:]


def test_compiled_broker_serves_produce_fetch_and_share_fetch(compiled: tuple[Path, Path], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _, venv = compiled
    monkeypatch.delenv("PYTHONPATH", raising=False)
    proc = installed_broker(venv, tmp_path)
    proc.start()
    consumer = None
    try:
        topic = f"compiled-{uuid.uuid4().hex[:8]}"
        create_topic(proc.bootstrap, topic)
        values = [f"record {i}".encode() for i in range(300)]
        produce_all(proc.bootstrap, topic, values, **{"batch.size": 2000})  # acks=all, batches of ~100 records
        assert sorted(v for _, v, _ in consume_all(proc.bootstrap, topic, 300)) == sorted(values)
        group = f"compiled-share-{uuid.uuid4().hex[:8]}"
        share_from_earliest(proc.bootstrap, group)
        consumer = ShareConsumer({"bootstrap.servers": proc.bootstrap, "group.id": group,
                                  "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([topic])
        got: list[bytes] = []
        end = time.monotonic() + 60
        while len(got) < len(values):
            assert time.monotonic() < end, f"{len(got)} of {len(values)} records after 60 s"
            for m in messages(consumer):
                got.append(m.value())
                consumer.acknowledge(m)  # explicit acknowledgements: ShareAcknowledge / piggybacked on ShareFetch
            consumer.commit_sync()
        assert sorted(got) == sorted(values)
        assert proc.alive()
        # The broker process runs the wheel's compiled code: mypyc's group library (every listed module's code;
        # a module imported by another of the group is initialised from it without loading its own stub .so)
        # and the stub of the module the broker imports first are mapped from the venv.
        maps = Path(f"/proc/{proc.pid}/maps").read_text().splitlines()
        mapped = {Path(line.split()[-1]).resolve() for line in maps if line.endswith(".so")}
        ours = [p for p in mapped if p.is_relative_to(venv.resolve())]
        assert any(p.name.split(".")[0].endswith("__mypyc") for p in ours), sorted(mapped)
        stems = {m.removesuffix(".py") for m in _modules()}
        assert any(str(p.relative_to(venv.resolve())).split("site-packages/")[-1].split(".")[0] in stems
                   for p in ours), sorted(ours)
    finally:
        if consumer is not None:
            close_within(consumer)
        code = proc.stop()
    assert code == 0, proc.tail()
