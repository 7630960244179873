"""Regular expressions that clients send, evaluated in linear time and away from the event loop.

Kafka compiles the client-supplied patterns it matches against its own names (a consumer group's subscribed topic
regex, ListTransactions' transactional id pattern) with RE2/J, whose matching time is linear in the text; a
backtracking engine (Python's `re`, `java.util.regex`) can take hours on one pattern. Shoal uses RE2 itself
(google-re2): the same syntax as RE2/J (no backreferences, lookaround, possessive quantifiers or atomic groups,
which are refused as invalid, as RE2/J refuses them) and a whole-name match, as Kafka's `matcher(name).matches()`.

Linear still means "pattern size x text size" per name, and RE2 may spend tens of milliseconds compiling a short
pattern before refusing it for exceeding its memory budget, holding the interpreter's lock while it compiles. So the
broker neither compiles nor matches client patterns in its own process: `RegexWorker` hands them to a child process
(broker/regex_worker.py, at lowered scheduling priority) over a pipe, and awaits the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import struct
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import re2
import structlog

log = structlog.get_logger(__name__)

# Longest pattern accepted (characters). Kafka sets none; RE2/J's and RE2's costs grow with the pattern, and
# librdkafka joins all of a consumer's `^` subscriptions into one pattern, so the bound is generous.
MAX_PATTERN_LENGTH = 4096
# Longest a request's matching may take in the worker (seconds). Linear is still pattern size x name size per name:
# a 4 096-character pattern costs RE2 about 20 ms per 249-character name, minutes over ten thousand topics, while
# every other request waits. A pattern that needs longer is refused; a common one takes milliseconds.
MAX_MATCH_SECONDS = 5.0
_NAMES_PER_CLOCK_CHECK = 16

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern on stderr
_FRAME = struct.Struct(">I")


class RegexError(ValueError):
    """The pattern is not one RE2 accepts (or is too long); `detail` says why, as RE2/J's description does.
    `too_costly`: it is valid but matching it took longer than the request's budget."""

    def __init__(self, detail: str, too_costly: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.too_costly = too_costly


class RegexUnavailable(Exception):
    """The regex worker process failed or could not be started; the request may be retried."""


def compile_pattern(pattern: str, max_length: int = MAX_PATTERN_LENGTH) -> Any:
    """Compile `pattern` with RE2 (never in the broker's process: see the module's doc). Raises RegexError."""
    if len(pattern) > max_length:
        raise RegexError(f"longer than {max_length} characters")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as err:
        detail = err.args[0] if err.args else str(err)
        raise RegexError(detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)) from None


def full_matches(compiled: Any, names: Sequence[str], deadline: float | None = None) -> list[str]:
    """The names `compiled` matches whole (Kafka's `Pattern.matcher(name).matches()`), in order. Raises RegexError
    (too_costly) once `time.monotonic()` passes `deadline`."""
    fullmatch = compiled.fullmatch
    if deadline is None:
        return [name for name in names if fullmatch(name) is not None]
    out: list[str] = []
    for start in range(0, len(names), _NAMES_PER_CLOCK_CHECK):
        if time.monotonic() > deadline:
            raise RegexError("takes too long to match against the names", too_costly=True)
        out += [name for name in names[start:start + _NAMES_PER_CLOCK_CHECK] if fullmatch(name) is not None]
    return out


def match_all(check: Iterable[str], resolve: Iterable[str], names: Sequence[str],
              max_length: int = MAX_PATTERN_LENGTH,
              budget_s: float | None = None) -> dict[str, RegexError | list[str]]:
    """Compile every pattern of `check` and `resolve`: pattern -> RegexError if invalid (or, `too_costly`, if
    matching went past `budget_s` seconds for the whole call), else the names it matches ([] if only checked)."""
    deadline = time.monotonic() + budget_s if budget_s is not None else None
    resolve = set(resolve)
    out: dict[str, RegexError | list[str]] = {}
    for pattern in sorted(set(check) | resolve):
        try:
            compiled = compile_pattern(pattern, max_length)
            out[pattern] = full_matches(compiled, names, deadline) if pattern in resolve else []
        except RegexError as err:
            out[pattern] = err
    return out


def encode_frame(message: Any) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return _FRAME.pack(len(body)) + body


def frame_size(header: bytes) -> int:
    return _FRAME.unpack(header)[0]


class RegexWorker:
    """The broker's side of the regex worker process (component `regex_worker`): one request at a time, the child
    started on first use and again after it failed. Name lists given with a `family` and version are sent once
    per version and kept by the child (the topic names), others with every request."""

    def __init__(self, max_length: int = MAX_PATTERN_LENGTH, budget_s: float = MAX_MATCH_SECONDS) -> None:
        self.max_length = max_length
        self.budget_s = budget_s
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._sent: dict[str, int] = {}  # family -> version of the names the running child holds

    async def match(self, check: Iterable[str], resolve: Iterable[str], names: Sequence[str],
                    family: tuple[str, int] | None = None) -> dict[str, RegexError | list[str]]:
        """`match_all` in the worker process. Raises RegexUnavailable. A caller cancelled while waiting does not
        cut the exchange short (the answer is dropped), so the pipe never holds half a conversation."""
        task = asyncio.ensure_future(self._match(sorted(set(check)), sorted(set(resolve)), names, family))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return await asyncio.shield(task)

    async def _match(self, check: list[str], resolve: list[str], names: Sequence[str],
                     family: tuple[str, int] | None) -> dict[str, RegexError | list[str]]:
        async with self._lock:
            try:
                proc = await self._running()
                assert proc.stdin is not None and proc.stdout is not None
                request: dict[str, Any] = {"check": check, "resolve": resolve, "max_length": self.max_length,
                                           "budget_s": self.budget_s}
                if family is None:
                    request["names"] = list(names) if resolve else []
                else:
                    request["family"], request["version"] = family
                    if self._sent.get(family[0]) != family[1]:
                        request["names"] = list(names)
                proc.stdin.write(encode_frame(request))
                await proc.stdin.drain()
                answer = json.loads(await proc.stdout.readexactly(frame_size(await proc.stdout.readexactly(4))))
            except (OSError, EOFError, ValueError, asyncio.IncompleteReadError) as err:
                log.error("regex worker failed; it is started again on the next request", error=repr(err))
                await self.close()
                raise RegexUnavailable(str(err)) from None
            if family is not None:
                self._sent[family[0]] = family[1]
            return {p: RegexError(r["error"], r.get("costly", False)) if "error" in r else r["matches"]
                    for p, r in answer.items()}

    async def _running(self) -> asyncio.subprocess.Process:
        if self._proc is not None and self._proc.returncode is None:
            return self._proc
        self._sent = {}
        env = dict(os.environ)
        # The child imports this package from where the broker imported it (checkout or installed wheel).
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "broker.regex_worker", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, env=env)
        log.info("regex worker started", pid=self._proc.pid)
        return self._proc

    async def start(self) -> None:
        """Start the child ahead of the first request (its interpreter takes a moment to come up)."""
        async with self._lock:
            try:
                await self._running()
            except OSError as err:
                log.error("regex worker could not be started", error=repr(err))

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
