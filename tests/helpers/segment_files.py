"""Sizes of a partition's segment files, read while the broker may be cleaning or deleting them."""

from __future__ import annotations

from pathlib import Path


def log_bytes(directory: Path) -> int:
    """Bytes in the directory's `.log` segments; a segment the cleaner deletes between the listing and its
    stat counts as gone."""
    total = 0
    for path in directory.glob("*.log"):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            continue
    return total
