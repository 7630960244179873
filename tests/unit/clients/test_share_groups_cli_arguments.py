"""shoal-share-groups reads its command line as kafka-share-groups 4.4 does where no broker is involved: numbers
as Java's Long.valueOf (a value it cannot read fails the command, with Kafka's message), --help on standard error
with exit code 1 (tests/differential/test_kafka_tools_groups.py compares them with Kafka's tool)."""

from __future__ import annotations

import io

import pytest

from shoal_client.share_groups_cli import DESCRIPTION, run

DEAD = "127.0.0.1:1"  # nothing is reached: each command line here fails before connecting


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("option", "value"), [
    ("timeout", "abc"), ("timeout", "1.5"), ("timeout", " 5"), ("timeout", "1_000"), ("timeout", ""),
    ("to-offset", "9223372036854775808"), ("to-offset", "x1"),
])
def test_a_number_kafka_cannot_read_fails_the_command(option, value) -> None:
    action = (["--list"] if option == "timeout" else
              ["--reset-offsets", "--group", "g", "--all-topics", "--dry-run"])
    code, out, err = _run("--bootstrap-server", DEAD, *action, f"--{option}", value)
    assert (code, out, err) == (
        1, f"\nError: Executing share group command failed due to Cannot parse argument '{value}' of option "
           f"{option}\n", "")


def test_usage_errors_come_before_reading_numbers() -> None:
    code, _, err = _run("--bootstrap-server", DEAD, "--list", "--describe", "--timeout", "abc")
    assert code == 1 and err.startswith("Option [describe] takes one of these options")


def test_help_is_printed_on_standard_error_with_exit_code_1() -> None:
    code, out, err = _run("--help")
    assert code == 1 and out == ""
    assert err.startswith(DESCRIPTION + "\n") and "--reset-offsets" in err
