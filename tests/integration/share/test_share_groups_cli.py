"""The installed `shoal-share-groups` console script (run as a subprocess) against a running broker with live
confluent_kafka.ShareConsumer members: list, describe (offsets with lag, members, state), reset-offsets (refused
while members are active; to earliest redelivers), delete-offsets and delete (empty groups only), and
--command-config with SASL_SSL + SCRAM."""

from __future__ import annotations

import subprocess
import threading

import pytest
from confluent_kafka import ShareConsumer

from tests.helpers.confluent_clients import create_topic, produce_all
from tests.helpers.console_scripts import run_script
from tests.helpers.sasl import add_scram_user, sasl_ssl_broker
from tests.helpers.share_consumers import earliest
from tests.helpers.tls_material import make_tls_files
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

FAST = {"group.share.min.heartbeat.interval.ms": "50", "group.share.heartbeat.interval.ms": "100",
        "group.share.min.session.timeout.ms": "2000", "group.share.session.timeout.ms": "3000"}


def cli(broker, *args: str, bootstrap: str | None = None) -> subprocess.CompletedProcess:
    """The console script of this checkout's pyproject.toml, as its installed wrapper runs it."""
    return run_script("shoal-share-groups", "--bootstrap-server", bootstrap or broker.bootstrap, *args)


def bare(*args: str) -> subprocess.CompletedProcess:
    return run_script("shoal-share-groups", *args)


def table(out: str) -> list[list[str]]:
    """Non-empty output lines split on whitespace."""
    return [line.split() for line in out.splitlines() if line.strip()]


def offsets_table(broker, group: str) -> dict[tuple[str, int], tuple[str, str]]:
    r = cli(broker, "--describe", "--group", group)
    assert r.returncode == 0, r
    rows = table(r.stdout)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], r.stdout
    return {(row[1], int(row[2])): (row[3], row[4]) for row in rows[1:]}


class LiveConsumer:
    """A ShareConsumer polling in a thread (implicit acknowledgement) until paused or closed."""

    def __init__(self, broker, group: str, topic: str, client_id: str) -> None:
        self.consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                       "client.id": client_id, "share.acknowledgement.mode": "implicit"})
        self.consumer.subscribe([topic])
        self.seen: list[tuple[int, int]] = []
        self.polling = threading.Event()
        self.polling.set()
        self.paused = threading.Event()  # set by the thread once it stopped polling
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            if not self.polling.is_set():
                self.paused.set()
                self.stop.wait(0.05)  # idle until resumed or stopped
                continue
            for m in self.consumer.poll(0.2):
                if m.error() is None:
                    self.seen.append((m.partition(), m.offset()))

    def pause(self) -> None:
        """Stop polling; returns once the poll in progress has returned."""
        self.paused.clear()
        self.polling.clear()
        wait_until(self.paused.is_set, 30, "the poll in progress to return")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


def group_state(broker, group: str) -> str | None:
    r = cli(broker, "--list", "--state")
    assert r.returncode == 0, r
    return {row[0]: row[1] for row in table(r.stdout)[1:]}.get(group)


def test_list_and_describe_with_live_consumers(broker_factory):
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "cli-t", 2)
    earliest(broker, "cli-g")
    for p in (0, 1):
        produce_all(broker.bootstrap, "cli-t", [f"{p}-{i}".encode() for i in range(10)], partition=p)
    live = LiveConsumer(broker, "cli-g", "cli-t", "cli-c1")
    try:
        wait_until(lambda: len(live.seen) >= 20, 60, "the consumer to get every record")
        # Acknowledged (implicitly, by the following polls): nothing left to deliver.
        wait_until(lambda: offsets_table(broker, "cli-g") == {("cli-t", 0): ("10", "0"), ("cli-t", 1): ("10", "0")},
                   30, "the acknowledgements to reach the share coordinator")
        live.pause()
        produce_all(broker.bootstrap, "cli-t", [b"late"] * 7, partition=0)
        assert offsets_table(broker, "cli-g") == {("cli-t", 0): ("10", "7"), ("cli-t", 1): ("10", "0")}

        r = cli(broker, "--list")
        assert r.returncode == 0 and r.stdout.split() == ["cli-g"], r
        assert table(cli(broker, "--list", "--state").stdout) == [["GROUP", "STATE"], ["cli-g", "Stable"]]
        assert table(cli(broker, "--list", "--state", "Empty").stdout) == [["GROUP", "STATE"]]
        assert table(cli(broker, "--list", "--state", "stable,empty").stdout)[1] == ["cli-g", "Stable"]
        r = cli(broker, "--list", "--state", "Busy")
        assert r.returncode == 1 and "Invalid state list 'Busy'. Valid states are: Empty, Dead, Stable" in r.stderr

        r = cli(broker, "--describe", "--group", "cli-g", "--members")
        assert r.returncode == 0, r
        rows = table(r.stdout)
        assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        [member] = rows[1:]
        assert member[0] == "cli-g" and member[2] == "/127.0.0.1" and member[3:] == ["cli-c1", "2", "cli-t:0,1"]
        r = cli(broker, "--describe", "--group", "cli-g", "--members", "--verbose")
        assert table(r.stdout)[0][-2:] == ["MEMBER-EPOCH", "ASSIGNMENT"]

        r = cli(broker, "--describe", "--group", "cli-g", "--state")
        rows = table(r.stdout)
        assert rows[0] == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
        assert rows[1][0] == "cli-g" and rows[1][-2:] == ["Stable", "1"]
        assert rows[1][1] == f"127.0.0.1:{broker.port}"
        r = cli(broker, "--describe", "--group", "cli-g", "--verbose")
        assert table(r.stdout)[0] == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]
        r = cli(broker, "--describe", "--all-groups", "--offsets")
        assert r.returncode == 0 and len(table(r.stdout)) == 3

        r = cli(broker, "--describe", "--group", "no-such-group")
        assert r.returncode == 1
        assert ("Error: Executing share group command failed due to org.apache.kafka.common.errors."
                "GroupIdNotFoundException: Group no-such-group not found.") in r.stdout
    finally:
        live.close()


def test_reset_delete_offsets_and_delete_only_on_empty_groups(broker_factory):
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "cli-r", 2)
    earliest(broker, "cli-rg")
    for p in (0, 1):
        produce_all(broker.bootstrap, "cli-r", [f"{p}-{i}".encode() for i in range(6)], partition=p)
    live = LiveConsumer(broker, "cli-rg", "cli-r", "cli-r1")
    try:
        wait_until(lambda: len(live.seen) >= 12, 60, "the consumer to get every record")
        wait_until(lambda: offsets_table(broker, "cli-rg") == {("cli-r", 0): ("6", "0"), ("cli-r", 1): ("6", "0")},
                   30, "the acknowledgements")
        # Refused while the group has a member.
        r = cli(broker, "--reset-offsets", "--group", "cli-rg", "--all-topics", "--to-earliest", "--execute")
        assert r.returncode == 1 and "Share group 'cli-rg' is not empty." in r.stderr, r
        r = cli(broker, "--delete-offsets", "--group", "cli-rg", "--topic", "cli-r")
        assert r.returncode == 1 and "Error: The group is not empty." in r.stdout, r
        assert table(r.stdout)[-1] == ["cli-r", "Error:", "The", "group", "is", "not", "empty."]
        r = cli(broker, "--delete", "--group", "cli-rg")
        assert r.returncode == 1 and ("* Group 'cli-rg' could not be deleted due to: org.apache.kafka.common.errors."
                                      "GroupNotEmptyException: Share group 'cli-rg' is not EMPTY.") in r.stdout, r
    finally:
        live.close()
    wait_until(lambda: group_state(broker, "cli-rg") == "Empty", 30, "the group to be empty")

    # Dry run: the plan, nothing changes.
    r = cli(broker, "--reset-offsets", "--group", "cli-rg", "--all-topics", "--to-earliest", "--dry-run")
    assert r.returncode == 0, r
    # the partitions in Kafka's tool's order: a Java HashMap's (TopicPartition.hashCode)
    assert table(r.stdout) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                               ["cli-rg", "cli-r", "1", "0"], ["cli-rg", "cli-r", "0", "0"]]
    assert offsets_table(broker, "cli-rg") == {("cli-r", 0): ("6", "0"), ("cli-r", 1): ("6", "0")}
    # Execute: to earliest, and a new consumer gets every record again.
    r = cli(broker, "--reset-offsets", "--group", "cli-rg", "--topic", "cli-r", "--to-earliest", "--execute")
    assert r.returncode == 0 and len(table(r.stdout)) == 3, r
    assert offsets_table(broker, "cli-rg") == {("cli-r", 0): ("0", "6"), ("cli-r", 1): ("0", "6")}
    again = LiveConsumer(broker, "cli-rg", "cli-r", "cli-r2")
    try:
        wait_until(lambda: len(again.seen) >= 12, 60, "every record to be delivered again")
        assert sorted(again.seen) == [(p, o) for p in (0, 1) for o in range(6)]
    finally:
        again.close()
    wait_until(lambda: group_state(broker, "cli-rg") == "Empty", 30, "the group to be empty")

    # To latest on one partition; to a datetime before any record: the log start.
    r = cli(broker, "--reset-offsets", "--group", "cli-rg", "--topic", "cli-r:1", "--to-latest", "--execute")
    assert table(r.stdout)[1:] == [["cli-rg", "cli-r", "1", "6"]], r
    r = cli(broker, "--reset-offsets", "--group", "cli-rg", "--topic", "cli-r:0", "--to-datetime",
            "2000-01-01T00:00:00.000", "--execute")
    assert table(r.stdout)[1:] == [["cli-rg", "cli-r", "0", "0"]], r
    r = cli(broker, "--reset-offsets", "--group", "cli-rg", "--topic", "cli-r:7", "--to-latest", "--execute")
    assert r.returncode == 1 and ('Error: Executing share group command failed due to The partitions "cli-r-7" do '
                                  'not exist') in r.stdout, r

    # Delete the topic's offsets, then the group.
    r = cli(broker, "--delete-offsets", "--group", "cli-rg", "--topic", "cli-r", "--topic", "cli-none")
    assert r.returncode == 1, r  # one topic could not be deleted
    assert table(r.stdout) == [["TOPIC", "STATUS"], ["cli-none", "Error:", "This", "server", "does", "not", "host",
                                                     "this", "topic-partition."], ["cli-r", "Successful"]]
    r = cli(broker, "--describe", "--group", "cli-rg")
    assert r.returncode == 0 and "Share group 'cli-rg' has no offset information." in r.stdout, r
    r = cli(broker, "--delete", "--group", "cli-rg")
    assert r.returncode == 0 and "Deletion of requested share groups ('cli-rg') was successful." in r.stdout, r
    assert cli(broker, "--list").stdout.split() == []
    r = cli(broker, "--delete", "--group", "cli-rg")
    assert r.returncode == 1 and "Group 'cli-rg' is not a share group." in r.stdout, r


def test_usage_errors_help_and_version(broker):
    r = bare("--help")  # as Kafka's tool: on standard error, exit code 1
    assert r.returncode == 1 and "--reset-offsets" in r.stderr and "--command-config" in r.stderr and not r.stdout
    r = bare("--version")
    assert r.returncode == 0 and r.stdout.strip() == "0.1.0"
    r = bare("--list")
    assert r.returncode == 1 and 'Missing required argument "[bootstrap-server]"' in r.stderr
    for args, message in [
        (["--group", "g"], "Command must include exactly one action"),
        (["--list", "--describe"], "Option [describe] takes one of these options: [all-groups], [group]"),
        (["--describe"], "Option [describe] takes one of these options: [all-groups], [group]"),
        (["--reset-offsets", "--group", "g", "--to-earliest", "--all-topics"],
         "takes the option: [execute] or [dry-run]"),
        (["--reset-offsets", "--group", "g", "--execute", "--all-topics"],
         "Option [reset-offsets] takes one of these options: [from-file], [to-current], [to-datetime], "
         "[to-earliest], [to-latest], [to-offset]"),
        (["--reset-offsets", "--group", "g", "--execute", "--to-earliest"],
         "Option [reset-offsets] takes one of these options: [all-topics], [from-file], [topic]"),
        (["--reset-offsets", "--group", "g", "--execute", "--all-topics", "--to-earliest", "--to-latest"],
         'Option "[to-earliest]" can\'t be used with option "[to-latest]"'),
        (["--delete-offsets", "--group", "g"], "Option [delete-offsets] takes the following options: [group], [topic]"),
        (["--delete", "--group", "g", "--topic", "t"], "Option [delete] does not take the options [topic] or "
                                                       "[all-topics]."),
        (["--list", "--bogus"], "unrecognized arguments: --bogus"),
    ]:
        r = cli(broker, *args)
        assert r.returncode == 1 and message in r.stderr, (args, r.stderr)
    r = cli(broker, "--list", bootstrap="127.0.0.1:1")
    assert r.returncode == 1 and "Error: Executing share group command failed due to" in r.stdout


def test_command_config_sasl_ssl_scram(broker_factory, tmp_path):
    tls = make_tls_files(tmp_path / "tls")
    broker = sasl_ssl_broker(broker_factory, tls)
    add_scram_user(broker, "ops", "ops-secret")
    create_topic(f"127.0.0.1:{broker.ports['PLAINTEXT']}", "cli-sec", 1)
    bootstrap = f"127.0.0.1:{broker.ports['SASL_SSL']}"

    def config(password: str) -> str:
        path = tmp_path / f"client-{password}.properties"
        path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                        f'    username="ops" password="{password}";\n'
                        f"ssl.truststore.type=PEM\nssl.truststore.location={tls.ca}\n")
        return str(path)

    r = cli(broker, "--command-config", config("ops-secret"), "--reset-offsets", "--group", "sec-g", "--topic",
            "cli-sec", "--to-earliest", "--execute", bootstrap=bootstrap)
    assert r.returncode == 0 and table(r.stdout)[1:] == [["sec-g", "cli-sec", "0", "0"]], r
    r = cli(broker, "--command-config", config("ops-secret"), "--list", "--state", bootstrap=bootstrap)
    assert r.returncode == 0 and table(r.stdout)[1:] == [["sec-g", "Empty"]], r
    r = cli(broker, "--command-config", config("wrong"), "--list", bootstrap=bootstrap)
    assert r.returncode == 1 and "Authentication failed" in r.stdout, r
    # Without the config the TLS listener does not answer this client.
    r = cli(broker, "--list", "--timeout", "3000", bootstrap=bootstrap)
    assert r.returncode == 1, r


def test_command_config_sasl_plaintext_plain(broker_factory, tmp_path):
    from tests.helpers.sasl import PLAIN_JAAS

    broker = broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    good = tmp_path / "plain.properties"
    # librdkafka's property names work too.
    good.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=alice\n"
                    "sasl.password=alice-secret\nclient.id=ops-tool\n")
    r = cli(broker, "--command-config", str(good), "--list")
    assert r.returncode == 0 and r.stdout.split() == [], r
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    r = cli(broker, "--command-config", str(bad), "--list")
    assert r.returncode == 1 and "Invalid --command-config: SASL mechanism GSSAPI is not supported" in r.stderr, r
    r = cli(broker, "--command-config", str(tmp_path / "missing.properties"), "--list")
    assert r.returncode == 1 and "Invalid --command-config" in r.stderr, r
