"""shoal-transactions without sockets: argument parsing and Kafka's messages, the tab-terminated table, and each
command over a fake admin (find-hanging's filtering by the coordinator's view, abort's spec from a start offset)."""

from __future__ import annotations

import io

import pytest

from protocol.codec import to_container
from protocol.errors import ErrorCode
from shoal_client.admin import (
    AbortSpec,
    AdminError,
    Node,
    PartitionProducers,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from shoal_client.transactions_cli import HANGING_HEADERS, build_parser, pretty_table, run

NOW = 1_700_000_000_000
MINUTE = 60_000


def producer(pid: int, start: int = -1, age_ms: int = 0, epoch: int = 0, coordinator_epoch: int = -1,
             seq: int = 4) -> ProducerState:
    return ProducerState(pid, epoch, seq, NOW - age_ms, coordinator_epoch, start)


class FakeAdmin:
    """TransactionAdmin's calls over fixed answers; records what was asked."""

    def __init__(self, *, producers=None, listings=None, descriptions=None, topics=None) -> None:
        self.producers: dict = producers or {}
        self.listings: dict[int, list[TransactionListing]] = listings or {}
        self.descriptions: dict[str, TransactionDescription] = descriptions or {}
        self.topics: dict[str, list[tuple[int, list[int]]]] = topics or {}  # topic -> [(partition, replicas)]
        self.calls: list[tuple] = []
        self.aborted: list[AbortSpec] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def metadata(self, topics=None):
        names = list(self.topics) if topics is None else [t for t in topics if t in self.topics]
        # topic entries as a Metadata response decodes them
        found = {t: to_container({"name": t, "error_code": 0, "partitions": [
            {"partition_index": p, "replica_nodes": r} for p, r in self.topics[t]]}) for t in names}
        return {1: Node(1, "h", 1)}, found

    def list_transactions(self, *, states=(), producer_ids=(), duration_ms=-1):
        self.calls.append(("list", tuple(producer_ids), duration_ms))
        wanted = set(producer_ids)
        return {b: [t for t in ls if not wanted or t.producer_id in wanted] for b, ls in self.listings.items()}

    def describe_transactions(self, transactional_ids):
        self.calls.append(("describe", tuple(transactional_ids)))
        return {t: self.descriptions.get(t, TransactionDescription(t, 1, int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)))
                for t in transactional_ids}

    def describe_producers(self, partitions, broker_id=None):
        self.calls.append(("producers", tuple(partitions), broker_id))
        return {tp: self.producers.get(tp, PartitionProducers(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
                for tp in partitions}

    def abort_transaction(self, spec: AbortSpec) -> None:
        self.aborted.append(spec)

    def force_terminate_transaction(self, transactional_id: str) -> None:
        self.calls.append(("force", transactional_id))
        if transactional_id == "refused":
            raise AdminError(int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))


def call(admin: FakeAdmin, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["--bootstrap-server", "h:1", *argv], out, err, admin_factory=lambda *a, **k: admin,
               now_ms=lambda: NOW)
    return code, out.getvalue(), err.getvalue()


def cells(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("\t")[:-1]] for line in text.splitlines()]


# ---------------------------------------------------------------------- table and parsing
def test_pretty_table_pads_every_cell_to_its_column_and_ends_each_with_a_tab() -> None:
    assert pretty_table(("A", "Longer"), [("xyz", "1"), ("", "22")]) == ["A  \tLonger\t", "xyz\t1     \t",
                                                                         "   \t22    \t"]
    assert pretty_table(("Only",), []) == ["Only\t"]


def test_parser_takes_kafkas_commands_and_options() -> None:
    a = build_parser().parse_args(["--bootstrap-server", "h:1", "find-hanging", "--broker-id", "3"])
    assert (a.command, a.broker_id, a.max_transaction_timeout, a.topic, a.partition) == ("find-hanging", 3, 15,
                                                                                          None, None)
    a = build_parser().parse_args(["--bootstrap-server", "h:1", "abort", "--topic", "t", "--partition", "2",
                                   "--producer-id", "7", "--producer-epoch", "1", "--coordinator-epoch", "-1"])
    assert (a.topic, a.partition, a.start_offset, a.producer_id, a.producer_epoch, a.coordinator_epoch) == (
        "t", 2, None, 7, 1, -1)
    a = build_parser().parse_args(["--bootstrap-server", "h:1", "list", "--duration-filter", "5000"])
    assert a.duration_filter == 5000


@pytest.mark.parametrize(("argv", "message"), [
    ([], "too few arguments"),
    (["describe"], "argument --transactional-id is required"),
    (["describe-producers", "--topic", "t"], "argument --partition is required"),
    (["abort", "--topic", "t"], "argument --partition is required"),
    (["find-hanging", "--partition", "x"], "argument --partition: invalid int value: 'x'"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_usage_errors_exit_1_with_the_usage(argv: list[str], message: str) -> None:
    code, out, err = call(FakeAdmin(), *argv)
    assert code == 1 and out == ""
    assert message in err and err.startswith("usage: shoal-transactions")


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["list", "--help"], ["abort", "-h"]])
def test_help_exits_1_as_kafkas_tool(argv: list[str], capsys) -> None:
    """kafka-transactions (argparse4j) prints its help on standard output and exits 1."""
    with pytest.raises(SystemExit) as exited:
        run(["--bootstrap-server", "127.0.0.1:1", *argv], admin_factory=lambda *a, **k: FakeAdmin())
    assert exited.value.code == 1
    assert capsys.readouterr().out.startswith("usage: shoal-transactions")


def test_bootstrap_server_is_required() -> None:
    err = io.StringIO()
    assert run(["list"], io.StringIO(), err, admin_factory=lambda *a, **k: FakeAdmin()) == 1
    assert "argument --bootstrap-server is required" in err.getvalue()


# ---------------------------------------------------------------------- list, describe, describe-producers
def test_list_by_coordinator() -> None:
    admin = FakeAdmin(listings={2: [TransactionListing("b", 9, "Ongoing")],
                                1: [TransactionListing("z", 3, "Empty"), TransactionListing("a", 4, "CompleteCommit")]})
    code, out, _ = call(admin, "list", "--duration-filter", "10")
    assert code == 0
    # brokers in order, each one's transactions in the order it listed them (as Kafka's tool prints them)
    assert cells(out) == [["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                          ["z", "1", "3", "Empty"], ["a", "1", "4", "CompleteCommit"], ["b", "2", "9", "Ongoing"]]
    assert admin.calls == [("list", (), 10)]
    assert call(FakeAdmin(), "list")[1] == "TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n"


def test_describe_with_and_without_a_transaction_in_progress() -> None:
    admin = FakeAdmin(descriptions={
        "tx": TransactionDescription("tx", 1, 0, None, "Ongoing", 42, 3, 60000, NOW - 1500, [("t", 0), ("u", 2)]),
        "idle": TransactionDescription("idle", 1, 0, None, "Empty", 43, 0, 60000, -1, [])})
    code, out, _ = call(admin, "describe", "--transactional-id", "tx")
    assert code == 0
    assert cells(out) == [["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                           "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                           "TopicPartitions"],
                          ["1", "tx", "42", "3", "Ongoing", "60000", str(NOW - 1500), "1500", "t-0,u-2"]]
    assert cells(call(admin, "describe", "--transactional-id", "idle")[1])[1] == [
        "1", "idle", "43", "0", "Empty", "60000", "None", "None", ""]
    code, out, err = call(admin, "describe", "--transactional-id", "gone")
    assert (code, out) == (1, "")
    assert err == ("Failed to describe transaction state of transactional-id `gone`: DescribeTransactions request "
                   "for transactionalId `gone` failed because the ID could not be found. Enable debug logging for "
                   "additional detail.\n")


def test_describe_producers() -> None:
    admin = FakeAdmin(producers={("t", 0): PartitionProducers(0, None, [
        producer(5, start=10, coordinator_epoch=-1), producer(6, coordinator_epoch=2)])})
    code, out, _ = call(admin, "describe-producers", "--topic", "t", "--partition", "0", "--broker-id", "1")
    assert code == 0
    assert cells(out) == [["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                           "CurrentTransactionStartOffset"],
                          ["5", "0", "-1", "4", str(NOW), "10"], ["6", "0", "2", "4", str(NOW), "None"]]
    assert admin.calls == [("producers", (("t", 0),), 1)]
    code, _, err = call(admin, "describe-producers", "--topic", "t", "--partition", "9")
    assert code == 1
    # Kafka's message for the code, followed by the tool's ". Enable debug logging ..." as Kafka's tool prints it
    assert err.startswith("Failed to describe producers for partition t-9 on leader: This server does not host this "
                          "topic-partition.. Enable debug")


# ---------------------------------------------------------------------- abort
def test_abort_by_start_offset_takes_the_producer_from_describe_producers() -> None:
    admin = FakeAdmin(producers={("t", 1): PartitionProducers(0, None, [
        producer(5, start=10, epoch=2, coordinator_epoch=-1), producer(6, start=20, epoch=1, coordinator_epoch=4)])})
    assert call(admin, "abort", "--topic", "t", "--partition", "1", "--start-offset", "10") == (0, "", "")
    assert call(admin, "abort", "--topic", "t", "--partition", "1", "--start-offset", "20") == (0, "", "")
    # coordinator epoch -1 (no marker yet) becomes 0, which no partition has seen exceeded
    assert admin.aborted == [AbortSpec("t", 1, 5, 2, 0), AbortSpec("t", 1, 6, 1, 4)]
    code, _, err = call(admin, "abort", "--topic", "t", "--partition", "1", "--start-offset", "11")
    assert code == 1 and err == "Could not find any open transactions starting at offset 11 on partition t-1\n"
    assert len(admin.aborted) == 2


def test_abort_by_producer_needs_epoch_and_coordinator_epoch() -> None:
    admin = FakeAdmin()
    code, _, err = call(admin, "abort", "--topic", "t", "--partition", "0")
    assert code == 1 and err.startswith("The transaction to abort must be identified either with --start-offset")
    code, _, err = call(admin, "abort", "--topic", "t", "--partition", "0", "--producer-id", "5")
    assert code == 1 and err == "Missing required argument --producer-epoch\n"
    code, _, err = call(admin, "abort", "--topic", "t", "--partition", "0", "--producer-id", "5",
                        "--producer-epoch", "1")
    assert code == 1 and err == "Missing required argument --coordinator-epoch\n"
    assert call(admin, "abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--producer-epoch", "1",
                "--coordinator-epoch", "-1")[0] == 0
    assert admin.aborted == [AbortSpec("t", 0, 5, 1, 0)]


def test_abort_refused_by_the_leader() -> None:
    class Refusing(FakeAdmin):
        def abort_transaction(self, spec: AbortSpec) -> None:
            raise AdminError(int(ErrorCode.INVALID_PRODUCER_EPOCH))

    code, _, err = call(Refusing(), "abort", "--topic", "t", "--partition", "0", "--producer-id", "5",
                        "--producer-epoch", "1", "--coordinator-epoch", "3")
    assert code == 1
    assert err == ("Failed to abort transaction AbortTransactionSpec(topicPartition=t-0, producerId=5, "
                   "producerEpoch=1, coordinatorEpoch=3): Producer attempted to produce with an old epoch.. "
                   "Enable debug logging for additional detail.\n")


# ---------------------------------------------------------------------- find-hanging
def hanging_admin() -> FakeAdmin:
    """t-0: an unknown producer (7) and a producer whose transactional id's transaction includes t-0 (8);
    t-1: producer 8 again (its transaction does not include t-1), a producer whose id is gone (9), one too young
    (10) and one with no transaction open (11); u-0 lives on broker 2 only."""
    return FakeAdmin(
        topics={"t": [(0, [1]), (1, [1, 2])], "u": [(0, [2])]},
        producers={
            ("t", 0): PartitionProducers(0, None, [producer(7, start=3, age_ms=20 * MINUTE),
                                                   producer(8, start=5, age_ms=16 * MINUTE, coordinator_epoch=2)]),
            ("t", 1): PartitionProducers(0, None, [producer(8, start=1, age_ms=16 * MINUTE, coordinator_epoch=2),
                                                   producer(9, start=2, age_ms=60 * MINUTE),
                                                   producer(10, start=4, age_ms=14 * MINUTE),
                                                   producer(11, age_ms=90 * MINUTE)]),
            ("u", 0): PartitionProducers(0, None, [producer(12, start=0, age_ms=30 * MINUTE)])},
        listings={1: [TransactionListing("tx8", 8, "Ongoing"), TransactionListing("tx9", 9, "Empty"),
                      TransactionListing("other", 99, "Ongoing")]},
        descriptions={"tx8": TransactionDescription("tx8", 1, 0, None, "Ongoing", 8, 0, 60000, NOW, [("t", 0)])})


def test_find_hanging_keeps_only_what_the_coordinator_will_not_end() -> None:
    admin = hanging_admin()
    code, out, _ = call(admin, "find-hanging", "--broker-id", "1")
    assert code == 0
    assert cells(out) == [list(HANGING_HEADERS),
                          ["t", "0", "7", "0", "-1", "3", str(NOW - 20 * MINUTE), "20"],
                          ["t", "1", "8", "0", "2", "1", str(NOW - 16 * MINUTE), "16"],
                          ["t", "1", "9", "0", "-1", "2", str(NOW - 60 * MINUTE), "60"]]
    # partitions with a replica on broker 1, asked of broker 1; the candidates' ids looked up, then described
    assert admin.calls == [("producers", (("t", 0), ("t", 1)), 1), ("list", (7, 8, 9), -1),
                           ("describe", ("tx8", "tx9"))]


def test_find_hanging_scopes() -> None:
    admin = hanging_admin()
    assert [r[:3] for r in cells(call(admin, "find-hanging", "--topic", "u")[1])[1:]] == [["u", "0", "12"]]
    rows = cells(call(admin, "find-hanging", "--topic", "t", "--partition", "1",
                      "--max-transaction-timeout", "30")[1])
    assert [r[2] for r in rows[1:]] == ["9"]
    admin.calls.clear()
    assert cells(call(admin, "find-hanging", "--topic", "t", "--max-transaction-timeout", "120")[1]) == [
        list(HANGING_HEADERS)]
    assert [c[0] for c in admin.calls] == ["producers"]  # no candidates: no coordinator lookups
    code, _, err = call(admin, "find-hanging")
    assert code == 1 and err == ("The `find-hanging` command requires either --topic or --broker-id to limit the "
                                 "scope of the search\n")
    code, _, err = call(admin, "find-hanging", "--broker-id", "1", "--partition", "0")
    assert code == 1 and err == "The --partition argument requires --topic to be provided\n"
    code, _, err = call(admin, "find-hanging", "--topic", "nope")
    assert code == 1 and err.startswith("Failed to describe 1 topics:")


def test_force_terminate_transaction() -> None:
    """Kafka 4.4's forceTerminateTransaction: nothing printed when done; Kafka's message for an error."""
    admin = FakeAdmin()
    assert call(admin, "forceTerminateTransaction", "--transactionalId", "t") == (0, "", "")
    assert admin.calls == [("force", "t")]
    code, out, err = call(admin, "forceTerminateTransaction", "--transactionalId", "refused")
    assert (code, out) == (1, "")
    assert err == ("Failed to force terminate transactionalId `refused`: Transactional Id authorization failed.. "
                   "Enable debug logging for additional detail.\n")
    code, _, err = call(admin, "forceTerminateTransaction")
    assert code == 1 and "argument --transactionalId is required" in err
