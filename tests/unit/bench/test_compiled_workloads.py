"""bench/compiled.py's micro workloads: one for every module the compiled build lists, each running its module's
hot path (here on the pure modules; `make test-compiled` runs the compiled ones' unit tests)."""

from __future__ import annotations

import pytest

from bench import compiled


def test_every_listed_module_has_a_workload_and_a_dotted_name() -> None:
    listed = compiled.listed_modules()
    assert listed, "pyproject's [tool.shoal.mypyc] modules is empty"
    assert set(listed) <= set(compiled.WORKLOADS)
    assert compiled.dotted("protocol/record_check.py") == "protocol.record_check"


@pytest.mark.parametrize(("module", "workload"), [(m, w) for m, ws in compiled.WORKLOADS.items() for w in ws])
def test_workload_runs(module: str, workload: str) -> None:
    run = compiled.WORKLOADS[module][workload]()
    run()
    run()  # a second run starts from the same inputs


def test_worker_reports_the_module_file_and_a_time(capsys: pytest.CaptureFixture[str]) -> None:
    compiled.worker("protocol/record_check.py", "1 KiB records", 0.01)
    out = capsys.readouterr().out
    assert '"file"' in out and "record_check.py" in out and '"seconds"' in out


def test_pure_tree_copy_runs_its_own_modules(tmp_path) -> None:
    """A tree without compiled modules is a copy of the packages whose workers import the copy's sources."""
    tree = compiled.make_tree(tmp_path / "pure", [])
    assert not list(tree.rglob("*.so"))
    file, seconds = compiled.run_micro(tree, "protocol/record_check.py", "1 KiB records", 0.03)
    compiled.check_file(file, False, tree)
    assert seconds > 0
    with pytest.raises(AssertionError):
        compiled.check_file(file, True, tree)
