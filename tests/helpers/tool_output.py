"""What a command-line tool printed, normalised for the differential suite: Kafka's tools (and Shoal's own) run
against Kafka and against Shoal print what must differ between two brokers, and pad their columns to the widths
of what they print. `ToolOutput(target).run(run)` gives {"exit": N, "stdout": [...], "stderr": [...]}, each line as
its whitespace-separated tokens (so column widths do not count, the order and content of cells does), after:

- names made by `target.unique` back to their base; `names=` adds more (e.g. a producer id -> "pid:1");
- the broker's host:port, and any loopback host:port, to `<host>:<port>`;
- UUIDs (8-4-4-4-12) and Kafka's base64 ids (topic, cluster, member ids: 22 characters) to `<uuid:N>`, numbered
  by first appearance over every run given to the same ToolOutput, so the same id compares equal;
- ISO date-times to `<datetime>`, epoch milliseconds (13 digits, after 2001) to `<timestamp>`, and log lines'
  `[yyyy-MM-dd HH:mm:ss,SSS]` prefix to `[<time>]`;
- lines a JVM adds (its warnings) and the frames of a stack trace (`\tat ...`, `... N more`) dropped: where the
  tool was called from differs (ToolBatch's reflection), what was thrown does not.

Blank lines are kept (as []), since where a tool prints them is part of its output.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tests.helpers.differential import Target

_JVM_NOISE = re.compile(r"^(OpenJDK 64-Bit Server VM warning:|Java HotSpot\(TM\)|WARNING: |Picked up JAVA_TOOL_OPTIONS)")
_FRAME = re.compile(r"^\s+(at \S|\.\.\. \d+ more$)")
_LOG_TIME = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]")
_HOST_PORT = re.compile(r"(?<![\w.])(127\.0\.0\.1|localhost):\d{2,5}\b")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
# Kafka's Uuid.toString(): 16 bytes, URL-safe base64 without padding (librdkafka's member ids: standard base64).
# A word of 22 such characters that mixes cases; plain words and our base names (lower case) never look like that.
_KAFKA_ID = re.compile(r"(?<![A-Za-z0-9_+/-])[A-Za-z0-9_+/-]{22}(?![A-Za-z0-9_+/-])")
_DATETIME = re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?\b")
_EPOCH_MS = re.compile(r"(?<![\w.-])1[7-9]\d{11}(?![\w.])")


_CAMEL_WORDS = re.compile(r"(?:[A-Z][a-z]+)+")


def _looks_like_id(word: str) -> bool:
    # A Java class's name or a table header may be 22 characters too (GroupNotEmptyException,
    # LatestCoordinatorEpoch): kept, it is compared. (Numbered as an id, a header took the number of however many
    # ids that broker's earlier outputs held.) A random id spelling capitalised words is too unlikely to matter.
    return (any(c.isupper() for c in word) and any(c.islower() for c in word)
            and not word.endswith(("Exception", "Error")) and not _CAMEL_WORDS.fullmatch(word))


class ToolOutput:
    """Normalises the runs of one broker's side of a comparison (ids numbered across all of them)."""

    def __init__(self, target: Target, names: Mapping[str, str] | None = None) -> None:
        self.target = target
        self.names = {**target.names(), **(names or {})}
        self._ids: dict[str, str] = {}

    def add_names(self, names: Mapping[str, str]) -> None:
        self.names.update(names)

    def _id(self, value: str) -> str:
        return self._ids.setdefault(value, f"<uuid:{len(self._ids) + 1}>")

    def text(self, value: str) -> str:
        """One piece of text with what differs between brokers replaced."""
        for name in sorted(self.names, key=len, reverse=True):  # a prefix of another name must not cut it
            if name in value:
                value = value.replace(name, self.names[name])
        value = value.replace(self.target.bootstrap, "<host>:<port>")
        value = _HOST_PORT.sub("<host>:<port>", value)
        value = _UUID.sub(lambda m: self._id(m.group(0).lower()), value)
        value = _KAFKA_ID.sub(lambda m: self._id(m.group(0)) if _looks_like_id(m.group(0)) else m.group(0), value)
        value = _DATETIME.sub("<datetime>", value)
        return _EPOCH_MS.sub("<timestamp>", value)

    def lines(self, text: str) -> list[list[str]]:
        """Each line's tokens, JVM warnings and stack frames dropped."""
        out = []
        for line in text.splitlines():
            if _JVM_NOISE.match(line) or _FRAME.match(line):
                continue
            line = _LOG_TIME.sub("[<time>]", line)
            out.append(self.text(line).split())
        return out

    def run(self, run: Any, *, stdout: Callable[[list[list[str]]], Any] | None = None,
            stderr: Callable[[list[list[str]]], Any] | None = None) -> dict[str, Any]:
        """{"exit", "stdout", "stderr"} of a ToolRun (or anything with those attributes, e.g. a CompletedProcess
        with `returncode`); `stdout`/`stderr` post-process the token lines (sorting, dropping columns)."""
        code = getattr(run, "exit", None)
        if code is None:
            code = run.returncode
        out, err = self.lines(run.stdout), self.lines(run.stderr)
        return {"exit": code, "stdout": stdout(out) if stdout else out, "stderr": stderr(err) if stderr else err}


def outcome(pair: Iterable[Target], runs: Mapping[str, Mapping[str, Any]],
            shape: Callable[[str, dict[str, Any]], Any] | None = None,
            names: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, dict[str, Any]]:
    """Each broker's runs ({broker: {label: run}}, as kafka_tools.on_pair gives them) normalised, ids numbered
    across the runs of a broker: {broker: {label: {"exit", "stdout", "stderr"}}}, for assert_same.
    `shape(label, normalised)` post-processes one run's output (e.g. drops what a comparison leaves out);
    `names` adds {broker: {text: replacement}}."""
    return {target.name: normalised(target, runs[target.name], shape, (names or {}).get(target.name))
            for target in pair}


def normalised(target: Target, runs: Mapping[str, Any], shape: Callable[[str, dict[str, Any]], Any] | None = None,
               names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One broker's runs ({label: run}) normalised, as `outcome` does for each broker."""
    norm = ToolOutput(target, names)
    seen = {label: norm.run(run) for label, run in runs.items()}
    return {label: shape(label, value) if shape else value for label, value in seen.items()}


def table(lines: list[list[str]]) -> list[list[str]]:
    """The non-blank lines of a table."""
    return [line for line in lines if line]


def column(lines: list[list[str]], header: str, replace: Callable[[str], str]) -> list[list[str]]:
    """`replace` applied to the cells under `header` (the first line that has it is the header; rows as long as
    it follow). For values that differ by nature, e.g. producer ids or timings."""
    out, at = [], None
    for line in lines:
        if at is None and header in line:
            at = line.index(header)
            out.append(line)
            continue
        if at is not None and len(line) > at:
            line = [*line[:at], replace(line[at]), *line[at + 1:]]
        out.append(line)
    return out


def drop_logs(lines: Iterable[list[str]]) -> list[list[str]]:
    """Without log4j's lines ([<time>] LEVEL ...): a client's warnings, for comparisons that are about the tool's
    own output."""
    return [line for line in lines if not (line and line[0] == "[<time>]")]
