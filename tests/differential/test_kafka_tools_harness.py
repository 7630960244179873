"""The harness of the tool comparisons: a batch of Kafka tools in one JVM (tests/helpers/java/ToolBatch.java) answers
as each tool in its own JVM does, and the normaliser of tool output (tests/helpers/tool_output.py) keeps what
differs and drops only what must."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import kafka_dist
from tests.helpers.differential import Target
from tests.helpers.kafka_tools import Tool, run_batch, tool
from tests.helpers.tool_output import ToolOutput, drop_logs
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration


def test_a_batch_answers_as_separate_jvms(kafka) -> None:
    """Exit codes and output of tools that succeed, fail in the tool (exit 1 after printing) and fail in their
    arguments, run in one ToolBatch JVM and each in its own JVM against the same broker."""
    target = Target("kafka", "127.0.0.1", kafka.port)
    topic = target.unique("harness")
    b = ["--bootstrap-server", target.bootstrap]
    commands = [tool("kafka-topics", *b, "--create", "--topic", topic, "--partitions", "2"),
                tool("kafka-topics", *b, "--create", "--topic", topic),  # exists: exits 1 once printed
                tool("kafka-topics", *b, "--describe", "--topic", topic, "--partitions", "3"),  # usage error
                tool("kafka-transactions", *b, "describe", "--transactional-id", target.unique("none")),
                tool("kafka-share-groups", *b, "--describe", "--group", target.unique("none")),  # exits 0
                tool("kafka-topics", *b, "--delete", "--topic", topic)]
    batched = run_batch(commands)
    with target.raw() as c:  # the batch deleted the topic: gone from the broker's metadata before it is made again
        wait_until(lambda: c.call(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
                                  ).topics[0].error_code != 0, 30, "the topic deleted")
    # one JVM each: the topic's commands one after the other (each depends on the one before), the others
    # meanwhile
    def alone_run(command: Tool) -> subprocess.CompletedProcess:
        return subprocess.run(kafka_dist.tool_command(command.name, command.args), capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
    chained = [commands[0], commands[1], commands[-1]]  # create, create again, delete
    with ThreadPoolExecutor(4) as pool:
        others = {c: pool.submit(alone_run, c) for c in commands if c not in chained}
        done = {c: alone_run(c) for c in chained}
        done.update({c: f.result() for c, f in others.items()})
    alone = [done[c] for c in commands]
    norm = ToolOutput(target)
    # log lines carry a client's own number (adminclient-N), which depends on what the JVM ran before
    assert [norm.run(r, stderr=drop_logs) for r in batched] == [norm.run(r, stderr=drop_logs) for r in alone]
    assert [r.exit for r in batched] == [0, 1, 1, 1, 0, 0]


def test_tool_output_normalisation() -> None:
    target = Target("shoal", "127.0.0.1", 9999)
    topic = target.unique("orders")
    out = ToolOutput(target, {"4001": "pid:1"})
    text = (f"Topic: {topic}\tTopicId: a41jlHX1Qne4kTVlnSxWZA\tPartitionCount: 3\n"
            f"\tTopic: {topic}\tPartition: 0\tLeader: 1\n"
            "\n"
            "GROUP  CONSUMER-ID                           HOST  CLIENT-ID\n"
            "g      3b241101-e2bb-4255-8caf-4136c566a962  /127.0.0.1  c\n"
            f"{topic}-0 at 127.0.0.1:9999 and localhost:1234 since 2026-11-29T13:27:52.112Z, 1795958932346 ms\n"
            "[2026-11-29 13:23:56,403] ERROR boom (org.apache.kafka.tools.TopicCommand)\n"
            "java.lang.IllegalStateException: boom\n"
            "\tat org.apache.kafka.tools.TopicCommand.main(TopicCommand.java:85)\n"
            "\t... 3 more\n"
            "OpenJDK 64-Bit Server VM warning: Sharing is only supported for boot loader classes\n"
            "producer 4001 keeps a41jlHX1Qne4kTVlnSxWZA and consumer-group-offsets\n"
            "due to: org.apache.kafka.common.errors.GroupNotEmptyException: no")
    assert out.lines(text) == [
        ["Topic:", "orders", "TopicId:", "<uuid:1>", "PartitionCount:", "3"],
        ["Topic:", "orders", "Partition:", "0", "Leader:", "1"],
        [],
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID"],
        ["g", "<uuid:2>", "/127.0.0.1", "c"],
        ["orders-0", "at", "<host>:<port>", "and", "<host>:<port>", "since", "<datetime>,", "<timestamp>", "ms"],
        ["[<time>]", "ERROR", "boom", "(org.apache.kafka.tools.TopicCommand)"],
        ["java.lang.IllegalStateException:", "boom"],
        ["producer", "pid:1", "keeps", "<uuid:1>", "and", "consumer-group-offsets"],
        ["due", "to:", "org.apache.kafka.common.errors.GroupNotEmptyException:", "no"],
    ]
    assert drop_logs(out.lines("[2026-11-29 13:23:56,403] WARN x (y)\nkept")) == [["kept"]]
