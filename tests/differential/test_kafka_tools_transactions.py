"""Differential: kafka-transactions 4.4 (list, describe, describe-producers, find-hanging, abort,
forceTerminateTransaction) against Kafka and against Shoal, and Shoal's own `shoal-transactions` judged by it on
both (docs/kafka-differences.md, "Kafka's command-line tools").

The transactions are made with raw requests (tests/helpers/txn_differential.py): one committed, one aborted, one
left open on partition 0, and one open transaction on each of partitions 1 and 2 that a tool aborts (Kafka's tool
one, Shoal's the other). A hanging transaction, which needs brokers without transaction verification, is found
and aborted by kafka-transactions in tests/differential/test_transactions_clients.py.

Producer ids differ between brokers: the tables' ProducerId column names them by order of appearance (`pid:N`);
TransactionDurationMs (a wall-clock age) is left out.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from shoal_client.cli_common import tool_version
from tests.helpers.console_scripts import run_script_batch
from tests.helpers.differential import KAFKA, SHOAL, Pair, Target, assert_same, known_difference
from tests.helpers.kafka_tools import on_pair, tool
from tests.helpers.tool_output import column, normalised
from tests.helpers.txn_differential import TxnSession, txn_batch

pytestmark = pytest.mark.integration

BASES = ("tool-tx-open", "tool-tx-done", "tool-tx-aborted", "tool-tx-abort", "tool-tx-forced")
TOOL_TIMEOUTS = "default.api.timeout.ms=3000\nrequest.timeout.ms=2000\n"


class TxnState:
    def __init__(self, t: Target, tmp: Path) -> None:
        self.s = s = TxnSession(t)
        self.topic = s.topic("tool-tx-topic", 3)
        self.open, self.done, self.aborted = t.unique("tool-tx-open"), t.unique("tool-tx-done"), t.unique("tool-tx-aborted")
        self.by_kafka, self.by_shoal = t.unique("tool-tx-abort"), t.unique("tool-tx-abort")
        self.forced, self.forced_by_shoal = t.unique("tool-tx-forced"), t.unique("tool-tx-forced")
        s.ready(self.open, self.done, self.aborted, self.by_kafka, self.by_shoal, self.forced, self.forced_by_shoal)
        s.produce(self.topic, 0, txn_batch(-1, -1, -1, [b"plain"], transactional=False), None)
        self.starts: dict[str, int] = {}
        self.producers: dict[str, tuple[int, int]] = {}
        for tid, partition, end in ((self.done, 0, True), (self.aborted, 0, False), (self.open, 0, None),
                                    (self.by_kafka, 1, None), (self.by_shoal, 2, None), (self.forced, 0, None),
                                    (self.forced_by_shoal, 0, None)):
            pid, epoch = s.producer(tid)
            self.producers[tid] = (pid, epoch)
            assert s.add(tid, pid, epoch, {self.topic: [partition]})[0][2] == 0
            code, base, *_ = s.produce(self.topic, partition, txn_batch(pid, epoch, 0, [b"x", b"y"]), tid)
            assert code == 0
            self.starts[tid] = base
            if end is not None:
                s.end(tid, pid, epoch, end)
                s.wait_state(tid, "CompleteCommit" if end else "CompleteAbort")
        self.timeouts = tmp / f"{t.name}-timeouts.properties"
        self.timeouts.write_text(TOOL_TIMEOUTS)

    def read_only(self) -> dict[str, list[str]]:
        topic = self.topic
        return {
            "list": ["list"],
            "list, longer than ten minutes": ["list", "--duration-filter", "600000"],
            "describe, open": ["describe", "--transactional-id", self.open],
            "describe, committed": ["describe", "--transactional-id", self.done],
            "describe, aborted": ["describe", "--transactional-id", self.aborted],
            "describe, missing": ["describe", "--transactional-id", f"{self.open}-none"],
            "describe-producers": ["describe-producers", "--topic", topic, "--partition", "0"],
            "describe-producers, a broker": ["describe-producers", "--topic", topic, "--partition", "1",
                                             "--broker-id", "1"],
            "describe-producers, no producer": ["describe-producers", "--topic", topic, "--partition", "2",
                                                "--broker-id", "1"],
            # a broker's replicas of one topic: other tests' topics come and go while the tool scans them
            "find-hanging, a broker": ["find-hanging", "--broker-id", "1", "--topic", topic],
            "find-hanging, a topic, no bound": ["find-hanging", "--topic", topic, "--max-transaction-timeout", "0"],
            "find-hanging, a partition": ["find-hanging", "--topic", topic, "--partition", "0"],
            "find-hanging, no scope": ["find-hanging"],
            "find-hanging, a partition without a topic": ["find-hanging", "--broker-id", "1", "--partition", "0"],
            "abort, no transaction at the offset": ["abort", "--topic", topic, "--partition", "0",
                                                    "--start-offset", "99"],
            "abort, no identification": ["abort", "--topic", topic, "--partition", "0"],
            "abort, producer without epochs": ["abort", "--topic", topic, "--partition", "0", "--producer-id", "5"],
            "no command": [],
            "help": ["--help"],
            "help of a command": ["list", "--help"],
            "version": ["--version"],
        }

    def slow(self) -> dict[str, list[str]]:
        """Commands on what does not exist: the admin client retries until its (shortened) timeout."""
        return {"describe-producers, missing topic": [
            "--command-config", str(self.timeouts), "describe-producers", "--topic", f"{self.topic}-none",
            "--partition", "0"]}

    def force(self, tid: str) -> dict[str, list[str]]:
        return {"force terminate": ["forceTerminateTransaction", "--transactionalId", tid],
                "describe, forced": ["describe", "--transactional-id", tid],
                "force terminate, no id": ["forceTerminateTransaction"]}

    def abort(self, tid: str, partition: int) -> dict[str, list[str]]:
        pid, epoch = self.producers[tid]
        return {
            "abort": ["abort", "--topic", self.topic, "--partition", str(partition), "--start-offset",
                      str(self.starts[tid])],
            "describe-producers after the abort": ["describe-producers", "--topic", self.topic, "--partition",
                                                   str(partition)],
            "abort again": ["abort", "--topic", self.topic, "--partition", str(partition), "--producer-id",
                            str(pid), "--producer-epoch", str(epoch), "--coordinator-epoch", "0"],
        }


def shape_for(states: dict[str, TxnState], across_brokers: bool) -> Any:
    def shape(target: Target) -> Any:
        s = states[target.name].s

        def one(label: str, seen: dict) -> dict:
            out = column(seen["stdout"], "ProducerId", lambda v: str(s.pid(int(v))) if v.lstrip("-").isdigit() else v)
            out = column(out, "TransactionDurationMs", lambda v: "<duration>")
            if label.startswith("list"):  # ours only (other tests' transactions left out)
                out = out[:1] + [line for line in out[1:] if line[0] in BASES]
            if across_brokers and label.startswith(("list", "describe-producers")):
                # each broker's coordinator lists its transactions, and a partition its producers, in a hash map's
                # order (of ids that differ between brokers)
                out = out[:1] + sorted(out[1:])
            seen["stdout"] = out
            # the admin client's timeout, in one wording or another depending on where it was when it gave up
            seen["stderr"] = [line[:line.index("leader:") + 1] + ["<the admin client timed out>"]
                              if "leader:" in line and re.search("[Tt]imed out", " ".join(line)) else line
                              for line in seen["stderr"]]
            return seen
        return one
    return shape


def kafka_tool(t: Target, lines: dict[str, list[str]]) -> dict:
    return {label: tool("kafka-transactions", "--bootstrap-server", t.bootstrap, *args) for label, args in lines.items()}


def both_tools(pair: Pair, kafkas: Any, shoals: Any) -> tuple[dict, dict]:
    """Kafka's tool with `kafkas(target)` command lines and Shoal's with `shoals(target)`, on both brokers, all at
    once: ({broker: {label: run}} of Kafka's tool, the same of Shoal's)."""
    with ThreadPoolExecutor(2) as pool:
        mine = {t.name: pool.submit(run_script_batch, "shoal-transactions", [
            ["--bootstrap-server", t.bootstrap, *args] for args in shoals(t).values()]) for t in pair}
        theirs = on_pair(pair, lambda t: kafka_tool(t, kafkas(t)))
        return theirs, {t.name: dict(zip(shoals(t), mine[t.name].result(), strict=True)) for t in pair}


def test_kafka_transactions(pair: Pair, tmp_path: Path) -> None:
    states = {t.name: TxnState(t, tmp_path) for t in pair}
    try:
        # what neither changes, by both tools at once; then each tool aborts its own transaction
        theirs, mine = both_tools(pair, lambda t: {**states[t.name].read_only(), **states[t.name].slow()},
                                  lambda t: states[t.name].read_only())
        then_theirs, then_mine = both_tools(
            pair, lambda t: {**states[t.name].abort(states[t.name].by_kafka, 1),
                             **states[t.name].force(states[t.name].forced)},
            lambda t: {**states[t.name].abort(states[t.name].by_shoal, 2),
                       **states[t.name].force(states[t.name].forced_by_shoal)})
    finally:
        for st in states.values():
            st.s.close()
    # 1. Kafka's tool against Kafka and against Shoal (producers in each broker's own order: ids differ)
    shapes = shape_for(states, across_brokers=True)
    seen = {t.name: normalised(t, {**theirs[t.name], **then_theirs[t.name]}, shapes(t)) for t in pair}
    assert_same(seen, "kafka-transactions")

    # 2. Shoal's tool judged by Kafka's, against each broker, on the same command lines
    shapes = shape_for(states, across_brokers=False)
    for t in pair:
        mine_runs = {**mine[t.name], **then_mine[t.name]}
        judged = {KAFKA: normalised(t, {k: v for k, v in {**theirs[t.name], **then_theirs[t.name]}.items()
                                        if k in mine_runs}, shapes(t)),
                  SHOAL: normalised(t, mine_runs, shapes(t))}
        for side in judged:
            for label in ("no command", "find-hanging, a partition without a topic", "force terminate, no id"):
                # usage errors: Kafka's tool (argparse4j) and Shoal's (argparse) word their usage each their own way;
                # the message, after the program's name
                judged[side][label]["stderr"] = [line[1:] for line in judged[side][label]["stderr"][-1:]]
            for label in ("help", "help of a command"):  # each its own help text, on standard output
                judged[side][label]["stdout"] = ["<its help>"] if judged[side][label]["stdout"] else []
            # each tool aborted, and force-terminated, a transaction of its own
            for label in ("describe-producers after the abort", "describe, forced"):
                judged[side][label]["stdout"] = column(judged[side][label]["stdout"], "ProducerId",
                                                       lambda v: "<its own>")
        # --version: each tool its own distribution's
        known_difference({side: judged[side]["version"].pop("stdout") for side in judged},
                         kafka=[["4.4.0", "(Commit:1156b2752aaa28ea)"]], shoal=[[tool_version()]],
                         reason="Shoal's tools print Shoal's version")
        assert_same(judged, f"shoal-transactions against {t.name}")
