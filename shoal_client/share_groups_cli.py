"""`shoal-share-groups`: list, describe, reset and delete share groups (the options and output of Kafka's
kafka-share-groups.sh, on Shoal's protocol package; see docs/features.md, "Share-group tool").

Exit codes: 0 done; 1 a usage error, a failed request or any group/topic the command could not act on (Kafka's
tool also answers 0 when some deletions failed; this one says 1 so that scripts notice).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TextIO

from protocol.errors import ErrorCode
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
    load_security,
    tool_version,
)
from shoal_client.security import SecurityConfigError

MISSING = "-"
VALID_STATES = ("Dead", "Empty", "Stable")
RESET_CHUNK = 1000  # partitions per ListOffsets / AlterShareGroupOffsets request of --reset-offsets
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
DESCRIPTION = "This tool helps to list, describe, reset and delete share groups."


class CommandError(Exception):
    """The command failed: message printed as Kafka's tool prints it, exit code 1."""


def build_parser() -> argparse.ArgumentParser:
    p = ToolParser(prog="shoal-share-groups", description=DESCRIPTION, allow_abbrev=False)
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
                   help="Reset offsets of share group. Supports one share group at the time, and instances must be "
                        "inactive. Has 2 execution options: --dry-run to plan which offsets to reset, and --execute "
                        "to reset the offsets. You must choose one of the following reset specifications: "
                        "--to-datetime, --to-earliest, --to-latest. To define the scope use --all-topics or --topic.")
    p.add_argument("--delete-offsets", action="store_true",
                   help="Delete offsets of share group. Supports one share group at the time, and multiple topics.")
    p.add_argument("--dry-run", action="store_true",
                   help="Only show results without executing changes on share groups. Supported operations: "
                        "reset-offsets.")
    p.add_argument("--execute", action="store_true", help="Execute operation. Supported operations: reset-offsets.")
    p.add_argument("--to-datetime", metavar="<String: datetime>",
                   help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDThh:mm:ss.sss'")
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
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
    p.add_argument("--timeout", type=int, default=30000, metavar="<Long: timeout (ms)>",
                   help="The timeout that can be set for some use cases. For example, it can be used when describing "
                        "the group to specify the maximum amount of time in milliseconds to wait before the group "
                        "stabilizes. (default: 30000)")
    p.add_argument("--version", action="store_true", help="Display Shoal's version.")
    return p


def check_args(a: argparse.Namespace) -> None:
    """Kafka's ShareGroupCommandOptions.checkArgs, with its messages."""
    if not a.bootstrap_server:
        raise UsageError("Missing required argument \"[bootstrap-server]\"")
    actions = [name for name in ACTIONS if getattr(a, name)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                         "--delete-offsets.")
    if a.describe:
        if not a.group and not a.all_groups:
            raise UsageError("Option [describe] takes one of these options: [all-groups], [group]")
        if sum(map(bool, (a.members, a.offsets, a.state is not None))) > 1:
            raise UsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if a.state:
            raise UsageError("Option [describe] does not take a value for [state]")
    elif a.members or a.offsets or a.verbose:
        raise UsageError("Option [members], [offsets] and [verbose] may be used with [describe] only")
    if a.state is not None and not (a.describe or a.list):
        raise UsageError("Option [state] can be used with [describe] or [list] only")
    if a.delete:
        if not a.group and not a.all_groups:
            raise UsageError("Option [delete] takes the options [group] or [all-groups]")
        if a.group and a.all_groups:
            raise UsageError("Option [delete] takes either [group] or [all-groups], not both.")
        if a.topic:
            raise UsageError("Option [delete] does not take the option: [topic]")
    if a.delete_offsets and (not a.group or not a.topic):
        raise UsageError("Option [delete-offsets] takes the following options: [group], [topic]")
    if a.reset_offsets:
        if a.dry_run and a.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not a.dry_run and not a.execute:
            raise UsageError("Option [reset-offsets] takes the option: [execute] or [dry-run]")
        if not a.group:
            raise UsageError("Option [reset-offsets] takes the option: [group]")
        if not a.topic and not a.all_topics:
            raise UsageError("Option [reset-offsets] requires one of these options: [all-topics] or [topic]")
        if a.topic and a.all_topics:
            raise UsageError("Option [reset-offsets] takes either [topic] or [all-topics], not both.")
        scenarios = [n for n in ("to_datetime", "to_earliest", "to_latest") if getattr(a, n) not in (None, False)]
        if not scenarios:
            raise UsageError("Option '[reset-offsets]' requires one of the following scenarios: "
                             "[[to-datetime], [to-earliest], [to-latest]]")
        if len(scenarios) > 1:
            names = [f"[{n.replace('_', '-')}]" for n in scenarios]
            raise UsageError(f"Option \"{names[0]}\" can't be used with option \"{names[1]}\"")
        if len(a.group) > 1:
            raise UsageError("Option [reset-offsets] supports one share group at a time")
    elif a.dry_run or a.execute or a.to_datetime or a.to_earliest or a.to_latest or a.all_topics:
        raise UsageError("Options [dry-run], [execute], [to-datetime], [to-earliest], [to-latest] and [all-topics] "
                         "may be used with [reset-offsets] only")
    if a.group and a.all_groups:
        raise UsageError("Option [group] is not valid with [all-groups]")
    if a.group and a.list:
        raise UsageError("Option [group] is not valid with [list]")
    if a.topic and not (a.delete_offsets or a.reset_offsets):
        raise UsageError("Option [topic] is valid with [reset-offsets] and [delete-offsets] only")
    if a.delete_offsets and len(a.group) > 1:
        raise UsageError("Option [delete-offsets] supports one share group at a time")


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

    def error(self, message: str) -> None:
        """Kafka's printError: a blank line and "Error: ..." on standard output."""
        self.say(f"\nError: {message}")
        self.failed = True

    def share_groups(self) -> list[tuple[str, str]]:
        return self.admin.list_groups(types=["share"])

    # ------------------------------------------------------------------ list
    def list_groups(self) -> None:
        if self.a.state is None:
            for gid, _ in self.share_groups():
                self.say(gid)
            return
        states = parse_states(self.a.state) if self.a.state else []
        groups = self.admin.list_groups(states=states, types=["share"])
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
            raise CommandError(f"Executing share group command failed due to {d.error_message or error_name(d.error_code)}")
        return d

    def describe_groups(self) -> None:
        for gid in sorted(self.group_ids()):
            d = self.describe(gid)
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

        def show(n: int) -> str:
            return MISSING if n < 0 else str(n)

        self.say()
        if self.a.verbose:
            self.say(f"{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} {'LEADER-EPOCH':<13} {'START-OFFSET':<13} LAG")
        else:
            self.say(f"{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} {'START-OFFSET':<13} LAG")
        for o in rows:
            lead = f"{d.group_id:<{g}} {o.topic:<{t}} {o.partition:<10} "
            if self.a.verbose:
                self.say(f"{lead}{show(o.leader_epoch):<13} {show(o.start_offset):<13} {show(o.lag)}")
            else:
                self.say(f"{lead}{show(o.start_offset):<13} {show(o.lag)}")

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
                failed[gid] = f"GROUP_ID_NOT_FOUND: Group '{gid}' is not a share group."
            elif state == "Dead":
                failed[gid] = f"Share group '{gid}' group state is DEAD."
            elif state != "Empty":
                failed[gid] = f"NON_EMPTY_GROUP: Share group '{gid}' is not EMPTY."
        deletable = [g for g in wanted if g not in failed]
        results = self.admin.delete_groups(deletable) if deletable else {}
        success = []
        for gid in deletable:
            code, message = results.get(gid, (int(ErrorCode.UNKNOWN_SERVER_ERROR), None))
            if code == 0:
                success.append(gid)
            else:
                failed[gid] = f"{error_name(code)}: {message or error_name(code)}"
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
            raise CommandError(f"Executing share group command failed due to "
                               f"{d.error_message or error_name(d.error_code)}")
        partitions = self.partitions_to_reset(gid, d.error_code == 0)
        if not partitions:
            return
        plan: dict[tuple[str, int], int] = {}
        # Many partitions go in requests of RESET_CHUNK, with progress on a terminal's standard error.
        progress = Progress(self.err, "Reading offsets", len(partitions), minimum=RESET_CHUNK)
        for chunk in chunks(partitions, RESET_CHUNK):
            plan.update(self.planned_offsets(chunk))
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
        g = max(15, len(gid))
        t = max([15] + [len(topic) for topic, _ in plan])
        self.say()
        self.say(f"{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET")
        for (topic, p), offset in sorted(plan.items()):
            self.say(f"{gid:<{g}} {topic:<{t}} {p:<10} {offset}")

    def planned_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if self.a.to_earliest:
            return self.admin.list_offsets(partitions, EARLIEST)
        if self.a.to_latest:
            return self.admin.list_offsets(partitions, LATEST)
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
                        raise CommandError(f"Invalid partition list in '{spec}'") from None
                else:
                    whole.append(topic)
            known = self.admin.partitions({t for t, _ in wanted} | set(whole))
            for topic in whole:
                if topic not in known:
                    raise CommandError(f"The topic '{topic}' does not exist")
                wanted += [(topic, p) for p in known[topic]]
            unknown = [f"{t}-{p}" for t, p in wanted if p not in known.get(t, [])]
            if unknown:
                raise CommandError(f"The partitions \"{','.join(unknown)}\" do not exist")
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
        if args.version:
            print(tool_version(), file=out)
            return 0
        check_args(args)
    except UsageError as e:
        print(e, file=err)
        parser.print_usage(err)
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
            if args.describe or args.delete_offsets or args.reset_offsets:
                print("", file=out)  # Kafka's tables end with a line break
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
