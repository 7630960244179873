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
# Each logging method of a bound logger and the level it logs at.
_METHOD_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "msg": logging.INFO, "warning": logging.WARNING,
                  "warn": logging.WARNING, "error": logging.ERROR, "exception": logging.ERROR,
                  "critical": logging.CRITICAL, "fatal": logging.CRITICAL}
OFF = logging.CRITICAL + 10  # above every method: nothing is logged


def _nop(self, event, *args, **kw) -> None:
    return None


async def _anop(self, event, *args, **kw) -> None:
    return None


class SwitchableBoundLogger(structlog.make_filtering_bound_logger(logging.DEBUG)):  # type: ignore[misc]
    """structlog's filtering logger whose level can change at run time (a broker logger's level set by
    IncrementalAlterConfigs, as Kafka's BROKER_LOGGER resource): a method below the level is a no-op set on the
    class, so loggers already cached keep costing nothing when they are filtered out."""

    min_level = logging.DEBUG

    def log(self, level: int, event: str, *args, **kw):
        if level < type(self).min_level:
            return None
        return super().log(level, event, *args, **kw)

    async def alog(self, level: int, event: str, *args, **kw):
        if level < type(self).min_level:
            return None
        return await super().alog(level, event, *args, **kw)

    def is_enabled_for(self, level: int) -> bool:
        return level >= type(self).min_level

    def get_effective_level(self) -> int:
        return type(self).min_level


def set_level(level: int) -> None:
    """Every broker logger logs at `level` (a `logging` level, or OFF) from now on."""
    SwitchableBoundLogger.min_level = level
    for name, method_level in _METHOD_LEVELS.items():
        for attr, nop in ((name, _nop), ("a" + name, _anop)):
            if method_level < level:
                setattr(SwitchableBoundLogger, attr, nop)
            elif attr in vars(SwitchableBoundLogger):
                delattr(SwitchableBoundLogger, attr)


def current_level() -> int:
    return SwitchableBoundLogger.min_level


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
    set_level(resolve_level(level))
    structlog.configure(
        processors=processors,
        wrapper_class=SwitchableBoundLogger,
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
