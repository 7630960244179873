"""Long-running campaigns against a real broker process (make crash-campaign, make conn-campaign)."""

from __future__ import annotations

import json


def run_and_report(campaign, tmp, *, keep: bool) -> int:
    """Run a campaign, close it (keeping its data directory with `keep`), print its JSON report; the exit code."""
    try:
        report = campaign.run()
    finally:
        campaign.close(keep=keep)
    print(json.dumps(report, indent=2, default=str))
    if not report["ok"]:
        print("FAILED" + (f"; data and log kept in {tmp}" if keep else " (run with --keep for the log)"))
    return 0 if report["ok"] else 1
