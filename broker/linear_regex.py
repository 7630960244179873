"""Regular expressions that clients send, evaluated in linear time and off the event loop.

Kafka compiles the client-supplied patterns it matches against its own names (a consumer group's subscribed topic
regex, ListTransactions' transactional id pattern) with RE2/J, whose matching time is linear in the text; a
backtracking engine (Python's `re`, `java.util.regex`) can take hours on one pattern. Shoal uses RE2 itself
(google-re2): the same syntax as RE2/J (no backreferences, lookaround, possessive quantifiers or atomic groups,
which are refused as invalid, as RE2/J refuses them) and a whole-name match, as Kafka's `matcher(name).matches()`.

Linear still means "pattern size x text size" per name, and compiling a short pattern may take tens of
milliseconds (RE2 refuses a program over its memory budget only once it has built that much), so neither
compiling nor matching runs on the event loop: `run` hands them to one dedicated worker thread of lowered
scheduling priority. RE2 releases the GIL while it matches; between chunks of names the worker lets the GIL go
so the loop is not kept waiting for the interpreter's switch interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import re2

# Longest pattern accepted (characters). Kafka sets none; RE2/J's and RE2's costs grow with the pattern, and
# librdkafka joins all of a consumer's `^` subscriptions into one pattern, so the bound is generous.
MAX_PATTERN_LENGTH = 4096
# Names matched between two hand-overs of the GIL in the worker.
_CHUNK = 128
_WORKER_NICENESS = 10

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern on stderr

T = TypeVar("T")


class RegexError(ValueError):
    """The pattern is not one RE2 accepts (or is too long); `detail` says why, as RE2/J's description does."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def compile_pattern(pattern: str, max_length: int = MAX_PATTERN_LENGTH) -> Any:
    """Compile `pattern` with RE2 (call off the event loop: see the module's doc). Raises RegexError."""
    if len(pattern) > max_length:
        raise RegexError(f"longer than {max_length} characters")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as err:
        detail = err.args[0] if err.args else str(err)
        raise RegexError(detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)) from None


def full_matches(compiled: Any, names: Iterable[str]) -> list[str]:
    """The names `compiled` matches whole (Kafka's `Pattern.matcher(name).matches()`), in order."""
    fullmatch = compiled.fullmatch
    out: list[str] = []
    chunk = 0
    for name in names:
        if fullmatch(name) is not None:
            out.append(name)
        chunk += 1
        if chunk == _CHUNK:
            chunk = 0
            time.sleep(0)  # let the GIL go: a waiting event loop takes it now rather than at the switch interval
    return out


def _lower_priority() -> None:
    # Linux applies a niceness to the one thread whose id is given: the event loop's thread wins the CPU.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _WORKER_NICENESS)


_executor: ThreadPoolExecutor | None = None


def _worker() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shoal-regex", initializer=_lower_priority)
    return _executor


async def run(fn: Callable[..., T], *args: Any) -> T:
    """Run `fn(*args)` (compiling and matching client patterns) on the regex worker thread."""
    return await asyncio.get_running_loop().run_in_executor(_worker(), fn, *args)
