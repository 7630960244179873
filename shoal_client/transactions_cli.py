"""`shoal-transactions`: list and describe transactions, describe a partition's producers, find hanging
transactions and abort them (the commands, options, columns and messages of Kafka's kafka-transactions.sh, on
Shoal's protocol package; see docs/features.md, "Transactions tool").

A hanging transaction is one a partition holds open that its transaction coordinator no longer means to end
(a producer that wrote without adding the partition, a marker that was lost): it pins the partition's last stable
offset, so every read_committed consumer and share group stops there until an operator aborts it.

Exit codes: 0 done; 1 a usage error or a failed command (message on standard error, as Kafka's tool).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import NoReturn, Protocol, TextIO

from protocol.errors import ErrorCode
from shoal_client.admin import (
    AbortSpec,
    AdminError,
    Node,
    PartitionProducers,
    ProducerState,
    TopicPartition,
    TransactionAdmin,
    TransactionDescription,
    TransactionListing,
    error_name,
)
from shoal_client.cli_common import (
    COMMAND_FAILURES,
    ToolParser,
    UsageError,
    kafka_message,
    load_security,
    tool_version,
)
from shoal_client.security import SecurityConfigError

PROG = "shoal-transactions"
DESCRIPTION = ("This tool is used to analyze the transactional state of producers in the cluster. "
               "It can be used to detect and recover from hanging transactions.")
MAX_BATCH_SIZE = 500  # partitions (and topics) per request in find-hanging, as Kafka's tool

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")


class CommandError(Exception):
    """Kafka's printErrorAndExit: the message on standard error, exit code 1."""


class Admin(Protocol):
    """What the commands need of TransactionAdmin (a fake in unit tests)."""

    def metadata(self, topics: Iterable[str] | None = None) -> tuple[dict[int, Node], dict]: ...
    def list_transactions(self, *, states: Sequence[str] = (), producer_ids: Iterable[int] = (),
                          duration_ms: int = -1) -> dict[int, list[TransactionListing]]: ...
    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription]: ...
    def describe_producers(self, partitions: Iterable[TopicPartition], broker_id: int | None = None
                           ) -> dict[TopicPartition, PartitionProducers]: ...
    def abort_transaction(self, spec: AbortSpec) -> None: ...
    def force_terminate_transaction(self, transactional_id: str) -> None: ...


class TransactionsParser(ToolParser):
    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        # -h/--help (the only exit with status 0 here): Kafka's tool prints the help, then exits 1 (argparse4j's
        # help screen is an error to it)
        super().exit(status or 1, message)


def build_parser() -> argparse.ArgumentParser:
    p = TransactionsParser(prog=PROG, description=DESCRIPTION, allow_abbrev=False)
    p.add_argument("-v", "--version", action="store_true", help="show the version of this Shoal distribution and exit")
    p.add_argument("--command-config", metavar="FILE",
                   help="property file containing configs to be passed to admin client (security.protocol, "
                        "sasl.mechanism, sasl.jaas.config or sasl.username/sasl.password, ssl.* PEM files)")
    p.add_argument("--bootstrap-server", metavar="host:port",
                   help="hostname and port for the broker to connect to, in the form `host:port`  (multiple "
                        "comma-separated entries can be given)")
    commands = p.add_subparsers(dest="command", title="commands", metavar="COMMAND")

    c = commands.add_parser("list", help="list transactions", allow_abbrev=False)
    c.add_argument("--duration-filter", type=int, metavar="DURATION_FILTER",
                   help="Duration (in millis) to filter by: if < 0, all transactions will be returned; otherwise, "
                        "only transactions running longer than this duration will be returned")

    c = commands.add_parser("describe", help="describe the state of an active transactional-id",
                            description="Describe the state of an active transactional-id.", allow_abbrev=False)
    c.add_argument("--transactional-id", required=True, help="transactional id")

    c = commands.add_parser("describe-producers", help="describe the states of active producers for a topic "
                            "partition", allow_abbrev=False)
    c.add_argument("--broker-id", type=int,
                   help="optional broker id to describe the producer state on a specific replica")
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument("--partition", type=int, required=True, help="partition number")

    c = commands.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)",
                            allow_abbrev=False)
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument("--partition", type=int, required=True, help="partition number")
    newer = c.add_argument_group("Brokers on versions 3.0 and above",
                                 "For newer brokers, only the start offset of the transaction to be aborted is "
                                 "required")
    newer.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    older = c.add_argument_group("Brokers on versions older than 3.0",
                                 "For older brokers, you must provide all of these arguments")
    older.add_argument("--producer-id", type=int, help="producer id")
    older.add_argument("--producer-epoch", type=int, help="producer epoch")
    older.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")

    c = commands.add_parser("forceTerminateTransaction", help="Force abort an ongoing transaction on transactionalId "
                            "(requires administrative privileges)",
                            description="Force abort an ongoing transaction on transactionalId", allow_abbrev=False)
    c.add_argument("--transactionalId", dest="transactional_id", required=True, help="transactional id")

    c = commands.add_parser("find-hanging", help="find hanging transactions", allow_abbrev=False)
    c.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    c.add_argument("--max-transaction-timeout", type=int, default=15,
                   help="maximum transaction timeout in minutes to limit the scope of the search (15 minutes by "
                        "default)")
    c.add_argument("--topic", help="topic name to limit search to (required if --partition is specified)")
    c.add_argument("--partition", type=int, help="partition number")
    return p


def pretty_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Kafka's ToolsUtils.prettyPrintTable: every cell padded to its column's width and followed by a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return ["".join(f"{cell:<{w}}\t" for cell, w in zip(row, widths, strict=True)) for row in [headers, *rows]]


def tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def failure(message: str, cause: object) -> CommandError:
    """Kafka's printErrorAndExit(message, throwable)."""
    return CommandError(f"{message}: {cause}. Enable debug logging for additional detail.")


def cause(e: AdminError) -> str:
    """An admin error's message as Kafka's exception for it carries: the broker's, else Kafka's for the code."""
    text = str(e)
    return kafka_message(e.code) if text == error_name(e.code) else text


def _error(code: int, message: str | None = None) -> str:
    """An error's message as Kafka's admin client words it: the broker's, else Kafka's own for the code."""
    return message or kafka_message(code)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def chunks(items: Sequence, size: int) -> list[Sequence]:
    return [items[i:i + size] for i in range(0, len(items), size)]


class TransactionsService:
    def __init__(self, args: argparse.Namespace, admin: Admin, out: TextIO,
                 now_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.a, self.admin, self.out, self.now_ms = args, admin, out, now_ms

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        for line in pretty_table(headers, rows):
            print(line, file=self.out)

    def run(self) -> None:
        {"list": self.list_transactions, "describe": self.describe, "describe-producers": self.describe_producers,
         "abort": self.abort, "find-hanging": self.find_hanging,
         "forceTerminateTransaction": self.force_terminate}[self.a.command]()

    # ------------------------------------------------------------------ forceTerminateTransaction
    def force_terminate(self) -> None:
        tid = self.a.transactional_id
        try:
            self.admin.force_terminate_transaction(tid)
        except AdminError as e:
            raise failure(f"Failed to force terminate transactionalId `{tid}`", cause(e)) from None

    # ------------------------------------------------------------------ list
    def list_transactions(self) -> None:
        duration = self.a.duration_filter
        try:
            by_broker = self.admin.list_transactions(duration_ms=-1 if duration is None else duration)
        except AdminError as e:
            raise failure("Failed to list transactions", cause(e)) from None
        # each broker's listings in the order it gave them, as Kafka's tool prints them
        self.table(LIST_HEADERS, [(t.transactional_id, str(broker), str(t.producer_id), t.state)
                                  for broker, listings in sorted(by_broker.items()) for t in listings])

    # ------------------------------------------------------------------ describe
    def describe(self) -> None:
        tid = self.a.transactional_id
        try:
            d = self.admin.describe_transactions([tid])[tid]
        except AdminError as e:
            d = TransactionDescription(tid, -1, e.code, str(e))
        if d.error_code != 0:
            # Kafka's DescribeTransactionsHandler words the coordinator's two answers about the id itself
            about_the_id: dict[int, str] = {
                ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: f"DescribeTransactions request for transactionalId `{tid}` "
                                                      "failed because the ID could not be found",
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: f"DescribeTransactions request for transactionalId "
                                                                 f"`{tid}` failed due to authorization failure"}
            cause = about_the_id.get(d.error_code)
            raise failure(f"Failed to describe transaction state of transactional-id `{tid}`",
                          cause or _error(d.error_code, d.error_message))
        if d.transaction_start_time_ms >= 0:
            start, duration = str(d.transaction_start_time_ms), str(self.now_ms() - d.transaction_start_time_ms)
        else:
            start = duration = "None"
        self.table(DESCRIBE_HEADERS, [(str(d.coordinator_id), tid, str(d.producer_id), str(d.producer_epoch),
                                       d.state, str(d.transaction_timeout_ms), start, duration,
                                       ",".join(map(tp_name, d.topic_partitions)))])

    # ------------------------------------------------------------------ describe-producers
    def describe_producers(self) -> None:
        tp = (self.a.topic, self.a.partition)
        where = "leader" if self.a.broker_id is None else f"broker {self.a.broker_id}"
        try:
            result = self.admin.describe_producers([tp], self.a.broker_id)[tp]
        except AdminError as e:
            result = PartitionProducers(e.code, str(e))
        if result.error_code != 0:
            raise failure(f"Failed to describe producers for partition {tp_name(tp)} on {where}",
                          _error(result.error_code, result.error_message))
        self.table(PRODUCERS_HEADERS, [
            (str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
             str(p.last_timestamp), "None" if p.current_txn_start_offset < 0 else str(p.current_txn_start_offset))
            for p in result.producers])

    # ------------------------------------------------------------------ abort
    def abort(self) -> None:
        a = self.a
        tp = (a.topic, a.partition)
        if a.start_offset is None and a.producer_id is None:
            raise CommandError("The transaction to abort must be identified either with --start-offset (for brokers "
                               "on 3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch "
                               "(for older brokers)")
        if a.start_offset is None:
            if a.producer_epoch is None:
                raise CommandError("Missing required argument --producer-epoch")
            if a.coordinator_epoch is None:
                raise CommandError("Missing required argument --coordinator-epoch")
            # A producer whose transaction hung before any marker shows coordinator epoch -1; 0 is <= any epoch.
            spec = AbortSpec(a.topic, a.partition, a.producer_id, a.producer_epoch, max(a.coordinator_epoch, 0))
        else:
            spec = self.abort_spec(tp, a.start_offset)
        try:
            self.admin.abort_transaction(spec)
        except AdminError as e:
            raise failure(f"Failed to abort transaction AbortTransactionSpec(topicPartition={tp_name(tp)}, "
                          f"producerId={spec.producer_id}, producerEpoch={spec.producer_epoch}, "
                          f"coordinatorEpoch={spec.coordinator_epoch})", cause(e)) from None

    def abort_spec(self, tp: TopicPartition, start_offset: int) -> AbortSpec:
        """The producer whose open transaction starts at `start_offset`, from the partition's DescribeProducers."""
        try:
            result = self.admin.describe_producers([tp])[tp]
        except AdminError as e:
            result = PartitionProducers(e.code, str(e))
        if result.error_code != 0:
            raise failure(f"Failed to validate producer state for partition {tp_name(tp)}",
                          _error(result.error_code, result.error_message))
        found = next((p for p in result.producers if p.current_txn_start_offset == start_offset), None)
        if found is None:
            raise CommandError(f"Could not find any open transactions starting at offset {start_offset} on "
                               f"partition {tp_name(tp)}")
        return AbortSpec(tp[0], tp[1], found.producer_id, found.producer_epoch, max(found.coordinator_epoch, 0))

    # ------------------------------------------------------------------ find-hanging
    def find_hanging(self) -> None:
        a = self.a
        if a.topic is None and a.broker_id is None:
            raise CommandError("The `find-hanging` command requires either --topic or --broker-id to limit the "
                               "scope of the search")
        if a.partition is not None and a.topic is None:
            raise CommandError("The --partition argument requires --topic to be provided")
        candidates = self.open_transactions(self.partitions_to_search(), a.max_transaction_timeout * 60_000)
        hanging = self.without_coordinator(candidates) if candidates else []
        now = self.now_ms()
        self.table(HANGING_HEADERS, [
            (tp[0], str(tp[1]), str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch),
             str(p.current_txn_start_offset), str(p.last_timestamp), str((now - p.last_timestamp) // 60_000))
            for tp, p in hanging])

    def partitions_to_search(self) -> list[TopicPartition]:
        a = self.a
        if a.topic is not None and a.partition is not None:
            return [(a.topic, a.partition)]
        if a.topic is not None:
            topics = [a.topic]
        else:
            try:
                _, found = self.admin.metadata(None)
            except AdminError as e:
                raise failure("Failed to list topics", cause(e)) from None
            topics = sorted(found)
        out: list[TopicPartition] = []
        for batch in chunks(topics, MAX_BATCH_SIZE):
            _, found = self.admin.metadata(batch)
            missing = [t for t in batch if t not in found]
            if missing:
                raise failure(f"Failed to describe {len(batch)} topics",
                              f"This server does not host this topic-partition ({', '.join(missing)})")
            for topic in batch:
                out += [(topic, p.partition_index) for p in sorted(found[topic].partitions,
                                                                   key=lambda p: p.partition_index)
                        if a.broker_id is None or a.broker_id in p.replica_nodes]
        return out

    def open_transactions(self, partitions: list[TopicPartition], max_timeout_ms: int
                          ) -> list[tuple[TopicPartition, ProducerState]]:
        """Producers with a transaction open on a partition for longer than any transaction may run."""
        out: list[tuple[TopicPartition, ProducerState]] = []
        for batch in chunks(partitions, MAX_BATCH_SIZE):
            where = f"broker {self.a.broker_id}" if self.a.broker_id is not None else "their leaders"
            try:
                results = self.admin.describe_producers(batch, self.a.broker_id)
            except AdminError as e:
                raise failure(f"Failed to describe producers for {len(batch)} partitions on {where}",
                              cause(e)) from None
            now = self.now_ms()
            for tp in batch:
                r = results.get(tp, PartitionProducers(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
                if r.error_code != 0:
                    raise failure(f"Failed to describe producers for {len(batch)} partitions on {where}",
                                  _error(r.error_code, r.error_message))
                out += [(tp, p) for p in r.producers
                        if p.current_txn_start_offset >= 0 and now - p.last_timestamp > max_timeout_ms]
        return out

    def without_coordinator(self, candidates: list[tuple[TopicPartition, ProducerState]]
                            ) -> list[tuple[TopicPartition, ProducerState]]:
        """The candidates whose coordinator will not end them: no transactional id lists the producer, the id is
        gone, or its current transaction does not include the partition (DescribeTransactions lists the partitions
        of an ongoing transaction and those still waiting for markers)."""
        producer_ids = {p.producer_id for _, p in candidates}
        try:
            listings = self.admin.list_transactions(producer_ids=sorted(producer_ids))
        except AdminError as e:
            raise failure(f"Failed to list transactions for {len(producer_ids)} producers", cause(e)) from None
        tids = {t.producer_id: t.transactional_id for ls in listings.values() for t in ls
                if t.producer_id in producer_ids}
        descriptions = self.admin.describe_transactions(sorted(set(tids.values())))
        for d in descriptions.values():
            if d.error_code not in (0, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND):
                raise failure(f"Failed to describe {len(descriptions)} transactions",
                              _error(d.error_code, d.error_message))
        hanging = []
        for tp, p in candidates:
            tid = tids.get(p.producer_id)
            described = descriptions.get(tid) if tid is not None else None
            if described is None or described.error_code != 0 or tp not in described.topic_partitions:
                hanging.append((tp, p))
        return hanging


def run(argv: Sequence[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr,
        admin_factory: Callable[..., TransactionAdmin] = TransactionAdmin,
        now_ms: Callable[[], int] = wall_clock_ms) -> int:
    """The tool on `argv`; `admin_factory` and `now_ms` are the seams unit tests replace."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.version:
            print(tool_version(), file=out)
            return 0
        if not args.bootstrap_server:
            raise UsageError("argument --bootstrap-server is required")
        if args.command is None:
            raise UsageError("too few arguments")
    except UsageError as e:
        parser.print_usage(err)
        print(f"{PROG}: error: {e}", file=err)
        return 1
    try:
        props, security = load_security(args.command_config, err)
    except (OSError, SecurityConfigError) as e:
        print(f"Failed to load admin client properties: {e}. Enable debug logging for additional detail.", file=err)
        return 1
    try:
        with admin_factory(args.bootstrap_server, security=security,
                           client_id=props.get("client.id", PROG)) as admin:
            TransactionsService(args, admin, out, now_ms).run()
            return 0
    except CommandError as e:
        print(e, file=err)
        return 1
    except COMMAND_FAILURES as e:
        print(f"Failed to run the `{args.command}` command: {e}. Enable debug logging for additional detail.",
              file=err)
        return 1


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
