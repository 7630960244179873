"""librdkafka's debug log lines captured in memory: `logger, lines = captured_logger(name)`, then pass
`logger=logger` to a confluent-kafka client (with a `debug` setting) and read `lines` as it runs."""

from __future__ import annotations

import logging


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def captured_logger(name: str) -> tuple[logging.Logger, list[str]]:
    """A DEBUG logger of its own (not propagated) and the list its messages are appended to."""
    handler = _Lines()
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return logger, handler.lines
