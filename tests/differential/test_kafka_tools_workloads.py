"""Differential: Kafka 4.4's workload tools against Kafka and against Shoal (docs/kafka-differences.md, "Kafka's
command-line tools"): kafka-producer-perf-test, kafka-consumer-perf-test, kafka-share-consumer-perf-test,
kafka-verifiable-producer, kafka-verifiable-consumer and kafka-verifiable-share-consumer, 1000 records each.

These tools exit through System.exit and print from shutdown hooks, so each runs in its own JVM; all twelve start
together, the consumers reading while the producers write. What
they print is compared by its structure, not its timings: the perf tools' header lines and that every figure parses,
the record counts; the verifiable tools' JSON events by name, with the records sent, acked and consumed (partition
and offset of each), the offsets committed and acknowledged, not how the records happened to be batched.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from typing import Any

import pytest

from tests.helpers import kafka_dist
from tests.helpers.differential import Pair, Target, assert_same
from tests.helpers.tool_groups import group_config
from tests.helpers.tool_state import create_topic

pytestmark = pytest.mark.integration

RECORDS = 1000
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def start(t: Target, name: str, *args: str) -> subprocess.Popen:
    # C1 only, as the administration tools: their figures are not compared, and twelve JVMs start at once
    return subprocess.Popen(kafka_dist.tool_command(name, [*args, "--bootstrap-server", t.bootstrap],
                                                    jvm_opts=kafka_dist.TOOL_JVM_OPTS),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def figures(line: str) -> list[str]:
    """A perf tool's line of figures: each parses as a number (replaced by <n>) or a date (<date>)."""
    out = []
    for cell in (c.strip() for c in line.split(",")):
        if re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", cell):
            out.append("<date>")
        else:
            assert NUMBER.match(cell), f"not a figure: {cell!r} in {line!r}"
            out.append("<n>")
    return out


def producer_perf(stdout: str) -> dict:
    """Its last line: the records sent, then the figures (rates, latencies) as words around numbers."""
    final = stdout.strip().splitlines()[-1]
    sent = int(final.split()[0])
    shape = re.sub(r"\d+(\.\d+)?", "<n>", final)
    return {"sent": sent, "summary": shape}


def consumer_perf(stdout: str, counted: str) -> dict:
    """The header, and the figures line: each parses; the records consumed (column `counted`) is compared."""
    header, *rest = [line for line in stdout.strip().splitlines() if not line.startswith("WARNING")]
    columns = [c.strip() for c in header.split(",")]
    values = dict(zip(columns, (c.strip() for c in rest[-1].split(",")), strict=True))
    return {"header": columns, "figures": figures(rest[-1]), "consumed": int(values[counted]),
            "warnings": [line for line in stdout.splitlines() if line.startswith("WARNING")]}


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def verifiable_producer(stdout: str) -> dict:
    evs = events(stdout)
    acked = Counter((e["partition"], e["offset"]) for e in evs if e["name"] == "producer_send_success")
    data = next(e for e in evs if e["name"] == "tool_data")
    return {"names": Counter(e["name"] for e in evs), "first": evs[0]["name"],
            "acked offsets": sorted(acked.items()) == [((p, o), 1) for p, o in sorted(acked)],
            "partitions": sorted({p for p, _ in acked}), "offsets": sorted(o for _, o in acked),
            "values": sorted(int(e["value"]) for e in evs if e["name"] == "producer_send_success"),
            "sent, acked": (data["sent"], data["acked"]), "target": data["target_throughput"]}


def verifiable_consumer(stdout: str) -> dict:
    evs = events(stdout)
    consumed: Counter = Counter()
    ranges: dict[int, list[int]] = {}
    for e in evs:
        if e["name"] == "records_consumed":
            for p in e["partitions"]:
                consumed[p["partition"]] += p["count"]
                lo, hi = ranges.get(p["partition"], [p["minOffset"], p["maxOffset"]])
                ranges[p["partition"]] = [min(lo, p["minOffset"]), max(hi, p["maxOffset"])]
    committed = {o["partition"]: o["offset"] for e in evs if e["name"] == "offsets_committed"
                 for o in e["offsets"]}
    names = [e["name"] for e in evs]
    return {"first": names[:2], "last": names[-3:], "names": sorted(set(names)),
            "consumed": dict(consumed), "offsets": ranges, "last committed": committed,
            "commits succeeded": all(e["success"] for e in evs if e["name"] == "offsets_committed")}


def verifiable_share_consumer(stdout: str) -> dict:
    evs = events(stdout)

    def offsets(name: str) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for e in evs:
            if e["name"] == name:
                for p in e["partitions"]:
                    out.setdefault(p["partition"], []).extend(p["offsets"])
        return {p: sorted(o) for p, o in out.items()}
    names = [e["name"] for e in evs]
    return {"first": names[:2], "last": names[-2:], "names": sorted(set(names)),
            "consumed": offsets("records_consumed"), "acknowledged": offsets("offsets_acknowledged"),
            "counts": sum(e["count"] for e in evs if e["name"] == "records_consumed")}


def test_workload_tools(pair: Pair) -> None:
    topics: dict[str, tuple[str, str]] = {}
    for t in pair:
        with t.raw() as c:
            # one partition each: the producers' sticky partitioner would pick a random one of several
            topics[t.name] = (create_topic(t, c, "tool-perf"), create_topic(t, c, "tool-verify"))
    running: dict[str, dict[str, subprocess.Popen]] = {}
    for t in pair:
        perf, verify = topics[t.name]
        share_perf, share_verify = t.unique("tool-perf-share"), t.unique("tool-verify-share")
        with t.raw() as c:  # the perf tool's share group reads from the start (the verifiable one sets it itself)
            group_config(c, share_perf, {"share.auto.offset.reset": "earliest"})
        wait = ["--timeout", "120000"]
        running[t.name] = {
            "producer perf": start(t, "kafka-producer-perf-test", "--topic", perf, "--num-records", str(RECORDS),
                                   "--record-size", "100", "--throughput", "-1", "--command-property", "acks=all",
                                   "linger.ms=5"),
            "verifiable producer": start(t, "kafka-verifiable-producer", "--topic", verify, "--max-messages",
                                         str(RECORDS)),
            "consumer perf": start(t, "kafka-consumer-perf-test", "--topic", perf, "--num-records", str(RECORDS),
                                   "--group", t.unique("tool-perf-group"), *wait),
            "share consumer perf": start(t, "kafka-share-consumer-perf-test", "--topic", perf, "--num-records",
                                         str(RECORDS), "--group", share_perf, *wait),
            "verifiable consumer": start(t, "kafka-verifiable-consumer", "--topic", verify, "--group-id",
                                         t.unique("tool-verify-group"), "--max-messages", str(RECORDS),
                                         "--group-protocol", "consumer"),
            "verifiable share consumer": start(t, "kafka-verifiable-share-consumer", "--topic", verify, "--group-id",
                                               share_verify, "--max-messages", str(RECORDS),
                                               "--offset-reset-strategy", "earliest"),
        }
    done: dict[str, dict[str, tuple[int, str, str]]] = {}
    try:
        for side, procs in running.items():
            for label, proc in procs.items():
                out, err = proc.communicate(timeout=300)
                done.setdefault(side, {})[label] = (proc.returncode, out, err)
    finally:
        for procs in running.values():
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)

    readers: dict[str, Any] = {
        "producer perf": producer_perf,
        "verifiable producer": verifiable_producer,
        "consumer perf": lambda out: consumer_perf(out, "data.consumed.in.nMsg"),
        "share consumer perf": lambda out: consumer_perf(out, "data.consumed.in.nMsg"),
        "verifiable consumer": verifiable_consumer,
        "verifiable share consumer": verifiable_share_consumer,
    }
    seen: dict[str, dict[str, Any]] = {}
    for side, runs in done.items():
        seen[side] = {}
        for label, (code, out, err) in runs.items():
            try:
                read = readers[label](out)
            except (AssertionError, StopIteration, ValueError, KeyError, IndexError) as e:
                read = f"unreadable: {e!r}"
            seen[side][label] = {"exit": code, "output": read,
                                 "errors": [line for line in err.splitlines() if " ERROR " in line or
                                            line.startswith("Exception")]}
    assert_same(seen, "the workload tools")
    for side in seen:  # and what they did is what was asked, on both
        assert seen[side]["producer perf"]["output"]["sent"] == RECORDS, seen[side]
        assert seen[side]["consumer perf"]["output"]["consumed"] == RECORDS, seen[side]
        assert seen[side]["share consumer perf"]["output"]["consumed"] == RECORDS, seen[side]
        assert seen[side]["verifiable producer"]["output"]["sent, acked"] == (RECORDS, RECORDS), seen[side]
        assert sum(seen[side]["verifiable consumer"]["output"]["consumed"].values()) == RECORDS, seen[side]
        assert seen[side]["verifiable share consumer"]["output"]["counts"] == RECORDS, seen[side]
