"""Differential: kafka-share-groups (every option) and kafka-consumer-groups, Kafka 4.4's tools against Kafka and
against Shoal; and Shoal's own `shoal-share-groups` judged by kafka-share-groups (docs/kafka-differences.md,
"Kafka's command-line tools").

The same groups are set up on both brokers with raw requests (share-group members of our own, acknowledging chosen
records) and a KIP-848 consumer kept alive while the tools look. Kafka's tool runs against both brokers (one JVM per
broker, tests/helpers/kafka_tools.py); `shoal-share-groups` (the console script, from this checkout) runs the same
command lines against both brokers and must print what kafka-share-groups prints there: the same columns, rows,
order and messages. Commands that change a group run against copies of it, one per tool. `--describe --all-groups`
is not compared: on the run's shared Kafka, other tests' groups come and go between the listing and the describing
(Shoal's tool's --all-groups is tested in tests/integration/share/test_share_groups_cli.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from shoal_client.cli_common import tool_version
from tests.helpers.console_scripts import run_script_batch
from tests.helpers.differential import KAFKA, SHOAL, Pair, Target, assert_same, known_difference
from tests.helpers.kafka_tools import on_pair, tool
from tests.helpers.own_pair import own_pair
from tests.helpers.tool_groups import LiveConsumer, ShareMember, commit, group_config
from tests.helpers.tool_output import normalised, outcome
from tests.helpers.tool_state import create_topic, offsets_topic, produce

pytestmark = pytest.mark.integration

EARLIEST = {"share.auto.offset.reset": "earliest"}


def ours(lines: list[list[str]], *bases: str) -> list[list[str]]:
    """Blank lines, headers and lines naming one of `bases` (a whole token, quoted or not): other tests' groups on
    the shared Kafka left out."""
    pattern = re.compile(rf"^'?({'|'.join(map(re.escape, bases))})'?[.,:]?$")
    return [line for line in lines if not line or line[0] in ("GROUP", "TOPIC") or any(pattern.match(t) for t in line)]


def run_scripts(name: str, runs: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[str, dict[str, Any]]:
    """Console script `name` with each broker's command lines ({broker: {label: args}}): one interpreter per broker
    running them in order (tests/helpers/console_scripts.py), the brokers' side by side."""
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {side: pool.submit(run_script_batch, name, [list(a) for a in lines.values()])
                   for side, lines in runs.items()}
        return {side: dict(zip(runs[side], future.result(), strict=True)) for side, future in futures.items()}


def java_trace(line: list[str]) -> bool:
    """A line of the exception Kafka's tool prints on standard error after its message (ExecutionException,
    Caused by, ...): Shoal's tools print the message only."""
    return bool(line) and (line[0].startswith(("java.", "joptsimple.", "org.apache.kafka."))
                           or line[:2] == ["Caused", "by:"])


# ------------------------------------------------------------------------------------------- kafka-share-groups

SHARE_BASES = ("tool-sg-topic", "tool-sg-active", "tool-sg-empty", "tool-sg-gone")


class ShareState:
    """One broker's share groups: `active` (a member with partition 0's first record accepted), `empty` (no
    member; records 0-1 of partition 0 and 0 of partition 1 accepted) for the read-only commands, and copies of
    `empty` for the commands that change it: one for Kafka's tool, one for Shoal's."""

    def __init__(self, t: Target, tmp: Path) -> None:
        with t.raw() as c:
            offsets_topic(c)
            self.topic = create_topic(t, c, "tool-sg-topic", 2)
            produce(c, self.topic, 0, [f"v{i}".encode() for i in range(4)])
            produce(c, self.topic, 1, [b"v0", b"v1"])
            self.active = t.unique("tool-sg-active")
            self.empty, self.kafkas, self.shoals = (t.unique("tool-sg-empty") for _ in range(3))
            self.gone = t.unique("tool-sg-gone")
            for group in (self.active, self.empty, self.kafkas, self.shoals):
                group_config(c, group, EARLIEST)
        for group in (self.empty, self.kafkas, self.shoals):
            m = ShareMember(t, group, self.topic, 2)
            m.accept({0: 2, 1: 1})
            m.release_next([0, 1])
            m.leave()
        self.member = ShareMember(t, self.active, self.topic, 2)
        self.member.accept({0: 1})
        self.member.release_next([0])
        self.member.keep_alive()
        self.csv = tmp / f"{t.name}-offsets.csv"
        self.csv.write_text(f"{self.topic},0,3\n{self.topic},1,2\n")
        self.config = tmp / f"{t.name}-share-tool.properties"  # what both tools read of an admin client's configs
        self.config.write_text("security.protocol=PLAINTEXT\nclient.id=tool-sg-client\n")

    def read_only(self, t: Target) -> dict[str, list[str]]:
        topic, active, empty = self.topic, self.active, self.empty
        reset = ["--reset-offsets", "--group", empty, "--dry-run"]
        return {
            "list": ["--list"],
            "list, states": ["--list", "--state"],
            "list, stable": ["--list", "--state", "Stable"],
            "list, two states in any case": ["--list", "--state", "empty,STABLE"],
            "list, bad state": ["--list", "--state", "Busy"],
            "describe": ["--describe", "--group", active],
            "describe empty": ["--describe", "--group", empty],
            "describe, verbose": ["--describe", "--group", active, "--verbose"],
            "describe, offsets verbose": ["--describe", "--group", empty, "--offsets", "--verbose"],
            "describe, two groups": ["--describe", "--group", empty, "--group", active],
            "describe, command config": ["--command-config", str(self.config), "--describe", "--group", active],
            "describe, a timeout": ["--describe", "--group", empty, "--timeout", "10000"],
            "list, a timeout that is not a number": ["--list", "--timeout", "abc"],
            "members": ["--describe", "--group", active, "--members"],
            "members, verbose": ["--describe", "--group", active, "--members", "--verbose"],
            "members of an empty group": ["--describe", "--group", empty, "--members"],
            "state": ["--describe", "--group", active, "--state"],
            "state, verbose": ["--describe", "--group", active, "--state", "--verbose"],
            "state of an empty group": ["--describe", "--group", empty, "--state"],
            "describe a missing group": ["--describe", "--group", self.gone],
            "describe a missing group and another": ["--describe", "--group", active, "--group", self.gone],
            "reset to earliest": [*reset, "--topic", topic, "--to-earliest"],
            "reset to latest, one partition": [*reset, "--topic", f"{topic}:1", "--to-latest"],
            "reset to a datetime": [*reset, "--all-topics", "--to-datetime", "2020-01-01T00:00:00.000"],
            "reset to an offset": [*reset, "--all-topics", "--to-offset", "1"],
            "reset to an offset past the end": [*reset, "--all-topics", "--to-offset", "99"],
            "reset to current": [*reset, "--all-topics", "--to-current"],
            "reset to an offset that is not a number": [*reset, "--all-topics", "--to-offset", "abc"],
            "reset, export": [*reset, "--all-topics", "--to-earliest", "--export"],
            "reset from a file": [*reset, "--from-file", str(self.csv)],
            "reset, missing topic": [*reset, "--topic", f"{topic}-none", "--to-earliest"],
            "reset, missing partition": [*reset, "--topic", f"{topic}:7", "--to-earliest"],
            "reset, active group": ["--reset-offsets", "--group", active, "--all-topics", "--to-earliest",
                                    "--execute"],
            "reset, two groups": ["--reset-offsets", "--group", empty, "--group", active, "--all-topics",
                                  "--to-earliest", "--execute"],
            "delete offsets, active group": ["--delete-offsets", "--group", active, "--topic", topic],
            "delete, active group": ["--delete", "--group", active],
            "delete, missing group": ["--delete", "--group", self.gone],
        }

    def changing(self, group: str) -> dict[str, list[str]]:
        topic = self.topic
        return {
            "reset to latest": ["--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute"],
            "describe after reset": ["--describe", "--group", group],
            "reset from a file, executed": ["--reset-offsets", "--group", group, "--from-file", str(self.csv),
                                            "--execute"],
            "describe after the file": ["--describe", "--group", group],
            "delete offsets": ["--delete-offsets", "--group", group, "--topic", topic, "--topic", f"{topic}-none"],
            "describe after deleting offsets": ["--describe", "--group", group],
            "delete": ["--delete", "--group", group],
            "delete again": ["--delete", "--group", group],
        }


USAGE = {
    "help": ["--help"],
    "version": ["--version"],
    "no action": ["--group", "g"],
    "two actions": ["--list", "--describe"],
    "describe without a group": ["--describe"],
    "describe, group and all groups": ["--describe", "--group", "g", "--all-groups"],
    "describe, two views": ["--describe", "--group", "g", "--members", "--state"],
    "describe, a state's value": ["--describe", "--group", "g", "--state", "Stable"],
    "describe, a topic": ["--describe", "--group", "g", "--topic", "t"],
    "list, a group": ["--list", "--group", "g"],
    "list, members": ["--list", "--members"],
    "delete without a group": ["--delete"],
    "delete, group and all groups": ["--delete", "--group", "g", "--all-groups"],
    "delete, a topic": ["--delete", "--group", "g", "--topic", "t"],
    "delete offsets without a topic": ["--delete-offsets", "--group", "g"],
    "reset, no execution option": ["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest"],
    "reset, both execution options": ["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest",
                                      "--execute", "--dry-run"],
    "reset, no group": ["--reset-offsets", "--all-topics", "--to-earliest", "--execute"],
    "reset, no scenario": ["--reset-offsets", "--group", "g", "--all-topics", "--execute"],
    "reset, no scope": ["--reset-offsets", "--group", "g", "--to-offset", "3", "--execute"],
    "reset, two scenarios": ["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest",
                             "--execute"],
    "reset, topic and all topics": ["--reset-offsets", "--group", "g", "--all-topics", "--topic", "t",
                                    "--to-earliest", "--execute"],
    "reset, file and all topics": ["--reset-offsets", "--group", "g", "--all-topics", "--from-file", "x.csv",
                                   "--execute"],
    "reset, all groups": ["--reset-offsets", "--all-groups", "--all-topics", "--to-earliest", "--dry-run"],
    "delete offsets, all groups": ["--delete-offsets", "--all-groups", "--topic", "t"],
}


def kafka_tool(args: Callable[[Target], Mapping[str, Sequence[str]]]) -> Callable[[Target], dict]:
    return lambda t: {label: tool("kafka-share-groups", "--bootstrap-server", t.bootstrap, *a)
                      for label, a in args(t).items()}


def share_shape(label: str, seen: dict) -> dict:
    if label.startswith("list"):
        seen["stdout"] = ours(seen["stdout"], *SHARE_BASES)
    return seen


def test_kafka_share_groups(pair: Pair, tmp_path: Path) -> None:
    states = {t.name: ShareState(t, tmp_path) for t in pair}
    try:
        read = kafka_tool(lambda t: states[t.name].read_only(t))
        usage = kafka_tool(lambda t: USAGE)
        theirs = on_pair(pair, lambda t: {**read(t), **{f"usage: {k}": v for k, v in usage(t).items()}})
        # Shoal's tool, the same read-only command lines, the same state
        mine = run_scripts("shoal-share-groups", {t.name: {
            **{label: ["--bootstrap-server", t.bootstrap, *args] for label, args in states[t.name].read_only(t).items()},
            **{f"usage: {k}": ["--bootstrap-server", t.bootstrap, *v] for k, v in USAGE.items()}} for t in pair})
    finally:
        for s in states.values():
            s.member.leave()
    changed_theirs = on_pair(pair, kafka_tool(lambda t: states[t.name].changing(states[t.name].kafkas)))
    changed_mine = run_scripts("shoal-share-groups", {t.name: {
        label: ["--bootstrap-server", t.bootstrap, *args]
        for label, args in states[t.name].changing(states[t.name].shoals).items()} for t in pair})

    def shape(label: str, seen: dict) -> dict:
        seen = share_shape(label, seen)
        if label == "list, bad state":  # Kafka's tool names the valid states in a hash set's order, per JVM
            seen["stderr"] = [line[:line.index("are:") + 1] + sorted(t.strip(",") for t in line[line.index("are:") + 1:])
                              if "are:" in line else line for line in seen["stderr"]]
        if label.startswith("usage: ") or label == "list, bad state":
            seen["stderr"] = seen["stderr"][:1]  # the message: Kafka's tool prints its help after it
        else:
            seen["stderr"] = [line for line in seen["stderr"] if not java_trace(line)]
        return seen

    def by_partition(label: str, seen: dict) -> dict:
        """The partitions of a reset in order: Kafka's tool prints them in a hash map's order of the topic's name
        (each broker's topic has its own)."""
        seen = shape(label, seen)
        if label.startswith("reset"):
            seen["stdout"], seen["stderr"] = sorted(seen["stdout"]), sorted(seen["stderr"])
        return seen

    def as_messages(label: str, seen: dict) -> dict:
        """What Shoal's tool is judged on besides the output: the message of a log line, without log4j's time and
        logger, and of a Java exception thrown at the command line, without its class (it prints neither)."""
        seen = shape(label, seen)
        for line in seen["stderr"]:
            if line[:1] == ["[<time>]"]:
                del line[0]
                if line and line[-1].startswith("(org.apache.kafka"):
                    del line[-1]
            if line[:4] == ["Exception", "in", "thread", '"main"'] and line[4:5] and line[4].startswith("joptsimple"):
                del line[:5]
        return seen

    # 1. Kafka's tool against Kafka and against Shoal
    seen = outcome(pair, {side: {**theirs[side], **changed_theirs[side]} for side in theirs}, by_partition)
    for side in seen:
        for label in ("list", "list, states", "list, two states in any case"):
            seen[side][label]["stdout"].sort()  # the group coordinator's order: a hash map's in Kafka
    assert_same(seen, "kafka-share-groups")

    # 2. Shoal's tool judged by Kafka's, against each broker
    for t in pair:
        judged = {KAFKA: normalised(t, {**theirs[t.name], **changed_theirs[t.name]}, as_messages),
                  SHOAL: normalised(t, {**mine[t.name], **changed_mine[t.name]}, as_messages)}
        exits = {side: {label: run["exit"] for label, run in judged[side].items()} for side in judged}
        # Shoal's tool exits 1 where a group or topic could not be acted on (Kafka's prints the error, exits 0)
        failing = {"describe a missing group", "describe a missing group and another", "reset, two groups",
                   "reset, missing topic", "reset, missing partition", "list, a timeout that is not a number",
                   "reset to an offset that is not a number",
                   "delete offsets, active group", "delete, active group", "delete, missing group",
                   "delete offsets", "delete again"}
        known_difference({side: {label: code for label, code in codes.items() if label in failing}
                          for side, codes in exits.items()},
                         kafka=dict.fromkeys(failing, 0), shoal=dict.fromkeys(failing, 1),
                         reason="shoal-share-groups exits 1 on failures")
        for side in judged:
            for label in failing:
                judged[side][label]["exit"] = "<exit>"
        # --version: each tool its own distribution's
        known_difference({side: judged[side]["usage: version"].pop("stdout") for side in judged},
                         kafka=[["4.4.0"]], shoal=[[tool_version()]], reason="Shoal's tools print Shoal's version")
        assert_same(judged, f"shoal-share-groups against {t.name}")


# ------------------------------------------------------------ kafka-share-groups over every share group of a broker

ALL_ACTIVE, ALL_EMPTY = "tool-sg-all-active", ("tool-sg-all-empty-a", "tool-sg-all-empty-b")
ALL_GROUPS = {
    "list": ["--list"],
    "list, states": ["--list", "--state"],
    "describe, all groups": ["--describe", "--all-groups"],
    "describe, all groups, verbose": ["--describe", "--all-groups", "--offsets", "--verbose"],
    "members, all groups": ["--describe", "--all-groups", "--members"],
    "members, all groups, verbose": ["--describe", "--all-groups", "--members", "--verbose"],
    "state, all groups": ["--describe", "--all-groups", "--state"],
    "state, all groups, verbose": ["--describe", "--all-groups", "--state", "--verbose"],
}
DELETE_ALL = {"delete, all groups": ["--delete", "--all-groups"], "list after deleting": ["--list", "--state"]}


def empty_share_groups(t: Target, topic: str) -> None:
    """The empty share groups (again, once deleted), made the same way on each broker: a member accepts records of
    partition 0 (one more in each group) and leaves."""
    with t.raw() as c:
        for group in ALL_EMPTY:
            group_config(c, group, EARLIEST)
    for i, group in enumerate(ALL_EMPTY):
        m = ShareMember(t, group, topic, 2)
        m.accept({0: 1 + i})
        m.release_next([0])
        m.leave()


def test_kafka_share_groups_all_groups(tmp_path: Path, kafka_registry: Path) -> None:
    """--all-groups and the unfiltered listings, on a Kafka node and a Shoal broker of this test's own (on the
    run's shared Kafka other tests' groups come and go, and --delete --all-groups would take theirs): a share group
    with a live member, two empty ones and a classic group (not listed). Kafka's tool against both, then Shoal's
    judged by it; each tool's --delete --all-groups deletes the empty groups, which are made again in between.
    Group names are the same on both brokers: the order of the groups is compared too."""
    with own_pair(tmp_path / "brokers", kafka_registry, label="Kafka for --all-groups") as pair:
        topics, members = {}, {}
        try:
            for t in pair:
                with t.raw() as c:
                    offsets_topic(c)
                    topics[t.name] = topic = create_topic(t, c, "tool-sg-all", 2)
                    produce(c, topic, 0, [f"v{i}".encode() for i in range(4)])
                    produce(c, topic, 1, [b"v0", b"v1"])
                    commit(c, "tool-sg-all-classic", topic, {0: 1})
                    group_config(c, ALL_ACTIVE, EARLIEST)
                empty_share_groups(t, topic)
                members[t.name] = m = ShareMember(t, ALL_ACTIVE, topic, 2)
                m.accept({1: 1})
                m.release_next([1])
                m.keep_alive()
            with ThreadPoolExecutor(1) as pool:
                mine_future = pool.submit(run_scripts, "shoal-share-groups", {
                    t.name: {label: ["--bootstrap-server", t.bootstrap, *a] for label, a in ALL_GROUPS.items()}
                    for t in pair})
                theirs = on_pair(pair, kafka_tool(lambda t: ALL_GROUPS))
                mine = mine_future.result()
            # each tool deletes once the other has looked
            theirs_deleting = on_pair(pair, kafka_tool(lambda t: DELETE_ALL))
            theirs = {side: {**theirs[side], **theirs_deleting[side]} for side in theirs}
            for t in pair:
                empty_share_groups(t, topics[t.name])
            mine_deleting = run_scripts("shoal-share-groups", {t.name: {
                label: ["--bootstrap-server", t.bootstrap, *a] for label, a in DELETE_ALL.items()} for t in pair})
        finally:
            for m in members.values():
                m.leave()

    def shape(label: str, seen: dict) -> dict:
        seen["stderr"] = [line for line in seen["stderr"] if not java_trace(line)]
        return seen

    # 1. Kafka's tool against Kafka and against Shoal
    assert_same(outcome(pair, theirs, shape), "kafka-share-groups --all-groups")
    # 2. Shoal's tool judged by Kafka's against each broker (it exits 1 where a group could not be deleted)
    for t in pair:
        judged = {KAFKA: normalised(t, theirs[t.name], shape),
                  SHOAL: normalised(t, {**mine[t.name], **mine_deleting[t.name]}, shape)}
        known_difference({side: judged[side]["delete, all groups"]["exit"] for side in judged}, kafka=0, shoal=1,
                         reason="shoal-share-groups exits 1 on failures")
        for side in judged:
            judged[side]["delete, all groups"]["exit"] = "<exit>"
        assert_same(judged, f"shoal-share-groups --all-groups against {t.name}")


# ---------------------------------------------------------------------------------------- kafka-consumer-groups

CONSUMER_BASES = ("tool-cg-topic", "tool-cg-empty", "tool-cg-copy", "tool-cg-live", "tool-cg-gone")


def test_kafka_consumer_groups(pair: Pair, tmp_path: Path) -> None:
    """A classic group with committed offsets and no member (`empty`, and `copy` for the commands that change
    it), and a KIP-848 consumer group with a live member (confluent-kafka, group.protocol=consumer)."""
    state: dict[str, dict[str, Any]] = {}
    for t in pair:
        with t.raw() as c:
            offsets_topic(c)
            topic = create_topic(t, c, "tool-cg-topic", 2)
            produce(c, topic, 0, [f"v{i}".encode() for i in range(5)])
            produce(c, topic, 1, [b"v0", b"v1", b"v2"])
            empty, copy = t.unique("tool-cg-empty"), t.unique("tool-cg-copy")
            for group in (empty, copy):
                commit(c, group, topic, {0: 2, 1: 3})
        csv = tmp_path / f"{t.name}-offsets.csv"
        csv.write_text(f"{topic},0,4\n{topic},1,1\n")
        live = t.unique("tool-cg-live")
        state[t.name] = {"topic": topic, "empty": empty, "copy": copy, "live": live, "csv": str(csv),
                         "gone": t.unique("tool-cg-gone"),
                         "consumer": LiveConsumer(t, live, [topic], 8, "tool-client")}
    try:
        for s in state.values():
            s["consumer"].ready()

        def script(t: Target) -> dict:
            s = state[t.name]
            topic, empty, live = s["topic"], s["empty"], s["live"]

            def cg(*args: str) -> object:
                return tool("kafka-consumer-groups", "--bootstrap-server", t.bootstrap, *args)
            reset = ["--reset-offsets", "--group", empty, "--dry-run"]
            return {
                "list": cg("--list"),
                "list, states": cg("--list", "--state"),
                "list, types": cg("--list", "--type"),
                "list, empty classic groups": cg("--list", "--state", "Empty", "--type", "classic"),
                "describe": cg("--describe", "--group", empty),
                "describe, live": cg("--describe", "--group", live),
                "describe, live, verbose": cg("--describe", "--group", live, "--verbose"),
                "describe, two groups": cg("--describe", "--group", live, "--group", empty),
                "members": cg("--describe", "--group", live, "--members"),
                "members, verbose": cg("--describe", "--group", live, "--members", "--verbose"),
                "members of an empty group": cg("--describe", "--group", empty, "--members"),
                "state": cg("--describe", "--group", live, "--state"),
                "state, verbose": cg("--describe", "--group", live, "--state", "--verbose"),
                "state of an empty group": cg("--describe", "--group", empty, "--state"),
                "describe a missing group": cg("--describe", "--group", s["gone"]),
                "reset to earliest": cg(*reset, "--topic", topic, "--to-earliest"),
                "reset to latest": cg(*reset, "--all-topics", "--to-latest"),
                "reset to an offset": cg(*reset, "--topic", f"{topic}:1", "--to-offset", "1"),
                "reset to an offset past the end": cg(*reset, "--all-topics", "--to-offset", "99"),
                "reset, shift back": cg(*reset, "--all-topics", "--shift-by", "-1"),
                "reset, shift past the end": cg(*reset, "--all-topics", "--shift-by", "10"),
                "reset by duration": cg(*reset, "--all-topics", "--by-duration", "P1D"),
                "reset by a zero duration": cg(*reset, "--all-topics", "--by-duration", "PT0S"),
                "reset to a datetime": cg(*reset, "--all-topics", "--to-datetime", "2020-01-01T00:00:00.000"),
                "reset to current": cg(*reset, "--all-topics", "--to-current"),
                "reset, export": cg(*reset, "--all-topics", "--to-earliest", "--export"),
                "reset from a file": cg(*reset, "--from-file", s["csv"]),
                "reset, missing topic": cg(*reset, "--topic", f"{topic}-none", "--to-earliest"),
                "reset, live group": cg("--reset-offsets", "--group", live, "--all-topics", "--to-earliest",
                                        "--execute"),
                "reset, executed": cg("--reset-offsets", "--group", s["copy"], "--topic", topic, "--to-earliest",
                                      "--execute"),
                "describe after the reset": cg("--describe", "--group", s["copy"]),
                "delete offsets, live group": cg("--delete-offsets", "--group", live, "--topic", topic),
                "delete offsets": cg("--delete-offsets", "--group", s["copy"], "--topic", f"{topic}:0"),
                "delete offsets, missing topic": cg("--delete-offsets", "--group", s["copy"], "--topic",
                                                    f"{topic}-none"),
                "describe after deleting offsets": cg("--describe", "--group", s["copy"]),
                "delete, live group": cg("--delete", "--group", live),
                "delete": cg("--delete", "--group", s["copy"]),
                "delete, missing group": cg("--delete", "--group", s["gone"]),
                "validate a regex": cg("--validate-regex", "tool-cg.*"),
                "validate a bad regex": cg("--validate-regex", "(tool"),
            }
        runs = on_pair(pair, script)
    finally:
        for s in state.values():
            s["consumer"].close()

    def shape(label: str, seen: dict) -> dict:
        if label.startswith("list"):  # other tests' groups left out; the order is a hash map's in the tool
            # (--list prints one group per line: a blank one is a group named "" that another test left)
            seen["stdout"] = sorted(line for line in ours(seen["stdout"], *CONSUMER_BASES) if line)
        if label.startswith("reset"):  # the partitions in a hash map's order of the topic's name
            seen["stdout"], seen["stderr"] = sorted(seen["stdout"]), sorted(seen["stderr"])
        seen["stderr"] = [line for line in seen["stderr"] if not java_trace(line)]
        return seen

    seen = outcome(pair, runs, shape)
    assert_same(seen, "kafka-consumer-groups")
