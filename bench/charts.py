"""PNG charts of a `python -m bench` run (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

from bench.latency import MEMBER_KINDS  # noqa: E402

COLOUR = {"shoal": "tab:blue", "tansu": "tab:orange", "kafka": "tab:green", "kafka-fsync": "tab:red"}


def _caption(fig, machine: dict) -> None:
    fig.text(0.01, 0.005, f"{machine.get('nproc')} CPUs ({machine.get('cpu')}), load average "
             f"{machine.get('load_before', '?')} -> {machine.get('load_after', '?')}; one run, client and brokers "
             "share the CPUs", fontsize=7, color="dimgray")


def _save(fig, machine: dict, path: Path, top: float = 1.0) -> Path:
    """Caption (machine and load), lay out below `top` (a figure legend above it), write the PNG and free the
    figure."""
    _caption(fig, machine)
    fig.tight_layout(rect=(0, 0.03, 1, top))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def throughput_chart(cells: list[dict], machine: dict, path: Path) -> Path:
    """MiB/s against partitions: a panel per operation (rows) and record size (columns), a line per server (a
    single panel of every server and operation held some thirty lines)."""
    sizes = sorted({c["record_bytes"] for c in cells})
    ops = list(dict.fromkeys(c["operation"] for c in cells))
    servers = list(dict.fromkeys(c["server"] for c in cells))
    fig, axes = plt.subplots(len(ops), len(sizes), figsize=(4.2 * len(sizes), 2.3 * len(ops) + 0.8),
                             squeeze=False)
    for row, op in zip(axes, ops, strict=True):
        for ax, size in zip(row, sizes, strict=True):
            for server in servers:
                pts = sorted((c["partitions"], c["mib_s"]) for c in cells if c["server"] == server
                             and c["operation"] == op and c["record_bytes"] == size and c["mib_s"])
                if pts:
                    ax.plot([p for p, _ in pts], [v for _, v in pts], "o-", color=COLOUR.get(server),
                            label=server, markersize=4)
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({c["partitions"] for c in cells}))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.set_ylim(bottom=0)
            size_name = f"{size} B" if size < 1024 else f"{size // 1024} KiB"
            ax.set_title(f"{op}, {size_name} records", fontsize=9)
            ax.grid(alpha=0.3)
        row[0].set_ylabel("MiB/s")
    for ax in axes[-1]:
        ax.set_xlabel("partitions")
    handles, labels = [], []
    for ax in axes.flat:  # every server once, from whichever panel has it
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=8, bbox_to_anchor=(0.5, 0.985))
    fig.suptitle("Throughput (acks=all; Shoal and kafka-fsync fsync, Kafka's defaults do not, Tansu in memory; "
                 "perf-*: Kafka's perf tools)", fontsize=9, y=0.998)
    return _save(fig, machine, path, top=1 - 0.75 / (2.3 * len(ops) + 0.8))


def latency_chart(rows: list[dict], machine: dict, path: Path) -> Path:
    """p50/p99/p99.9 bars per scenario (log scale)."""
    labels = [r["label"] for r in rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(rows) + 2), 4.2))
    width = 0.27
    for i, (key, name) in enumerate((("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9"))):
        ax.bar([x + (i - 1) * width for x in range(len(rows))], [r[key] for r in rows], width, label=name)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("end-to-end latency (ms)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Produce -> consume latency at fixed rates (acks=all, separate processes)", fontsize=10)
    return _save(fig, machine, path)


def members_chart(rows: list[dict], machine: dict, path: Path) -> Path:
    """Drain records/s and p99 latency of share groups vs classic groups by member count, per server."""
    counts = sorted({r["members"] for r in rows})
    kinds = [*MEMBER_KINDS, "perf-share"]
    series = [(s, k) for s in dict.fromkeys(r.get("server", "shoal") for r in rows) for k in kinds
              if any(r.get("server", "shoal") == s and r["kind"] == k for r in rows)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.85 / max(1, len(series))
    for i, (server, kind) in enumerate(series):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(counts))]
        mine = [r for r in rows if r.get("server", "shoal") == server and r["kind"] == kind]
        tput = [next((r["records_s"] for r in mine if r["members"] == n and "records_s" in r), 0) for n in counts]
        p99 = [next((r["p99_ms"] for r in mine if r["members"] == n and "p99_ms" in r), 0) for n in counts]
        name = f"{server} {MEMBER_KINDS.get(kind, 'share (perf-test)')}"
        left.bar(xs, tput, width, label=name, color=COLOUR.get(server), alpha=0.4 + 0.6 * (i % len(kinds)) / len(kinds))
        right.bar(xs, p99, width, label=name, color=COLOUR.get(server), alpha=0.4 + 0.6 * (i % len(kinds)) / len(kinds))
    for ax, title in ((left, "drain records/s"), (right, "p99 latency (ms)")):
        ax.set_xticks(range(len(counts)))
        ax.set_xticklabels([f"{n} members" for n in counts])
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    left.set_ylim(top=left.get_ylim()[1] * 1.6)  # headroom: the legend sits above the bars, not over them
    left.legend(fontsize=6, loc="upper right", ncol=2)
    fig.suptitle("Consumers on 16 partitions: share groups vs a classic group of the same size", fontsize=10)
    return _save(fig, machine, path)


YARDSTICK_SOURCES = {"kafka": ("Spark's Kafka source", "tab:gray"), "share": ("Shoal share source", "tab:blue"),
                     "arrow": ("Python source, Arrow from memory", "tab:green")}


def yardstick_chart(summary: list[dict], machine: dict, path: Path) -> Path:
    """bench/spark_yardstick.py: rows/s and CPU s per million rows of each source, a group of bars per record size,
    broker and executor count (the Arrow source reads no broker: its bar is the same in both brokers' groups)."""
    groups = sorted({(r["record_bytes"], r["broker"], r["executors"]) for r in summary if r["source"] != "arrow"})
    arrow = {(r["record_bytes"], r["executors"]): r for r in summary if r["source"] == "arrow"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(9.0, 1.3 * len(groups) + 3), 4.0))
    width = 0.8 / len(YARDSTICK_SOURCES)
    for i, (source, (name, colour)) in enumerate(YARDSTICK_SOURCES.items()):
        found = []
        for size, broker, executors in groups:
            row = arrow.get((size, executors)) if source == "arrow" else next(
                (r for r in summary if (r["record_bytes"], r["broker"], r["executors"], r["source"]) ==
                 (size, broker, executors, source)), None)
            found.append(row)
        xs = [x + (i - (len(YARDSTICK_SOURCES) - 1) / 2) * width for x in range(len(groups))]
        left.bar(xs, [(r["rows_s"] or 0) / 1000 if r else 0 for r in found], width, label=name, color=colour)
        right.bar(xs, [(r["cpu_s_per_m"] or 0) if r else 0 for r in found], width, label=name, color=colour)
    labels = [f"{'100 B' if s < 1024 else f'{s // 1024} KiB'}\n{b}\nlocal[{e}]" for s, b, e in groups]
    for ax, title in ((left, "steady rows/s (thousands)"), (right, "CPU s per million rows (Spark + broker)")):
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    left.set_ylim(top=left.get_ylim()[1] * 1.3)
    left.legend(fontsize=7, loc="upper right")
    fig.suptitle("Spark sources draining the same topic (medians of alternating rounds)", fontsize=10)
    return _save(fig, machine, path)


def _bars(ax, labels: list[str], values: dict[str, list[float]]) -> None:
    width = 0.85 / max(1, len(values))
    for i, (server, ys) in enumerate(values.items()):
        ax.bar([x + (i - (len(values) - 1) / 2) * width for x in range(len(labels))], ys, width, label=server,
               color=COLOUR.get(server))
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
    ax.grid(axis="y", alpha=0.3)


def transactions_chart(rows: list[dict], machine: dict, path: Path) -> Path:
    """Records/s per transaction variant (and fetch isolation level), a bar per server (log scale)."""
    keys = list(dict.fromkeys((r["variant"], r.get("producers", 1)) for r in rows))
    labels = [f"{v} x{n}" if v.startswith("txn") or v == "idempotent" else v for v, n in keys]
    values: dict[str, list[float]] = {}
    for server in dict.fromkeys(r["server"] for r in rows):
        values[server] = []
        for variant, n in keys:
            rates = sorted(r["records_s"] for r in rows if r["server"] == server and r["variant"] == variant
                           and r.get("producers", 1) == n and "records_s" in r)
            values[server].append(rates[len(rates) // 2] if rates else 0)
    fig, ax = plt.subplots(figsize=(8, 4))
    _bars(ax, labels, values)
    ax.set_yscale("log")
    ax.set_ylabel("records/s")
    ax.legend(fontsize=7)
    ax.set_title("Transactions of 1/100/1000 records by 1 and 8 producers; read_committed fetch", fontsize=10)
    return _save(fig, machine, path)


def resources_chart(rows: list[dict], machine: dict, path: Path) -> Path:
    """Start-up time, memory and CPU per GiB, a panel each, a bar per server."""
    panels = (("start to first ack (s)", ["first_ack_s"], ["first ack"]),
              ("resident memory (MiB)", ["rss_idle_mib", "rss_peak_mib"], ["idle", "peak"]),
              ("CPU s per GiB", ["cpu_s_per_gib_produce", "cpu_s_per_gib_consume", "cpu_s_per_gib_share_consume"],
               ["produced", "consumed", "share-consumed"]))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, (title, keys, labels) in zip(axes, panels, strict=True):
        _bars(ax, labels, {r["server"]: [r.get(k) or 0 for k in keys] for r in rows})
        ax.set_title(title, fontsize=10)
    axes[0].legend(fontsize=7)
    fig.suptitle("Resources of each server's process tree", fontsize=10)
    return _save(fig, machine, path)
