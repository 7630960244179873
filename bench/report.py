"""`python -m bench.report RESULT.json`: the Markdown tables of a `python -m bench` run (as in
docs/performance.md). Matrix cells read MiB/s (thousands of records/s), one column per server; the other tables
likewise put the servers side by side."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from bench.matrix import OPERATIONS, human_bytes

MEMBER_COLUMNS = {"group": "classic", "share": "ShareConsumer", "shoal-share": "shoal_client",
                  "perf-share": "share perf-test"}


def _servers(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["server"] for r in rows))


def matrix_table(cells: list[dict]) -> list[str]:
    servers = _servers(cells)
    lines = ["| partitions | record | operation | " + " | ".join(servers) + " |", "|---|---|---|" + "---|" * len(servers)]
    keys = dict.fromkeys((c["partitions"], c["record_bytes"]) for c in cells)
    for p, size in sorted(keys):
        for op in OPERATIONS:
            row = []
            for s in servers:
                cell = next((c for c in cells if (c["server"], c["operation"], c["partitions"], c["record_bytes"])
                             == (s, op, p, size)), None)
                row.append("-" if cell is None else "failed" if cell["mib_s"] is None
                           else f"{cell['mib_s']:g} ({cell['records_s'] / 1000:.0f}k)")
            if any(r != "-" for r in row):
                lines.append(f"| {p} | {human_bytes(size)} | {op} | " + " | ".join(row) + " |")
    return lines


def latency_table(rows: list[dict]) -> list[str]:
    lines = ["| scenario | sent/s | p50 ms | p99 ms | p99.9 ms | max ms |", "|---|---|---|---|---|---|"]
    for r in rows:
        mark = " (highest rate Shoal and Kafka both held)" if r.get("held_by_all") else ""
        lines.append(f"| {r['label']}{mark} | {r['achieved_rate']} | {r['p50_ms']:g} | {r['p99_ms']:g} | "
                     f"{r['p999_ms']:g} | {r['max_ms']:g} |")
    return lines


def members_table(rows: list[dict]) -> list[str]:
    kinds = [k for k in MEMBER_COLUMNS if any(r["kind"] == k for r in rows)]
    head = ["server", "members"]
    for k in kinds:
        head += [f"{MEMBER_COLUMNS[k]} rec/s"] + ([] if k == "group" else ["÷ classic"])
    head += [f"{MEMBER_COLUMNS[k]} p99 ms" for k in kinds if k != "perf-share"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for server in _servers(rows):
        for n in sorted({r["members"] for r in rows if r["server"] == server}):
            def get(kind: str, key: str, n: int = n, server: str = server) -> float | None:
                return next((r[key] for r in rows if r["kind"] == kind and r["members"] == n
                             and r["server"] == server and key in r), None)
            classic = get("group", "records_s")
            cells = [server, str(n)]
            for kind in kinds:
                rate = get(kind, "records_s")
                cells.append("-" if rate is None else str(rate))
                if kind != "group":
                    cells.append(f"{rate / classic:.2f}" if classic and rate else "-")
            cells += [str(get(kind, "p99_ms") or "-") for kind in kinds if kind != "perf-share"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def transactions_table(rows: list[dict]) -> list[str]:
    servers = _servers(rows)
    lines = ["| variant | producers | " + " | ".join(f"{s} rec/s" for s in servers) + " |",
             "|---|---|" + "---|" * len(servers)]
    for variant, producers in dict.fromkeys((r["variant"], r.get("producers", 1)) for r in rows):
        cells = []
        for s in servers:
            rates = [r["records_s"] for r in rows if r["server"] == s and r["variant"] == variant
                     and r.get("producers", 1) == producers and "records_s" in r]
            cells.append(f"{round(statistics.median(rates))}" if rates else "failed")
        lines.append(f"| {variant} | {producers} | " + " | ".join(cells) + " |")
    # Issue 37's target: transactions of 1 000 against idempotent produce by as many producers (medians).
    for producers in dict.fromkeys(r.get("producers", 1) for r in rows if r["variant"] == "idempotent"):
        cells = []
        for s in servers:
            medians = [statistics.median(rates) if (rates := [
                r["records_s"] for r in rows if r["server"] == s and r["variant"] == variant
                and r.get("producers", 1) == producers and "records_s" in r]) else None
                for variant in ("txn-1000", "idempotent")]
            cells.append(f"{medians[0] / medians[1]:.2f}x" if medians[0] and medians[1] else "-")
        lines.append(f"| txn-1000 / idempotent (target >= 0.80x) | {producers} | " + " | ".join(cells) + " |")
    return lines


def resources_table(rows: list[dict]) -> list[str]:
    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:g}"

    lines = ["| server | start to first acked produce s | RSS idle MiB | RSS peak under load MiB | "
             "CPU s per GiB produced | per GiB consumed | per GiB share-consumed |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['server']} | {fmt(r.get('first_ack_s'))} | {fmt(r.get('rss_idle_mib'))} | "
                     f"{fmt(r.get('rss_peak_mib'))} | {fmt(r.get('cpu_s_per_gib_produce'))} | "
                     f"{fmt(r.get('cpu_s_per_gib_consume'))} | {fmt(r.get('cpu_s_per_gib_share_consume'))} |")
    return lines


TABLES = (("matrix", "throughput matrix, MiB/s (thousands of records/s)", matrix_table),
          ("latency", "end-to-end latency", latency_table),
          ("members", "share groups vs classic groups (drain rec/s, p99 at a fixed rate)", members_table),
          ("transactions", "transactions (rec/s; fetch rows: log records/s read to the end)", transactions_table),
          ("resources", "resources", resources_table))


def render(report: dict) -> list[str]:
    m = report["machine"]
    lines = [f"{m['nproc']} CPUs ({m['cpu']}), load average {m['load_before']} before, {m.get('load_after')} after",
             ""]
    for key, title, table in TABLES:
        if report.get(key):
            lines += [f"### {title}", "", *table(report[key]), ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    report = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    print("\n".join(render(report)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
