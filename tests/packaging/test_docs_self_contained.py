"""The project describes itself: the README, docs/ and the shipped packages never send a reader outside the
repository (to notes that a clone does not have)."""

from __future__ import annotations

import re

from tests.helpers.broker_process import REPO

OUTSIDE = re.compile(r"\.\./shared\b|/work/shared\b")
SHIPPED = ("broker", "protocol", "shoal_client", "shoal_spark")


def _texts():
    yield REPO / "README.md"
    yield from sorted((REPO / "docs").rglob("*.md"))
    for package in SHIPPED:
        yield from sorted((REPO / package).rglob("*.py"))


def test_nothing_points_outside_the_repository() -> None:
    hits = [f"{path.relative_to(REPO)}:{n}" for path in _texts()
            for n, line in enumerate(path.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, hits


def test_relative_links_in_readme_and_docs_resolve() -> None:
    broken = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(REPO)} -> {target}")
    assert not broken, broken
