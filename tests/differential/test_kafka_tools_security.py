"""Differential: Kafka 4.4's security tools against Kafka and against Shoal over SASL/SCRAM
(docs/kafka-differences.md, "Kafka's command-line tools"): kafka-acls (add, list, remove, the producer and consumer
shortcuts, prefixed patterns, refusals), kafka-configs on SCRAM credentials, and kafka-delegation-tokens (create,
describe, renew, expire; and what a broker without a token secret answers).

The tools connect as `admin` (a super user) or `alice` through --command-config files (tests/helpers/
kafka_tools.py). Delegation tokens need `delegation.token.secret.key`, which the run's shared Kafka does not set:
that test starts a Kafka node and a Shoal broker of its own with it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.differential import Pair, Target, assert_same, known_difference
from tests.helpers.kafka_tools import barrier, command_config, on_pair, tool
from tests.helpers.own_pair import own_pair
from tests.helpers.tool_output import outcome
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

DESCRIBE_DELEGATION_TOKEN = 41


def blocks(lines: list[list[str]]) -> list[list[list[str]]]:
    """kafka-acls' output as its blocks (one per resource, each from a line naming it), sorted: the tool prints
    resources in a hash map's order of their names."""
    out: list[list[list[str]]] = []
    for line in lines:
        if not line:
            continue
        if not out or line[0] in ("Adding", "Current", "Acl", "ACLs", "Removing"):
            out.append([])
        out[-1].append(line)
    return sorted(sorted(b[:1]) + sorted(b[1:]) for b in out)


def test_kafka_acls_and_scram_credentials(sasl_pair: Pair, tmp_path: Path) -> None:
    pair = sasl_pair

    def script(t: Target) -> dict:
        admin, alice = command_config(tmp_path, t), command_config(tmp_path, t, "alice")
        b = ["--bootstrap-server", t.bootstrap, "--command-config", admin]
        prefix, group, user = t.unique("tool-acl-pfx"), t.unique("tool-acl-group"), t.unique("tool-acl-user")
        topic = f"{prefix}-topic"  # the prefixed ACL's pattern matches it
        carol, dave = t.unique("User:carol"), t.unique("User:dave")  # principals no other test's ACLs name
        tx = t.unique("tool-acl-tx")

        def acls(*args: str) -> object:
            return tool("kafka-acls", *b, *args)

        def configs(*args: str) -> object:
            return tool("kafka-configs", *b, *args)
        scram = ["--entity-type", "users", "--entity-name", user]
        return {
            "add": acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation",
                        "Describe", "--topic", topic),
            "add, a group": acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", group),
            "add, prefixed, deny": acls("--add", "--deny-principal", "User:bob", "--deny-host", "127.0.0.9",
                                        "--operation", "Write", "--topic", prefix, "--resource-pattern-type",
                                        "prefixed"),
            "add, producer": acls("--add", "--allow-principal", carol, "--producer", "--topic", topic),
            "add, consumer": acls("--add", "--allow-principal", carol, "--consumer", "--topic", topic,
                                  "--group", group),
            "add, cluster": acls("--add", "--allow-principal", dave, "--operation", "IdempotentWrite",
                                 "--cluster"),
            "add, transactional id": acls("--add", "--allow-principal", dave, "--operation", "Write",
                                          "--transactional-id", tx),
            "barrier, after adding": barrier(t, admin),
            "list, a topic": acls("--list", "--topic", topic),
            "list, a principal": acls("--list", "--principal", carol),
            "list, prefixed": acls("--list", "--topic", prefix, "--resource-pattern-type", "prefixed"),
            "list, matching": acls("--list", "--topic", topic, "--resource-pattern-type", "match"),
            "remove": acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Describe",
                           "--topic", topic),
            "remove, nothing there": acls("--remove", "--force", "--allow-principal", "User:zed", "--operation",
                                          "Read", "--topic", topic),
            "barrier, after removing": barrier(t, admin),
            "list after removing": acls("--list", "--topic", topic),
            "list, as alice": tool("kafka-acls", "--bootstrap-server", t.bootstrap, "--command-config", alice,
                                   "--list", "--topic", topic),
            "add, as alice": tool("kafka-acls", "--bootstrap-server", t.bootstrap, "--command-config", alice,
                                  "--add", "--allow-principal", "User:alice", "--operation", "All", "--topic", topic),
            "add, bad operation": acls("--add", "--allow-principal", "User:alice", "--operation", "Alter",
                                       "--group", group),
            "add, bad principal": acls("--add", "--allow-principal", "alice", "--operation", "Read", "--topic", topic),
            "scram, add": configs("--alter", *scram, "--add-config",
                                  "SCRAM-SHA-256=[iterations=8192,password=pw],SCRAM-SHA-512=[password=pw2]"),
            "barrier, after the credentials": barrier(t, admin),
            "scram, describe": configs("--describe", *scram),
            "scram, delete one": configs("--alter", *scram, "--delete-config", "SCRAM-SHA-256"),
            "barrier, after deleting one": barrier(t, admin),
            "scram, describe after": configs("--describe", *scram),
            "scram, too few iterations": configs("--alter", *scram, "--add-config",
                                                 "SCRAM-SHA-512=[iterations=100,password=pw]"),
            "scram, delete what is not there": configs("--alter", *scram, "--delete-config", "SCRAM-SHA-256"),
            "scram, as alice": tool("kafka-configs", "--bootstrap-server", t.bootstrap, "--command-config", alice,
                                    "--describe", *scram),
            # what this test granted, removed (the shared Kafka's ACLs are every SASL test's)
            "remove, a topic's": acls("--remove", "--force", "--topic", topic),
            "remove, a group's": acls("--remove", "--force", "--group", group),
            "remove, a prefix's": acls("--remove", "--force", "--topic", prefix, "--resource-pattern-type",
                                       "prefixed"),
            "remove, the cluster's": acls("--remove", "--force", "--allow-principal", dave, "--cluster"),
            "remove, a transactional id's": acls("--remove", "--force", "--transactional-id", tx),
            "barrier, after removing all": barrier(t, admin),
            "list, all removed": acls("--list", "--principal", carol),
            "delegation tokens, disabled": tool("kafka-delegation-tokens", *b, "--create", "--max-life-time-period",
                                                "-1"),
            "delegation tokens, describe, disabled": tool("kafka-delegation-tokens", *b, "--describe"),
        }

    def shape(label: str, seen: dict) -> dict:
        if label.endswith("as alice"):  # refused: the message, without the exception that follows it
            seen["stdout"] = seen["stdout"][:1]
        elif label.startswith(("add", "list", "remove")):
            seen["stdout"] = blocks(seen["stdout"])
        # the operations a resource type supports, as a hash set's order of their names
        seen["stderr"] = [[*line[:line.index("operations") + 1], *sorted(line[line.index("operations") + 1:])]
                          if "supports" in line and "operations" in line else line for line in seen["stderr"]]
        return seen

    seen = outcome(pair, on_pair(pair, script), shape, names={t.name: {str(tmp_path / t.name): "<configs>"} for t in pair})
    # refused for want of DESCRIBE on the cluster: Kafka's broker puts the request's own description in the message
    # (its connection id, session object, ...), Shoal answers Kafka's message for the error (see "Quotas, ACLs and
    # SASL")
    refused = {}
    for side in seen:
        for label in ("list, as alice", "add, as alice"):
            text = " ".join(" ".join(line) for line in seen[side][label]["stdout"])
            refused.setdefault(side, {})[label] = re.sub(r"Request Request\(.*?\) needs", "<the request> needs", text)
            seen[side][label]["stdout"] = "<refused>"
    message = "Error while executing ACL command: org.apache.kafka.common.errors.ClusterAuthorizationException: "
    known_difference(refused, kafka=dict.fromkeys(("list, as alice", "add, as alice"),
                                                  message + "<the request> needs DESCRIBE permission."),
                     shoal=dict.fromkeys(("list, as alice", "add, as alice"), message + "Cluster authorization failed."),
                     reason="DescribeAcls refused: the message")
    assert_same(seen, "kafka-acls, kafka-configs (SCRAM), kafka-delegation-tokens")


# ------------------------------------------------------------------------------------- delegation tokens enabled

TOKENS = {"delegation.token.secret.key": "tool-test-secret", "delegation.token.max.lifetime.ms": "86400000",
          "delegation.token.expiry.time.ms": "3600000"}


@pytest.fixture
def token_pair(tmp_path: Path, kafka_registry: Path):
    """A SASL Kafka node and a SASL Shoal broker of this test's own, both with a delegation-token secret."""
    with own_pair(tmp_path, kafka_registry, security="SASL_PLAINTEXT", overrides=TOKENS,
                  label="Kafka with delegation tokens") as pair:
        yield pair


def visible_tokens(t: Target, want: int) -> None:
    """Wait until the broker describes `want` tokens to the super user: Kafka's brokers serve tokens from their
    metadata image, which the controller's record reaches moments after the token is created."""
    with t.raw("admin") as c:
        wait_until(lambda: len(c.call(DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}).tokens) >= want, 30,
                   f"{want} delegation tokens on {t.name}")


def test_kafka_delegation_tokens(token_pair: Pair, tmp_path: Path) -> None:
    pair = token_pair

    def tokens(t: Target, user: str, *args: str) -> object:
        return tool("kafka-delegation-tokens", "--bootstrap-server", t.bootstrap, "--command-config",
                    command_config(tmp_path, t, user), *args)

    first = on_pair(pair, lambda t: {
        "create": tokens(t, "admin", "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:alice"),
        "create, for another owner": tokens(t, "admin", "--create", "--max-life-time-period", "-1",
                                            "--owner-principal", "User:carol"),
        "create, as alice": tokens(t, "alice", "--create", "--max-life-time-period", "-1"),
        "renew, an unknown token": tokens(t, "admin", "--renew", "--renew-time-period", "-1", "--hmac",
                                          "bm90IGEgdG9rZW4="),
        "expire, an unknown token": tokens(t, "admin", "--expire", "--expiry-time-period", "-1", "--hmac",
                                           "bm90IGEgdG9rZW4="),
        "create, no max life": tokens(t, "admin", "--create"),
    })

    def hmac_of(side: str) -> str:
        """The HMAC the first create printed (its table's HMAC column, in the row under the header)."""
        lines = [line.split() for line in first[side]["create"].stdout.splitlines() if line.strip()]
        header = next(i for i, line in enumerate(lines) if "HMAC" in line)
        return lines[header + 1][lines[header].index("HMAC")]
    hmacs = {t.name: hmac_of(t.name) for t in pair}
    for t in pair:
        visible_tokens(t, 3)
    then = on_pair(pair, lambda t: {
        "describe": tokens(t, "admin", "--describe"),
        "describe, an owner": tokens(t, "admin", "--describe", "--owner-principal", "User:carol"),
        "describe, as alice": tokens(t, "alice", "--describe"),
        "renew, as the renewer": tokens(t, "alice", "--renew", "--renew-time-period", "-1", "--hmac", hmacs[t.name]),
        "renew, as someone else": tokens(t, "admin", "--renew", "--renew-time-period", "-1", "--hmac",
                                         hmacs[t.name]),
        "expire": tokens(t, "admin", "--expire", "--expiry-time-period", "-1", "--hmac", hmacs[t.name]),
    })
    for t in pair:
        with t.raw("admin") as c:  # the expired token gone from the broker's view
            wait_until(lambda c=c: len(c.call(DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}).tokens) == 2, 30,
                       "the expired token removed")
    last = on_pair(pair, lambda t: {"describe after expiring": tokens(t, "admin", "--describe")})

    def shape(label: str, seen: dict) -> dict:
        # a token's HMAC is the broker's secret's; the tool prints tokens in its own order: rows sorted
        out = [[re.sub(r"^(:?)[A-Za-z0-9+/]{60,}={0,2}$", r"\1<hmac>", tok) for tok in line] for line in seen["stdout"]]
        header = next((i for i, line in enumerate(out) if line[:1] == ["TOKENID"]), None)
        if header is not None:
            out = out[:header + 1] + sorted(line for line in out[header + 1:] if line)
        seen["stdout"] = out
        return seen

    seen = outcome(pair, {side: {**first[side], **then[side], **last[side]} for side in first}, shape)
    for side in seen:  # the ids normalised above: their form, Kafka's Uuid (22 URL-safe base64 characters)
        created = re.findall(r"tokenId : (\S+)", "".join(first[side][label].stdout for label in first[side]))
        seen[side]["token ids"] = sorted({"Kafka's Uuid" if re.fullmatch(r"[A-Za-z0-9_-]{22}", i) else i[:4] + "..."
                                          for i in created})
    assert_same(seen, "kafka-delegation-tokens")
