"""The API coverage table of docs/api-coverage.md: read it, and check it against Kafka's message definitions.

    python tools/api_coverage.py [--spec DIR]

checks that the table has one row per API key of Kafka's definitions (DIR/message/*Request.json, default
../shared/kafka-spec as for tools/make_schemas.py) with Kafka's name and listeners. The tests read the table
with `load_table` and never the definitions (a clean checkout has only the repository).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "api-coverage.md"
DEFAULT_SPEC = ROOT.parent / "shared" / "kafka-spec"

SERVED, NOT_SERVED, NOT_BROKER = "served", "not served", "not a broker API"
STATUSES = (SERVED, NOT_SERVED, NOT_BROKER)
_ROW = re.compile(r"^\|\s*(\d+)\s*\|")


@dataclass(frozen=True)
class Row:
    key: int
    name: str
    listeners: tuple[str, ...]  # Kafka's listeners; () for an API Kafka no longer serves anywhere
    status: str
    reason: str


def load_table(path: Path = TABLE) -> list[Row]:
    """The table's rows in file order (lines starting `| <number> |`)."""
    rows = []
    for line in path.read_text().splitlines():
        if not _ROW.match(line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5:
            raise ValueError(f"{path}: expected 5 cells: {line}")
        key, name, listeners, status, reason = cells
        if status not in STATUSES:
            raise ValueError(f"{path}: unknown status {status!r}: {line}")
        names = () if listeners == "none" else tuple(sorted(x.strip() for x in listeners.split(",")))
        rows.append(Row(int(key), name, names, status, reason))
    return rows


def spec_apis(spec: Path) -> dict[int, tuple[str, tuple[str, ...]]]:
    """api key -> (name, sorted listeners) of Kafka's request definitions."""
    from tools.make_schemas import load_spec

    apis = {}
    for path in sorted((spec / "message").glob("*Request.json")):
        data = load_spec(path)
        if "apiKey" in data:
            apis[data["apiKey"]] = (data["name"].removesuffix("Request"), tuple(sorted(data.get("listeners", []))))
    if not apis:
        raise SystemExit(f"no request definitions under {spec / 'message'}")
    return apis


def differences(rows: list[Row], apis: dict[int, tuple[str, tuple[str, ...]]]) -> list[str]:
    table = {r.key: (r.name, r.listeners) for r in rows}
    out = [f"{k}: Kafka {apis[k]}, table {table.get(k)}" for k in sorted(apis) if table.get(k) != apis[k]]
    out += [f"{k}: in the table, not in Kafka's definitions" for k in sorted(set(table) - set(apis))]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    args = ap.parse_args(argv)
    diffs = differences(load_table(), spec_apis(args.spec))
    for line in diffs:
        print(line, file=sys.stderr)
    print(f"{TABLE.name}: {'differs from' if diffs else 'matches'} {args.spec / 'message'}", file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
