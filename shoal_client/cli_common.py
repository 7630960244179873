"""What Shoal's command-line tools (shoal-share-groups, shoal-transactions) share: a parser that says usage
errors the way Kafka's tools do (exit code 1), loading --command-config into client security, the errors a
command's connection may end in, and the version they print."""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import NoReturn, TextIO

from shoal_client.admin import AdminError
from shoal_client.connection import ConnectionLost, UnsupportedVersionError
from shoal_client.security import AuthenticationError, ClientSecurity, load_properties

# What talking to the cluster may end in; each tool words the message its own way, as Kafka's tools do.
COMMAND_FAILURES: tuple[type[Exception], ...] = (
    ConnectionLost, UnsupportedVersionError, AuthenticationError, AdminError, ValueError)


class UsageError(Exception):
    """A command line the tool refuses: its message and the usage, exit code 1."""


class ToolParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2; Kafka's tools exit 1
        raise UsageError(message)


def load_security(command_config: str | None, err: TextIO) -> tuple[dict[str, str], ClientSecurity]:
    """The --command-config properties (none without the option) and the client security they set; the
    properties no client setting uses are named on `err`. Raises OSError or SecurityConfigError."""
    props = load_properties(command_config) if command_config else {}
    security = ClientSecurity.from_properties(props)
    if security.unused:
        print(f"These properties are not used by this tool: {', '.join(security.unused)}", file=err)
    return props, security


def tool_version() -> str:
    try:
        return metadata.version("shoal")
    except metadata.PackageNotFoundError:
        return "unknown"


class Progress:
    """"label: done/total" on `err`, rewritten in place, for operations over many items; shown only when `err` is a
    terminal (a pipe or a test reading the output sees nothing, as with Kafka's tools) and `total` reaches
    `minimum`. `done()` ends the line."""

    def __init__(self, err: TextIO, label: str, total: int, minimum: int = 1) -> None:
        self._err, self._label, self.total = err, label, total
        isatty = getattr(err, "isatty", None)
        self.shown = bool(isatty and isatty()) and total >= minimum
        self.count = 0

    def advance(self, n: int) -> None:
        self.count = min(self.total, self.count + n)
        if self.shown:
            self._err.write(f"\r{self._label}: {self.count}/{self.total}")
            self._err.flush()

    def done(self) -> None:
        if self.shown:
            self._err.write("\n")
            self._err.flush()


def chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]
