"""structlog set-up: console output on a TTY, JSON lines otherwise; level from --log-level or SHOAL_LOG_LEVEL.

Log lines go to stderr. Request context (api, version, correlation id, client id) is bound per request by the
router on `RequestContext.log`.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import structlog

LEVELS = ("debug", "info", "warning", "error", "critical")


def resolve_level(level: str | None) -> int:
    name = (level or os.environ.get("SHOAL_LOG_LEVEL") or "info").lower()
    if name == "warn":
        name = "warning"
    if name not in LEVELS:
        raise ValueError(f"unknown log level {name!r}; one of {', '.join(LEVELS)}")
    return getattr(logging, name.upper())


def configure(level: str | None = None, fmt: str | None = None, stream: TextIO | None = None) -> None:
    """Configure structlog once for the process. fmt: "json", "console" or None (console if stream is a TTY)."""
    stream = stream or sys.stderr
    fmt = fmt or os.environ.get("SHOAL_LOG_FORMAT") or ("console" if stream.isatty() else "json")
    if fmt not in ("json", "console"):
        raise ValueError(f"unknown log format {fmt!r}; json or console")
    processors: list = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if fmt == "json":
        # Structured tracebacks without frame locals: locals can be huge (request buffers) and leak data.
        exceptions = structlog.processors.ExceptionRenderer(
            structlog.tracebacks.ExceptionDictTransformer(show_locals=False))
        processors += [exceptions, structlog.processors.JSONRenderer()]
    else:
        processors += [structlog.dev.ConsoleRenderer(colors=stream.isatty(), pad_event_to=0, sort_keys=False)]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(resolve_level(level)),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )


def install_asyncio_handler(loop) -> None:
    """Route what asyncio reports itself (an exception nobody retrieved, a failing callback) through structlog:
    one JSON line with a structured traceback instead of plain-text tracebacks in the log."""
    logger = structlog.get_logger("asyncio")

    def handle(_loop, context: dict) -> None:
        fields = {key: repr(value)[:300] for key, value in context.items() if key not in ("message", "exception")}
        logger.error(context.get("message") or "asyncio error", exc_info=context.get("exception"), **fields)

    loop.set_exception_handler(handle)
