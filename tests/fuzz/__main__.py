"""Long fuzz campaign against a fresh broker process (`make fuzz FRAMES=1000000`).

    python -m tests.fuzz [--frames N] [--connections N] [--seed N] [--keep]

Starts `python -m broker` on a free loopback port with a temporary data directory, replays the corpus, sends
the mutated frames while sampling the broker's RSS and open descriptors, then checks that a normal client can
still produce and consume, and prints the figures. Exit code 1 if the broker died, stopped answering, or logged
an error or a plain-text line (a traceback outside structlog).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tests.fuzz.harness import FuzzRun


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the broker's data directory and log")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="shoal-fuzz-"))
    run = FuzzRun(tmp, python=sys.executable)
    print(f"fuzz: {args.frames} frames, {args.connections} connections, seed {args.seed}; broker log "
          f"{run.log_path}", flush=True)
    try:
        report = run.run(args.frames, args.connections, args.seed,
                         progress=lambda line: print(line, flush=True))
    finally:
        run.close(keep=args.keep)
    print(json.dumps(report, indent=2))
    ok = report["crashes"] == 0 and report["normal_client_ok"] and not report["log_problems"]
    if not ok:
        print(f"FAILED; broker log kept in {run.log_path}" if args.keep else "FAILED (run with --keep for the log)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
