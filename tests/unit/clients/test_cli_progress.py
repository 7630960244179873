"""Long CLI operations show progress on a terminal: `shoal-share-groups --reset-offsets --execute` over many
partitions goes in chunks and counts them on standard error when it is a TTY, and prints nothing extra otherwise."""

from __future__ import annotations

import io

from shoal_client.admin import ShareGroupDescription
from shoal_client.cli_common import Progress
from shoal_client.share_groups_cli import RESET_CHUNK, ShareGroupService, build_parser, check_args


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeAdmin:
    """The admin calls --reset-offsets makes, answered from memory; it records the request sizes."""

    def __init__(self, partitions: int) -> None:
        self.topic_partitions = list(range(partitions))
        self.list_sizes: list[int] = []
        self.alter_sizes: list[int] = []
        self.altered: dict[tuple[str, int], int] = {}

    def describe_share_group(self, gid: str) -> ShareGroupDescription:
        return ShareGroupDescription(gid, 0, None, state="Empty")

    def partitions(self, topics):
        return {t: self.topic_partitions for t in topics}

    def list_offsets(self, partitions, spec):
        self.list_sizes.append(len(partitions))
        return {tp: 7 for tp in partitions}

    def alter_share_group_offsets(self, gid, offsets):
        self.alter_sizes.append(len(offsets))
        self.altered.update(offsets)
        return {tp: (0, None) for tp in offsets}


def _reset(admin: FakeAdmin, err: io.StringIO) -> io.StringIO:
    args = build_parser().parse_args(["--bootstrap-server", "127.0.0.1:1", "--reset-offsets", "--group", "g",
                                      "--topic", "t", "--to-earliest", "--execute"])
    check_args(args)
    out = io.StringIO()
    ShareGroupService(args, admin, out, err).reset_offsets()
    return out


def test_many_partitions_are_reset_in_chunks_with_progress_on_a_terminal() -> None:
    n = 2 * RESET_CHUNK + 5
    admin, err = FakeAdmin(n), Terminal()
    out = _reset(admin, err)
    assert admin.list_sizes == [RESET_CHUNK, RESET_CHUNK, 5] and admin.alter_sizes == admin.list_sizes
    assert admin.altered == {("t", p): 7 for p in range(n)}
    shown = err.getvalue()
    assert f"\rReading offsets: {RESET_CHUNK}/{n}" in shown and f"\rReading offsets: {n}/{n}\n" in shown
    assert f"\rResetting offsets: {2 * RESET_CHUNK}/{n}" in shown and shown.endswith(f"Resetting offsets: {n}/{n}\n")
    assert len(out.getvalue().splitlines()) == n + 2  # the table Kafka's tool prints, unchanged


def test_no_progress_when_not_a_terminal_or_few_partitions() -> None:
    err = io.StringIO()
    _reset(FakeAdmin(2 * RESET_CHUNK), err)
    assert err.getvalue() == ""
    err = Terminal()
    _reset(FakeAdmin(3), err)
    assert err.getvalue() == ""


def test_progress_counts_do_not_pass_the_total() -> None:
    err = Terminal()
    p = Progress(err, "x", 3)
    p.advance(2)
    p.advance(5)
    p.done()
    assert err.getvalue() == "\rx: 2/3\rx: 3/3\n"
