"""The test tree's layout rules: no file under tests/ imports a test module (`test_*`) or a conftest. What tests
share lives in tests/helpers/ (or a fixture of a conftest, which pytest hands in without an import)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[3] / "tests"


def _is_test_module(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def imported_test_modules(source: str) -> list[str]:
    """The test modules and conftests that `source` imports, by the name it imports them with (relative imports
    keep their dots); `importlib.import_module("...")` with a literal counts too."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names
                      if any(_is_test_module(part) for part in alias.name.split("."))]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if any(_is_test_module(part) for part in (node.module or "").split(".")):
                found.append(module)
            else:  # `from tests.unit import test_x`: the module itself imported by name
                found += [f"{module}.{alias.name}" if node.module else module + alias.name
                          for alias in node.names if _is_test_module(alias.name)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
              and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and any(_is_test_module(part) for part in node.args[0].value.split("."))):
            found.append(node.args[0].value)
    return found


def test_no_file_under_tests_imports_a_test_module_or_a_conftest() -> None:
    offenders = {str(path.relative_to(TESTS.parent)): names
                 for path in sorted(TESTS.rglob("*.py"))
                 if (names := imported_test_modules(path.read_text(encoding="utf-8")))}
    assert offenders == {}, f"move what these import into tests/helpers/ or a fixture: {offenders}"


def test_the_check_sees_every_form_of_import() -> None:
    """The check above cannot pass by missing an import: each form of importing a test module is caught."""
    caught = [
        "from tests.unit.groups.test_consumer import owners_are_exclusive",
        "from tests.spark.conftest import new_session",
        "from .test_consumer import x",
        "from . import test_consumer",
        "from tests.unit.groups import test_consumer",
        "import tests.unit.groups.test_consumer",
        "import test_consumer as tc",
        "import conftest",
        "def f():\n    from tests.spark.conftest import spark_env",
        "import importlib\nimportlib.import_module('tests.unit.test_router')",
    ]
    for source in caught:
        assert imported_test_modules(source), source
    allowed = [
        "from tests.helpers.waiting import wait_until",
        "from tests.unit.groups.group_helpers import make",
        "import pytest",
        "from tests.helpers import testing_utils",
        "importlib.import_module('broker.handlers.produce')",
    ]
    for source in allowed:
        assert imported_test_modules(source) == [], source


def test_unit_and_integration_tests_live_in_the_folder_of_their_family() -> None:
    """tests/unit and tests/integration hold folders mirroring the code, no test module of their own."""
    flat = sorted(str(p.relative_to(TESTS.parent)) for folder in ("unit", "integration")
                  for p in (TESTS / folder).glob("test_*.py"))
    assert flat == [], f"move these into the folder of their family: {flat}"


def test_test_module_names_are_unique_outside_packages() -> None:
    """pytest imports a test module outside a package (a folder without __init__.py) by its file name alone: two
    of the same name would collide."""
    by_name: dict[str, list[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        if not (path.parent / "__init__.py").exists():
            by_name.setdefault(path.name, []).append(str(path.relative_to(TESTS.parent)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}


def bare_imports_of(source: str, names: set[str]) -> list[str]:
    """The absolute imports in `source` whose top-level name is one of `names` (modules of the test tree)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] in names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in names:
            found.append(node.module)
    return found


def test_helper_modules_of_the_test_tree_are_imported_by_their_package_path() -> None:
    """`from tests.unit.log.cleaner_helpers import ...`, not `from cleaner_helpers import ...`: a bare name works
    only because pytest puts the test's folder on sys.path, and it hides where the module lives."""
    stems = {p.stem for p in TESTS.rglob("*.py") if p.stem != "__init__"}
    assert bare_imports_of("from cleaner_helpers import make\nimport share_fakes", {"cleaner_helpers", "share_fakes"}) \
        == ["cleaner_helpers", "share_fakes"]
    assert bare_imports_of("from tests.unit.log.cleaner_helpers import make\nfrom . import x", {"cleaner_helpers"}) \
        == []
    offenders = {str(path.relative_to(TESTS.parent)): names
                 for path in sorted(TESTS.rglob("*.py"))
                 if (names := bare_imports_of(path.read_text(encoding="utf-8"), stems))}
    assert offenders == {}, f"import these by their package path (tests.<folder>.<module>): {offenders}"
