"""`shoal-share-groups`: list, describe, reset and delete share groups (the options and output of Kafka's
kafka-share-groups.sh, on Shoal's protocol package; see docs/features.md, "Share-group tool").

Exit codes: 0 done; 1 a usage error, a failed request or any group/topic the command could not act on (Kafka's
tool also answers 0 when some deletions failed; this one says 1 so that scripts notice).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TextIO

from protocol.errors import ErrorCode
from protocol.java_hash import java_hash_order, java_string_hash
from shoal_client.admin import (
    EARLIEST,
    LATEST,
    AdminError,
    ShareGroupAdmin,
    ShareGroupDescription,
    error_name,
)
from shoal_client.cli_common import (
    COMMAND_FAILURES,
    Progress,
    ToolParser,
    UsageError,
    chunks,
    kafka_error,
    load_security,
    tool_version,
    topic_partition_hash,
)
from shoal_client.security import SecurityConfigError

MISSING = "-"
VALID_STATES = ("Empty", "Dead", "Stable")  # in the order Kafka's tool names them
RESET_CHUNK = 1000  # partitions per ListOffsets / AlterShareGroupOffsets request of --reset-offsets
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
DESCRIPTION = "This tool helps to list, describe, delete and manage the offsets of share groups."


def in_kafka_order(items, key=None) -> list:
    """`items` (pairs keyed by their first element) in the order Kafka's tool prints them: a java.util.HashMap's
    of the keys (group ids; partitions with `key`)."""
    items = list(items)
    by_key = dict(items)
    order = java_hash_order(by_key, key or java_string_hash)
    return [(k, by_key[k]) for k in order]


class CommandError(Exception):
    """The command failed: message printed as Kafka's tool prints it, exit code 1."""


def build_parser() -> argparse.ArgumentParser:
    # --help as Kafka's tool answers it: the description and options on standard error, exit code 1
    p = ToolParser(prog="shoal-share-groups", description=DESCRIPTION, allow_abbrev=False, add_help=False)
    p.add_argument("--help", action="store_true", help="Print usage information.")
    p.add_argument("--bootstrap-server", metavar="<String: server to connect to>",
                   help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--command-config", metavar="<String: command config property file>",
                   help="Property file containing configs to be passed to Admin Client (security.protocol, "
                        "sasl.mechanism, sasl.jaas.config or sasl.username/sasl.password, ssl.* PEM files).")
    p.add_argument("--group", action="append", metavar="<String: share group>",
                   help="The share group we wish to act on.")
    p.add_argument("--all-groups", action="store_true", help="Apply to all share groups.")
    p.add_argument("--topic", action="append", metavar="<String: topic>",
                   help="The topic whose offset information should be deleted or included in the reset offset "
                        "process. When resetting offsets, partitions can be specified using this format: "
                        "'topic1:0,1,2', where 0,1,2 are the partitions to be included.")
    p.add_argument("--all-topics", action="store_true",
                   help="Consider all topics assigned to a share group in the 'reset-offsets' process.")
    p.add_argument("--list", action="store_true", help="List all share groups.")
    p.add_argument("--describe", action="store_true", help="Describe share group, members and offset information.")
    p.add_argument("--delete", action="store_true", help="Delete share group.")
    p.add_argument("--reset-offsets", action="store_true",
                   help="Reset offsets of share group. Supports one share group at a time, and instances must be "
                        "inactive. Has 2 execution options: --dry-run to plan which offsets to reset, and --execute "
                        "to reset the offsets. Additionally, the --export option can be used to generate the offsets "
                        "in CSV format for export to a file. You must choose one of the following reset "
                        "specifications: --to-datetime, --to-earliest, --to-latest, --from-file, --to-current, "
                        "--to-offset. To define the scope, use --all-topics or --topic. The scope must be specified "
                        "unless you use --from-file. Fails if neither --dry-run nor --execute is specified.")
    p.add_argument("--delete-offsets", action="store_true",
                   help="Delete offsets of share group. Supports one share group at the time, and multiple topics.")
    p.add_argument("--dry-run", action="store_true",
                   help="Only show results without executing changes on share groups. Supported operations: "
                        "reset-offsets.")
    p.add_argument("--execute", action="store_true", help="Execute operation. Supported operations: reset-offsets.")
    p.add_argument("--export", action="store_true",
                   help="Generate offset reset information in CSV format for export to a file. Supported operation: "
                        "reset-offsets.")
    p.add_argument("--from-file", metavar="<String: path to CSV file>",
                   help="Reset offsets to values defined in CSV file.")
    p.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    p.add_argument("--to-datetime", metavar="<String: datetime>",
                   help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDThh:mm:ss.sss'")
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    # numbers read as Kafka's tool reads them, once the command line passed its checks (java_long)
    p.add_argument("--to-offset", metavar="<Long: offset>", help="Reset offsets to a specific offset.")
    p.add_argument("--members", action="store_true",
                   help="Describe members of the group. This option may be used with the '--describe' option only.")
    p.add_argument("--offsets", action="store_true",
                   help="Describe the group and list all topic partitions in the group along with their offset "
                        "information. This is the default sub-action and may be used with the '--describe' option "
                        "only.")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="[String]",
                   help="When specified with '--describe', includes the state of the group. When specified with "
                        "'--list', it displays the state of all groups. It can also be used to list groups with "
                        "specific states. Valid values are Empty, Stable and Dead.")
    p.add_argument("--verbose", action="store_true",
                   help="Provide additional information, if any, when describing the group. This option may be used "
                        "with the '--describe' option only.")
    p.add_argument("--timeout", default="30000", metavar="<Long: timeout (ms)>",
                   help="The timeout that can be set for some use cases. For example, it can be used when describing "
                        "the group to specify the maximum amount of time in milliseconds to wait before the group "
                        "stabilizes. (default: 30000)")
    p.add_argument("--version", action="store_true", help="Display Shoal's version.")
    return p


SCENARIOS = ("from_file", "to_current", "to_datetime", "to_earliest", "to_latest", "to_offset")


def _opt(name: str) -> str:
    return f"[{name.replace('_', '-')}]"


def _set(a: argparse.Namespace, name: str) -> bool:
    return getattr(a, name) not in (None, False)


def _exclusive(a: argparse.Namespace, first: str, *others: str) -> None:
    """Kafka's CommandLineUtils.checkInvalidArgs: `first` given with any of `others` is refused."""
    if _set(a, first):
        for other in others:
            if _set(a, other):
                raise UsageError(f'Option "{_opt(first)}" can\'t be used with option "{_opt(other)}"')


class OptionValueError(Exception):
    """An option given twice where Kafka's tool takes one value, or a number it cannot read: it fails when it
    reads it, as a command."""


LONG_TEXT = re.compile(r"[+-]?[0-9]+")


def java_long(a: argparse.Namespace, name: str) -> int | None:
    """Option `name`'s value as Kafka's tool reads a Long option (Long.valueOf: digits with an optional sign, within
    64 bits), None when not given."""
    value = getattr(a, name)
    if value is None:
        return None
    if LONG_TEXT.fullmatch(value) and -(1 << 63) <= int(value) < 1 << 63:
        return int(value)
    raise OptionValueError(f"Cannot parse argument '{value}' of option {name.replace('_', '-')}")


def check_args(a: argparse.Namespace) -> None:
    """Kafka 4.4's ShareGroupCommandOptions.checkArgs, with its messages and in its order."""
    if not a.bootstrap_server:
        raise UsageError("Missing required argument \"[bootstrap-server]\"")
    if not a.describe:
        for name in ("members", "offsets", "verbose"):  # joptsimple's availability: with --describe only
            if _set(a, name):
                raise UsageError(f"Option(s) [{name}] are unavailable given other options on the command line")
    if a.describe:
        if not a.group and not a.all_groups:
            raise UsageError("Option [describe] takes one of these options: [all-groups], [group]")
        if sum(map(bool, (a.members, a.offsets, a.state is not None))) > 1:
            raise UsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if a.state:
            raise UsageError("Option [describe] does not take a value for [state]")
    if a.delete:
        if not a.group and not a.all_groups:
            raise UsageError("Option [delete] takes the options [group] or [all-groups].")
        if a.group and a.all_groups:
            raise UsageError("Option [delete] takes either [group] or [all-groups], not both.")
        if a.topic or a.all_topics:
            raise UsageError("Option [delete] does not take the options [topic] or [all-topics].")
    if a.delete_offsets and (not a.group or not a.topic):
        raise UsageError("Option [delete-offsets] takes the following options: [group], [topic]")
    if a.reset_offsets:
        if a.dry_run and a.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not a.dry_run and not a.execute:
            raise UsageError("Option [reset-offsets] takes the option: [execute] or [dry-run]")
        if not a.group:
            raise UsageError("Option [reset-offsets] takes the option: [group]")
        if not any(_set(a, n) for n in SCENARIOS):
            raise UsageError("Option [reset-offsets] takes one of these options: " + ", ".join(map(_opt, SCENARIOS)))
        if not (a.all_topics or a.topic or a.from_file):
            raise UsageError("Option [reset-offsets] takes one of these options: [all-topics], [from-file], [topic]")
        for scenario in ("to_datetime", "to_earliest", "to_latest", "to_offset", "to_current", "from_file"):
            _exclusive(a, scenario, *(n for n in SCENARIOS if n != scenario))
        _exclusive(a, "all_topics", "from_file")
        _exclusive(a, "topic", "all_topics", "from_file")
    _exclusive(a, "group", "all_groups")
    _exclusive(a, "group", "list")
    _exclusive(a, "topic", "describe", "list")
    _exclusive(a, "all_topics", "describe", "list")
    actions = [name for name in ACTIONS if getattr(a, name)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                         "--delete-offsets.")
    if (a.reset_offsets or a.delete_offsets) and len(a.group) > 1:
        raise OptionValueError("Found multiple arguments for option group, but you asked for only one")
    a.timeout = java_long(a, "timeout")  # the admin client's, read by Kafka's tool for every command
    a.to_offset = java_long(a, "to_offset")


def parse_states(value: str) -> list[str]:
    by_lower = {s.lower(): s for s in VALID_STATES}
    states = [s.strip() for s in value.split(",")]
    if any(s.lower() not in by_lower for s in states):
        raise CommandError(f"Invalid state list '{value}'. Valid states are: {', '.join(VALID_STATES)}")
    return [by_lower[s.lower()] for s in states]


def parse_datetime(value: str) -> int:
    """Kafka's formats: 'YYYY-MM-DDThh:mm:ss[.sss][timezone]' (no zone: local time) -> epoch milliseconds."""
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        raise CommandError(f"Error parsing timestamp. It does not contain a 'T' according to ISO8601 format: {value}"
                           if "T" not in value else f"Error parsing timestamp {value}: expected "
                           "'YYYY-MM-DDThh:mm:ss.sss' with an optional zone (Z, +hh:mm)") from None
    return int(when.timestamp() * 1000)


class ShareGroupService:
    def __init__(self, args: argparse.Namespace, admin: ShareGroupAdmin, out: TextIO, err: TextIO) -> None:
        self.a, self.admin, self.out, self.err = args, admin, out, err
        self.failed = False

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def warn(self, message: str) -> None:
        """What Kafka's tool logs as a warning (log4j, on standard error)."""
        print(f"WARN {message}", file=self.err)

    def error(self, message: str) -> None:
        """Kafka's printError: a blank line and "Error: ..." on standard output."""
        self.say(f"\nError: {message}")
        self.failed = True

    def share_groups(self) -> list[tuple[str, str]]:
        return self.admin.list_groups(types=["share"])

    # ------------------------------------------------------------------ list
    def list_groups(self) -> None:
        if self.a.state is None:
            for gid, _ in in_kafka_order(self.share_groups()):
                self.say(gid)
            return
        states = parse_states(self.a.state) if self.a.state else []
        groups = in_kafka_order(self.admin.list_groups(states=states, types=["share"]))
        width = max([15] + [len(g) for g, _ in groups])
        self.say(f"{'GROUP':<{width}} STATE")
        for gid, state in groups:
            self.say(f"{gid:<{width}} {state}")

    # ------------------------------------------------------------------ describe
    def group_ids(self) -> list[str]:
        return [g for g, _ in self.share_groups()] if self.a.all_groups else list(dict.fromkeys(self.a.group))

    def describe(self, gid: str) -> ShareGroupDescription:
        d = self.admin.describe_share_group(gid)
        if d.error_code != 0:
            raise CommandError("Executing share group command failed due to "
                               + kafka_error(d.error_code, d.error_message or error_name(d.error_code)))
        return d

    def describe_groups(self) -> None:
        # every group described before any is printed, in group id order, as Kafka's tool (a TreeMap)
        for d in [self.describe(gid) for gid in sorted(self.group_ids())]:
            if self.a.members:
                self.print_members(d)
            elif self.a.state is not None:
                self.print_state(d)
            else:
                self.print_offsets(d)

    def print_offsets(self, d: ShareGroupDescription) -> None:
        rows = sorted(self.admin.share_group_offsets(d.group_id), key=lambda o: (o.topic, o.partition))
        if not rows:
            self.say(f"\nShare group '{d.group_id}' has no offset information.")
            return
        g = max(15, len(d.group_id))
        t = max([15] + [len(o.topic) for o in rows])

        def show(n: int, known: bool = True) -> str:
            return MISSING if n < 0 or not known else str(n)

        self.say()
        if self.a.verbose:
            self.say(f"{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} {'LEADER-EPOCH':<13} {'START-OFFSET':<13} LAG")
        else:
            self.say(f"{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} {'START-OFFSET':<13} LAG")
        for o in rows:
            lead = f"{d.group_id:<{g}} {o.topic:<{t}} {o.partition:<10} "
            # a share-partition without state has no offset, hence no leader epoch either (Kafka's admin client
            # answers none for it)
            known = o.start_offset >= 0
            if self.a.verbose:
                self.say(f"{lead}{show(o.leader_epoch, known):<13} {show(o.start_offset):<13} {show(o.lag, known)}")
            else:
                self.say(f"{lead}{show(o.start_offset):<13} {show(o.lag, known)}")

    def empty_notice(self, d: ShareGroupDescription) -> bool:
        """Kafka's maybePrintEmptyGroupState; True when member rows should be printed."""
        if d.state == "Dead":
            self.error(f"Share group '{d.group_id}' does not exist.")
        elif d.state == "Empty":
            print(f"\nShare group '{d.group_id}' has no active members.", file=self.err)
        return d.state != "Dead" and bool(d.members)

    def print_state(self, d: ShareGroupDescription) -> None:
        self.empty_notice(d)
        c = d.coordinator
        coordinator = f"{c.host}:{c.port}  ({c.node_id})" if c else MISSING
        g, cw = max(15, len(d.group_id)), max(25, len(coordinator))
        self.say()
        if self.a.verbose:
            self.say(f"{'GROUP':<{g}} {'COORDINATOR (ID)':<{cw}} {'STATE':<15} {'GROUP-EPOCH':<12} "
                     f"{'ASSIGNMENT-EPOCH':<17} #MEMBERS")
            self.say(f"{d.group_id:<{g}} {coordinator:<{cw}} {d.state:<15} {d.group_epoch:<12} "
                     f"{d.assignment_epoch:<17} {len(d.members)}")
        else:
            self.say(f"{'GROUP':<{g}} {'COORDINATOR (ID)':<{cw}} {'STATE':<15} #MEMBERS")
            self.say(f"{d.group_id:<{g}} {coordinator:<{cw}} {d.state:<15} {len(d.members)}")

    def print_members(self, d: ShareGroupDescription) -> None:
        if not self.empty_notice(d):
            return
        members = sorted(d.members, key=lambda m: m.member_id)
        g = max(15, len(d.group_id))
        mw = max([15] + [len(m.member_id) for m in members])
        hw = max([15] + [len(m.client_host) for m in members])
        cw = max([15] + [len(m.client_id) for m in members])

        def assignment(m) -> str:
            return ";".join(sorted(f"{t}:{','.join(map(str, ps))}" for t, ps in m.assignment.items()))

        self.say()
        head = f"{'GROUP':<{g}} {'CONSUMER-ID':<{mw}} {'HOST':<{hw}} {'CLIENT-ID':<{cw}} {'#PARTITIONS':<12} "
        self.say(head + (f"{'MEMBER-EPOCH':<13} ASSIGNMENT" if self.a.verbose else "ASSIGNMENT"))
        for m in members:
            count = sum(len(ps) for ps in m.assignment.values())
            row = f"{d.group_id:<{g}} {m.member_id:<{mw}} {m.client_host:<{hw}} {m.client_id:<{cw}} {count:<12} "
            self.say(row + (f"{m.member_epoch:<13} {assignment(m)}" if self.a.verbose else assignment(m)))

    # ------------------------------------------------------------------ delete groups
    def delete_groups(self) -> None:
        listed = dict(self.share_groups())
        wanted = list(listed) if self.a.all_groups else list(dict.fromkeys(self.a.group))
        failed: dict[str, str] = {}
        for gid in wanted:
            state = listed.get(gid)
            if state is None:
                failed[gid] = kafka_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group '{gid}' is not a share group.")
            elif state == "Dead":
                failed[gid] = f"Share group '{gid}' group state is DEAD."
            elif state != "Empty":
                failed[gid] = kafka_error(ErrorCode.NON_EMPTY_GROUP, f"Share group '{gid}' is not EMPTY.")
        deletable = [g for g in wanted if g not in failed]
        results = self.admin.delete_groups(deletable) if deletable else {}
        success = []
        for gid in deletable:
            code, message = results.get(gid, (int(ErrorCode.UNKNOWN_SERVER_ERROR), None))
            if code == 0:
                success.append(gid)
            else:
                failed[gid] = kafka_error(code, message or error_name(code))
        if not failed:
            self.say(f"Deletion of requested share groups ({', '.join(repr(g) for g in success)}) was successful.")
            return
        self.error("Deletion of some share groups failed:")
        for gid, why in failed.items():
            self.say(f"* Group '{gid}' could not be deleted due to: {why}")
        if success:
            self.say(f"\nThese share groups were deleted successfully: {', '.join(repr(g) for g in success)}")

    # ------------------------------------------------------------------ delete offsets
    def delete_offsets(self) -> None:
        gid = self.a.group[0]
        topics = list(dict.fromkeys(self.a.topic))
        try:
            results = self.admin.delete_share_group_offsets(gid, topics)
        except AdminError as e:
            self.error(str(e))
            results = {t: (e.code, str(e)) for t in topics}
        width = max([15] + [len(t) for t in results])
        self.say()
        self.say(f"{'TOPIC':<{width}} STATUS")
        for topic, (code, message) in sorted(results.items()):
            if code != 0:
                self.failed = True
            self.say(f"{topic:<{width}} {'Successful' if code == 0 else 'Error: ' + (message or error_name(code))}")

    # ------------------------------------------------------------------ reset offsets
    def reset_offsets(self) -> None:
        gid = self.a.group[0]
        d = self.admin.describe_share_group(gid)
        if d.error_code == 0 and d.state not in ("Empty", "Dead"):
            raise CommandError(f"Share group '{gid}' is not empty.")
        if d.error_code not in (0, ErrorCode.GROUP_ID_NOT_FOUND):
            raise CommandError("Executing share group command failed due to "
                               + kafka_error(d.error_code, d.error_message or error_name(d.error_code)))
        if self.a.from_file:
            plan = self.offsets_from_file(self.a.from_file)
        else:
            partitions = self.partitions_to_reset(gid, d.error_code == 0)
            plan = {}
            # Many partitions go in requests of RESET_CHUNK, with progress on a terminal's standard error.
            progress = Progress(self.err, "Reading offsets", len(partitions), minimum=RESET_CHUNK)
            current = self.current_offsets(gid) if self.a.to_current else {}
            for chunk in chunks(partitions, RESET_CHUNK):
                plan.update(self.planned_offsets(chunk, current))
                progress.advance(len(chunk))
            progress.done()
        if self.a.execute:
            errors: dict[tuple[str, int], tuple[int, str | None]] = {}
            progress = Progress(self.err, "Resetting offsets", len(plan), minimum=RESET_CHUNK)
            for chunk in chunks(sorted(plan.items()), RESET_CHUNK):
                answers = self.admin.alter_share_group_offsets(gid, dict(chunk))
                errors.update({tp: r for tp, r in answers.items() if r[0] != 0})
                progress.advance(len(chunk))
            progress.done()
            if errors:
                tp, (code, message) = next(iter(sorted(errors.items())))
                raise CommandError(f"Executing share group command failed due to {message or error_name(code)} "
                                   f"({tp[0]}-{tp[1]})")
        rows = in_kafka_order(plan.items(), key=lambda tp: topic_partition_hash(*tp))
        if self.a.export:  # CSV, as --from-file reads it
            for (topic, p), offset in rows:
                self.say(f"{topic},{p},{offset}")
            self.say()
            return
        self.say()
        if not rows:
            return
        g = max(15, len(gid))
        t = max([15] + [len(topic) for topic, _ in plan])
        self.say(f"{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET")
        for (topic, p), offset in rows:
            self.say(f"{gid:<{g}} {topic:<{t}} {p:<10} {offset}")

    def current_offsets(self, gid: str) -> dict[tuple[str, int], int]:
        return {(o.topic, o.partition): o.start_offset for o in self.admin.share_group_offsets(gid)
                if o.start_offset >= 0}

    def offsets_from_file(self, path: str) -> dict[tuple[str, int], int]:
        """`topic,partition,offset` lines (what --export prints)."""
        plan: dict[tuple[str, int], int] = {}
        try:
            with open(path) as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError:
            raise CommandError(f"Executing share group command failed due to java.io.IOException: Unable to read "
                               f"file {path}") from None
        for line in lines:
            cells = line.split(",")
            try:
                topic, partition, offset = cells[0], int(cells[1]), int(cells[2])
            except (IndexError, ValueError):
                raise CommandError(f"Executing share group command failed due to Mismatched CSV line: {line}") \
                    from None
            plan[(topic, partition)] = offset
        return plan

    def planned_offsets(self, partitions: list[tuple[str, int]], current: dict[tuple[str, int], int]
                        ) -> dict[tuple[str, int], int]:
        if self.a.to_earliest:
            return self.admin.list_offsets(partitions, EARLIEST)
        if self.a.to_latest:
            return self.admin.list_offsets(partitions, LATEST)
        if self.a.to_offset is not None or self.a.to_current:
            # an offset outside the log is moved to its nearest end, as Kafka's tool does
            low, high = self.admin.list_offsets(partitions, EARLIEST), self.admin.list_offsets(partitions, LATEST)
            wanted = {tp: self.a.to_offset if self.a.to_offset is not None else current.get(tp, high[tp])
                      for tp in partitions}
            for tp in java_hash_order(partitions, lambda tp: topic_partition_hash(*tp)):  # Kafka's order
                if wanted[tp] < low[tp]:
                    self.warn(f"New offset ({wanted[tp]}) is lower than earliest offset for topic partition "
                              f"{tp[0]}-{tp[1]}. Value will be set to {low[tp]}.")
                elif wanted[tp] > high[tp]:
                    self.warn(f"New offset ({wanted[tp]}) is higher than latest offset for topic partition "
                              f"{tp[0]}-{tp[1]}. Value will be set to {high[tp]}.")
            return {tp: min(max(wanted[tp], low[tp]), high[tp]) for tp in partitions}
        at = self.admin.list_offsets(partitions, parse_datetime(self.a.to_datetime))
        missing = [tp for tp, offset in at.items() if offset < 0]
        # No record at or after that time: the log end, as Kafka's tool does.
        return {**at, **(self.admin.list_offsets(missing, LATEST) if missing else {})}

    def partitions_to_reset(self, gid: str, exists: bool) -> list[tuple[str, int]]:
        if self.a.topic:
            wanted: list[tuple[str, int]] = []
            whole: list[str] = []
            for spec in self.a.topic:
                topic, sep, parts = spec.partition(":")
                if sep:
                    try:
                        wanted += [(topic, int(p)) for p in parts.split(",") if p.strip()]
                    except ValueError:
                        raise CommandError(f"Executing share group command failed due to For input string: "
                                           f"\"{parts}\"") from None
                else:
                    whole.append(topic)
            known = self.admin.partitions({t for t, _ in wanted} | set(whole))
            for topic in whole:
                if topic not in known:
                    raise CommandError("Executing share group command failed due to This server does not host "
                                       "this topic-partition.")
                wanted += [(topic, p) for p in known[topic]]
            unknown = [f"{t}-{p}" for t, p in wanted if p not in known.get(t, [])]
            if unknown:
                raise CommandError(f"Executing share group command failed due to The partitions "
                                   f"\"{','.join(unknown)}\" do not exist")
            return sorted(set(wanted))
        if not exists:
            return []
        return sorted({(o.topic, o.partition) for o in self.admin.share_group_offsets(gid)})


def run(argv: Sequence[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    parser = build_parser()
    if not argv:
        print(DESCRIPTION, file=err)
        parser.print_help(err)
        return 1
    try:
        args = parser.parse_args(argv)
        if args.help:
            print(DESCRIPTION, file=err)
            parser.print_help(err)
            return 1
        if args.version:
            print(tool_version(), file=out)
            return 0
        check_args(args)
    except UsageError as e:
        print(e, file=err)
        parser.print_usage(err)
        return 1
    except OptionValueError as e:  # Kafka's tool fails on it as a command: printError, exit 0 (here 1)
        print(f"\nError: Executing share group command failed due to {e}", file=out)
        return 1
    try:
        props, security = load_security(args.command_config, err)
    except (OSError, SecurityConfigError) as e:
        print(f"Invalid --command-config: {e}", file=err)
        return 1
    try:
        with ShareGroupAdmin(args.bootstrap_server, security=security, timeout_s=args.timeout / 1000,
                             client_id=props.get("client.id", "shoal-share-groups")) as admin:
            service = ShareGroupService(args, admin, out, err)
            if args.list:
                service.list_groups()
            elif args.describe:
                service.describe_groups()
            elif args.delete:
                service.delete_groups()
            elif args.reset_offsets:
                service.reset_offsets()
            else:
                service.delete_offsets()
            return 1 if service.failed else 0
    except CommandError as e:
        if str(e).startswith("Executing"):
            print(f"\nError: {e}", file=out)
        else:
            print(e, file=err)
        return 1
    except COMMAND_FAILURES as e:
        print(f"\nError: Executing share group command failed due to {e}", file=out)
        return 1


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
