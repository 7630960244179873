"""`python -m bench.report RESULT.json`: the Markdown tables of a `python -m bench` run (as in
docs/performance.md); matrix cells read MiB/s (thousands of records/s)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.latency import MEMBER_KINDS, SHARE_KINDS
from bench.matrix import OPERATIONS, human_bytes


def matrix_table(cells: list[dict]) -> list[str]:
    servers = list(dict.fromkeys(c["server"] for c in cells))
    columns = [(s, op) for s in servers for op in OPERATIONS if any(c["server"] == s and c["operation"] == op
                                                                    for c in cells)]
    lines = ["| partitions | record | " + " | ".join(f"{s} {op}" for s, op in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for p, size in dict.fromkeys((c["partitions"], c["record_bytes"]) for c in cells):
        row = []
        for s, op in columns:
            cell = next((c for c in cells if (c["server"], c["operation"], c["partitions"], c["record_bytes"])
                         == (s, op, p, size)), None)
            row.append("failed" if cell is None or cell["mib_s"] is None
                       else f"{cell['mib_s']:g} ({cell['records_s'] / 1000:.0f}k)")
        lines.append(f"| {p} | {human_bytes(size)} | " + " | ".join(row) + " |")
    return lines


def latency_table(rows: list[dict]) -> list[str]:
    lines = ["| scenario | sent/s | p50 ms | p99 ms | p99.9 ms | max ms |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['label']} | {r['achieved_rate']} | {r['p50_ms']:g} | {r['p99_ms']:g} | {r['p999_ms']:g} | "
              f"{r['max_ms']:g} |" for r in rows]
    return lines


def members_table(rows: list[dict]) -> list[str]:
    lines = ["| members | classic rec/s | ShareConsumer rec/s | ÷ classic | shoal_client rec/s | ÷ classic | "
             "classic p99 ms | ShareConsumer p99 ms | shoal_client p99 ms |", "|---|---|---|---|---|---|---|---|---|"]
    for n in sorted({r["members"] for r in rows}):
        def get(kind: str, key: str, n: int = n) -> float | None:
            return next((r[key] for r in rows if r["kind"] == kind and r["members"] == n and key in r), None)
        classic = get("group", "records_s")
        cells = [str(classic)]
        for kind in SHARE_KINDS:
            share = get(kind, "records_s")
            cells += [str(share), f"{share / classic:.2f}" if classic and share else "-"]
        cells += [str(get(kind, "p99_ms")) for kind in MEMBER_KINDS]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    report = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    m = report["machine"]
    print(f"{m['nproc']} CPUs ({m['cpu']}), load average {m['load_before']} before, {m.get('load_after')} after\n")
    for key, table in (("matrix", matrix_table), ("latency", latency_table), ("members", members_table)):
        if report.get(key):
            print("\n".join(table(report[key])) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
