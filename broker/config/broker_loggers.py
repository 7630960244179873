"""The BROKER_LOGGER config resource (type 8): a broker's loggers and their levels, described and changed at run
time with DescribeConfigs and IncrementalAlterConfigs, as Kafka's ConfigHelper and ConfigAdminManager serve them.

Shoal logs through one structlog configuration, so it has one logger, Kafka's `root`; a level set here holds until
the process ends and is never persisted (Kafka keeps logger levels in memory too). Kafka's level names map onto
Python's: TRACE logs what DEBUG does, FATAL what CRITICAL does.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from broker import logging as broker_logging
from protocol.errors import ErrorCode

BROKER_LOGGER_RESOURCE = 8
ROOT_LOGGER = "root"
DYNAMIC_BROKER_LOGGER_CONFIG = 6  # ConfigSource of every logger row
UNKNOWN_TYPE = 0  # ConfigType of a logger row (Kafka leaves it unset)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Kafka's LogLevelConfig.VALID_LOG_LEVELS and the Python level each maps to; Kafka names them sorted.
LEVELS = {"DEBUG": logging.DEBUG, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "INFO": logging.INFO,
          "TRACE": logging.DEBUG, "WARN": logging.WARNING}
_NAMES = {logging.CRITICAL: "FATAL", logging.ERROR: "ERROR", logging.WARNING: "WARN", logging.INFO: "INFO",
          logging.DEBUG: "DEBUG"}


class LoggerError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class LoggerRow(NamedTuple):
    name: str
    level: str


class BrokerLoggers:
    """The levels of this broker's loggers (only `root`), as the BROKER_LOGGER resource shows and sets them."""

    def __init__(self, node_id: int) -> None:
        self._node_id = node_id
        self._level_name: str | None = None  # the Kafka name last set (TRACE is kept as TRACE)

    def check_described_name(self, name: str) -> None:
        """DescribeConfigs names this broker by its id (Kafka's ConfigHelper)."""
        if not name:
            raise LoggerError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if _node_id(name, "Broker") != self._node_id:
            raise LoggerError(ErrorCode.INVALID_REQUEST,
                              f"Unexpected broker id, expected {self._node_id} but received {name}")

    def check_altered_name(self, name: str) -> None:
        """IncrementalAlterConfigs names this broker by its id (Kafka's RuntimeLoggerManager)."""
        if _node_id(name, "Node") != self._node_id:
            raise LoggerError(ErrorCode.INVALID_REQUEST,
                              f"Unexpected node id. Expected {self._node_id}, but received {name}")

    def level(self) -> str:
        current = broker_logging.current_level()
        if self._level_name is not None and LEVELS[self._level_name] == current:
            return self._level_name
        return _NAMES.get(current, "OFF")

    def describe(self, name: str, keys: list[str] | None) -> list[LoggerRow]:
        self.check_described_name(name)
        rows = [LoggerRow(ROOT_LOGGER, self.level())]
        return rows if keys is None else [row for row in rows if row.name in keys]

    def alter(self, name: str, ops: list[tuple[str, int, str | None]], *, authorized: bool,
              validate_only: bool) -> None:
        """Kafka's order: ALTER_CONFIGS on the cluster, the broker's id, every operation valid (its
        validateLogLevelConfigs), then the changes applied; LoggerError."""
        if not authorized:
            raise LoggerError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)  # as Kafka: no message
        self.check_altered_name(name)
        for logger, op, value in ops:
            if op in (APPEND, SUBTRACT):
                kind = "APPEND" if op == APPEND else "SUBTRACT"
                raise LoggerError(ErrorCode.INVALID_REQUEST,
                                  f"{kind} operation is not allowed for the BROKER_LOGGER resource")
            if logger != ROOT_LOGGER:
                raise LoggerError(ErrorCode.INVALID_CONFIG, f"Logger {logger} does not exist!")
            if op == DELETE:
                raise LoggerError(ErrorCode.INVALID_REQUEST,
                                  f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
            if op != SET:
                raise LoggerError(ErrorCode.INVALID_REQUEST,
                                  f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource")
            if value not in LEVELS:
                raise LoggerError(ErrorCode.INVALID_CONFIG,
                                  f"Cannot set the log level of {logger} to {value} as it is not a supported log "
                                  f"level. Valid log levels are {', '.join(LEVELS)}")
        if validate_only:
            return
        for _logger, _op, value in ops:
            assert value is not None
            self._level_name = value
            broker_logging.set_level(LEVELS[value])


def _node_id(name: str, what: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise LoggerError(ErrorCode.INVALID_REQUEST, f"{what} id must be an integer, but it is: {name}") from None
