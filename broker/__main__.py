"""`python -m broker [server.properties] [--override key=value ...] [--port-file PATH] [--log-level LEVEL]`."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import structlog

from broker import logging as broker_logging
from broker.allocator import tune_allocator
from broker.config import ConfigError, load_config
from broker.heap import freeze_imports


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="shoal-broker", description="Shoal: a Kafka-wire-compatible broker.")
    parser.add_argument("properties", nargs="?", help="Java properties file (Kafka's server.properties names)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a property, after the file (repeatable)")
    parser.add_argument("--port-file", metavar="PATH", help="write the bound port here once listening")
    parser.add_argument("--add-scram", action="append", default=[], metavar="MECHANISM=[name=U,password=P]",
                        help="create a SCRAM credential at start unless the user already has one for the mechanism "
                             "(as kafka-storage format --add-scram; repeatable)")
    parser.add_argument("--log-level", choices=broker_logging.LEVELS, help="default: $SHOAL_LOG_LEVEL or info")
    parser.add_argument("--log-format", choices=("json", "console"), help="default: console on a TTY, else json")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> int:
    from broker.app import Broker  # noqa: PLC0415 - after logging is configured
    from broker.cluster.journal import JournalError  # noqa: PLC0415
    from broker.cluster.topics import TopicError  # noqa: PLC0415
    from broker.log.dir_failure import KafkaStorageError  # noqa: PLC0415
    from broker.log.segment import LogCorruptionError  # noqa: PLC0415
    from broker.security.manager import parse_add_scram  # noqa: PLC0415

    freeze_imports()
    log = structlog.get_logger("broker")
    try:
        config = load_config(args.properties, args.override)
    except ConfigError as err:
        log.error("invalid configuration", error=str(err))
        return 2
    try:
        scram = [parse_add_scram(text) for text in args.add_scram]
    except ConfigError as err:
        log.error("invalid --add-scram", error=str(err))
        return 2
    broker = Broker(config, port_file=args.port_file, add_scram=scram)
    loop = asyncio.get_running_loop()
    broker_logging.install_asyncio_handler(loop)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except (ConfigError, OSError, JournalError, LogCorruptionError, TopicError, KafkaStorageError) as err:
        # TopicError: creating an internal topic failed (a full disk); KafkaStorageError: the log dir failed
        log.error("broker failed to start", error=str(err))
        await broker.stop()
        return 1
    stopping = asyncio.ensure_future(stop.wait())
    failed = asyncio.ensure_future(broker.failed.wait())
    await asyncio.wait({stopping, failed}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    failed.cancel()
    if broker.failed.is_set() and not stop.is_set():
        await broker.wait_stopped()  # it stops itself once the requests in flight have their (error) answers
    await broker.stop()
    return 1 if broker.failed.is_set() else 0


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        broker_logging.configure(args.log_level, args.log_format)
    except ValueError as err:
        print(f"shoal-broker: {err}", file=sys.stderr)
        sys.exit(2)
    tune_allocator()
    import uvloop  # noqa: PLC0415

    sys.exit(uvloop.run(serve(args)))


if __name__ == "__main__":
    main()
