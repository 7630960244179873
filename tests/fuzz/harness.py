"""One fuzz run: a fresh broker process, the campaign, resource sampling, a normal client afterwards, log checks.

Used by the suite's short campaign (tests/integration/server/test_fuzz.py) and by `python -m tests.fuzz`
(make fuzz).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fuzz.campaign import Stats, load_corpus, prepare, run_campaign, sasl_openings
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.proc_stats import open_fds, open_sockets, rss_mib

FD_LIMIT = 1024  # the broker's soft RLIMIT_NOFILE during a campaign

# A PLAINTEXT listener and a SASL_PLAINTEXT one (PLAIN users from JAAS, SCRAM users from the replayed corpus's
# AlterUserScramCredentials), so the campaign fuzzes authentication too.
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')
LISTENERS = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS}

# The broker's own lines in its log that are not JSON (BrokerProcess writes a "--- start:" line per start).
_OWN_PREFIXES = ("--- start:",)


class FuzzRun:
    def __init__(self, tmp: Path, *, python: str | None = None, overrides: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.log_path = tmp / "broker.log"
        self.broker = BrokerProcess(tmp / "data", self.log_path, overrides={**LISTENERS, **(overrides or {})},
                                    python=python)
        self.samples: list[tuple[float, float, int]] = []  # (time, rss MiB, fds)
        self.fd_limit = FD_LIMIT

    def close(self, keep: bool = False) -> None:
        self.broker.stop()
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self, frames: int, connections: int, seed: int,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
        self.start()
        return asyncio.run(self._run(frames, connections, seed, progress or (lambda _line: None)))

    def start(self) -> None:
        """Start the broker with a soft descriptor limit of FD_LIMIT (the child inherits it), so "descriptors
        stay bounded" is checked against a limit a campaign can reach: the broker's file cache uses half."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = min(FD_LIMIT, soft) if soft != resource.RLIM_INFINITY else FD_LIMIT
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
        try:
            self.broker.start()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        self.fd_limit = limit

    async def _run(self, frames: int, connections: int, seed: int, progress: Callable[[str], None]) -> dict:
        broker = self.broker
        pid = broker.pid
        corpus = load_corpus()
        corpus_frames = await prepare(broker.port, corpus)
        start_rss, start_fds, start_sockets = rss_mib(pid), open_fds(pid), open_sockets(pid)
        stats = Stats()
        campaign = asyncio.ensure_future(run_campaign(broker.port, corpus_frames, count=frames,
                                                      connections=connections, seed=seed, stats=stats,
                                                      sasl_port=broker.ports.get("SASL_PLAINTEXT"),
                                                      openings=sasl_openings(corpus)))
        last_report = time.monotonic()
        while not campaign.done():
            await asyncio.wait({campaign}, timeout=0.25)
            if not broker.alive():
                campaign.cancel()
                break
            self._sample(pid)
            if time.monotonic() - last_report >= 10:
                last_report = time.monotonic()
                _, rss, fds = self.samples[-1]
                progress(f"  {stats.frames} frames, {stats.connections} connections, "
                         f"{stats.closed_by_broker} closed by the broker, RSS {rss:.0f} MiB, {fds} fds")
        with contextlib.suppress(asyncio.CancelledError):
            await campaign
        crashed = not broker.alive()
        end_fds = end_sockets = None
        if not crashed:
            # The campaign's connections are closed: once the broker has noticed (its sockets are back to what
            # they were), count what stays open (segment files in the file cache).
            deadline = time.monotonic() + 30
            while open_sockets(pid) > start_sockets and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            self._sample(pid)
            end_fds = self.samples[-1][2]
            end_sockets = open_sockets(pid)
        normal_ok = False if crashed else await asyncio.to_thread(_normal_client, broker.bootstrap)
        crashed = crashed or not broker.alive()
        rss = [s[1] for s in self.samples] or [start_rss]
        fds = [s[2] for s in self.samples] or [start_fds]
        problems, warnings = scan_log(self.log_path)
        return {
            **stats.figures(),
            "crashes": int(crashed),
            "exit_code": broker.proc.returncode if broker.proc is not None and crashed else None,
            "rss_mib": {"start": round(start_rss), "peak": round(max(rss)), "end": round(rss[-1])},
            "fds": {"start": start_fds, "peak": max(fds), "end": end_fds, "limit": self.fd_limit,
                    "sockets_at_end": end_sockets, "sockets_at_start": start_sockets},
            "normal_client_ok": normal_ok,
            "log_problems": problems,
            "warnings": warnings,
        }

    def _sample(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            self.samples.append((time.monotonic(), rss_mib(pid), open_fds(pid)))


def _normal_client(bootstrap: str) -> bool:
    """A real client still works: create a topic, produce 100 records with acks=all, consume them back."""
    from tests.helpers.confluent_clients import consume_all, create_topic, produce_all

    try:
        create_topic(bootstrap, "after-fuzz")
        values = [f"after {i}".encode() for i in range(100)]
        produce_all(bootstrap, "after-fuzz", values)
        got = consume_all(bootstrap, "after-fuzz", 100, timeout=60)
        return [v for _, v, _ in got] == values
    except Exception:  # noqa: BLE001 - reported as a failed check
        return False


def scan_log(path: Path) -> tuple[list[str], dict[str, int]]:
    """(problems, warning counts): a problem is a line that is not JSON (a plain-text traceback, asyncio's own
    report) or an error/critical entry; warnings are counted by event."""
    problems: Counter[str] = Counter()
    warnings: Counter[str] = Counter()
    with contextlib.suppress(FileNotFoundError), open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith(_OWN_PREFIXES):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                problems[f"plain text: {line[:160]}"] += 1
                continue
            level = entry.get("level")
            if level in ("error", "critical"):
                detail = entry.get("exception")
                kind = detail[0].get("exc_type") if isinstance(detail, list) and detail else entry.get("error")
                problems[f"{level}: {entry.get('event')} ({kind}; api {entry.get('api')})"] += 1
            elif level == "warning":
                warnings[str(entry.get("event"))] += 1
    return [f"{text} x{n}" for text, n in problems.most_common(20)], dict(warnings.most_common(15))
